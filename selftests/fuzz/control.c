/* libFuzzer target for the control protocol (agent/control.c): every input
 * is one frame as a client might send it; whatever parses must be a known
 * type with a valid payload that encodes and parses back the same. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/control.h"
#include "selftests/fuzz/fuzz.h"

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* err is one line: terminated, no control characters. */
static void check_err(const char *err, size_t errlen)
{
	size_t n = strnlen(err, errlen);

	INV(n < errlen);
	INV(n > 0);
	for (size_t i = 0; i < n; i++)
		INV((unsigned char)err[i] >= 0x20 && err[i] != 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct control_msg msg = {.version = 0xa5a5, .type = 0xa5a5, .payload = NULL}, again;
	char err[128];
	uint8_t *copy, *frame;
	size_t flen;
	int rc;

	/* an exact-size copy, so ASan sees any read past the frame */
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	rc = control_parse(copy, size, &msg, err, sizeof(err));
	INV(rc == 0 || rc == -EPROTO || rc == -EMSGSIZE);
	if (rc) {
		check_err(err, sizeof(err));
		INV(msg.version == 0xa5a5 && msg.type == 0xa5a5 && !msg.payload);
		if (rc == -EMSGSIZE)
			INV(size >= CONTROL_HEADER_LEN &&
			    get32(copy + 4) > control_type_max((uint16_t)(copy[2] << 8 | copy[3])));
		free(copy);
		return 0;
	}
	INV(size >= CONTROL_HEADER_LEN);
	INV(size - CONTROL_HEADER_LEN <= control_type_max(msg.type));
	INV(msg.version == CONTROL_VERSION);
	INV(strcmp(control_type_name(msg.type), "unknown"));
	INV(json_is_object(msg.payload));
	INV(!control_validate(msg.type, msg.payload, err, sizeof(err)));

	/* what was accepted encodes within its limit and reads back the same;
	 * only reals grow when encoded ("1e2" is "100.0"), and only answers of
	 * MiB limits may hold them */
	rc = control_frame(msg.type, msg.payload, &frame, &flen);
	INV(rc == 0 || (rc == -EMSGSIZE && size > 1024 * 1024));
	if (rc) {
		control_msg_free(&msg);
		free(copy);
		return 0;
	}
	rc = control_parse(frame, flen, &again, err, sizeof(err));
	INV(rc == 0);
	INV(again.type == msg.type);
	INV(json_equal(again.payload, msg.payload));
	control_msg_free(&again);
	free(frame);
	control_msg_free(&msg);
	control_msg_free(&msg);
	free(copy);
	return 0;
}
