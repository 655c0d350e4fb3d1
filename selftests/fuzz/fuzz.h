/* What every fuzz target shares: the entry point's prototype and INV, an
 * invariant that aborts (so libFuzzer keeps the input) with where it failed. */
#ifndef ERRAND_FUZZ_H
#define ERRAND_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define INV(cond)                                                                                  \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "invariant failed: %s (%s:%d)\n", #cond, __FILE__,         \
				__LINE__);                                                         \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
