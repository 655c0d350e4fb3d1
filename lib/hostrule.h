/* Host rules, as doc/design.md "Host rules" states them: "name" or "name:port"
 * (443 unless given), "*.example.com" for exactly one label below, never the
 * apex; no "*.com", no IP literals; lowercased, punycode, trailing dot trimmed. */
#ifndef ERRAND_HOSTRULE_H
#define ERRAND_HOSTRULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HOST_NAME_MAX_LEN 253
#define HOST_DEFAULT_PORT 443

struct host_rule {
	char name[HOST_NAME_MAX_LEN + 1]; /* normalised; for a wildcard, without "*." */
	bool wildcard;
	uint16_t port;
};

/* Parses and normalises one rule. On error returns -EINVAL and writes one
 * line into err naming what to change (for example: '*.com' is a wildcard
 * over a whole top-level domain; name a domain below it, like *.example.com). */
int host_rule_parse(const char *s, struct host_rule *out, char *err, size_t errlen);
/* Normalises a bare name (no port, no wildcard) into out. Same errors. */
int host_name_normalize(const char *s, char out[HOST_NAME_MAX_LEN + 1], char *err, size_t errlen);
/* Does the rule admit this (normalised) name? Port not considered. */
bool host_rule_match(const struct host_rule *r, const char *name);
/* "api.example.com:443" or "*.example.com:8443" into buf. */
const char *host_rule_str(const struct host_rule *r, char *buf, size_t len);

#endif
