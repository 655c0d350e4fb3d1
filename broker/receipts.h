/* receipts.db: one row a provider call errand-broker handled (doc/design.md,
 * "The broker"), in SQLite (WAL) under paths.state. Written by the broker, read
 * by errandctl receipts. No header, body, credential or stand-in is ever
 * stored: only what struct receipt holds. No TLS here: errandctl links it. */
#ifndef ERRAND_BROKER_RECEIPTS_H
#define ERRAND_BROKER_RECEIPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RECEIPTS_DB_NAME "receipts.db" /* in paths.state */
#define RECEIPT_PATH_MAX 256	       /* bytes of a receipt's path */

enum receipt_outcome {
	RECEIPT_COMPLETED = 0,
	RECEIPT_INTERRUPTED =
		1,	     /* the answer failed, was cut for its size, or the session hung up */
	RECEIPT_DENIED = 2,  /* the call did not carry the session's stand-in */
	RECEIPT_REFUSED = 3, /* the broker would not forward it, or refused its answer */
	RECEIPT_UNREACHABLE = 4, /* upstream-unreachable */
};

struct receipt {
	int64_t started_at_us; /* the call's place in the order of calls (journal_stamp) */
	int64_t ended_at_ms;   /* Unix time, milliseconds */
	const char *session;
	const char *provider;
	const char
		*credential_var; /* the variable the stand-in is given in, like ANTHROPIC_API_KEY */
	const char *host;
	const char *method; /* a standard method name, or "OTHER" */
	const char *path;   /* receipt_path(): decoded, scrubbed, cut, escaped */
	uint64_t query_len; /* bytes of the query, which is never kept */
	int status;	    /* what the session was answered; 0 if nothing */
	int64_t duration_ms;
	uint64_t bytes_up;   /* request body bytes forwarded */
	uint64_t bytes_down; /* answer body bytes relayed */
	enum receipt_outcome outcome;
	uint64_t unrecorded; /* denied calls left unrecorded since the last recorded one */
};

struct receipts;

/* Opens (create: creating, with the table, mode 0600, and adding started_at_us
 * to a table made before it had one) the database at path.
 * Returns one the caller owns (receipts_close), or NULL with errno. */
struct receipts *receipts_open(const char *path, bool create);
void receipts_close(struct receipts *r); /* NULL-safe */

/* Adds one row. 0 or -EIO; the caller logs a failure and goes on. */
int receipts_add(struct receipts *r, const struct receipt *rc);
/* Adds rows[0..n) in one transaction: all or none. 0 or -EIO. */
int receipts_add_all(struct receipts *r, const struct receipt *rows, size_t n);

/* Calls fn for every row of session (every row when NULL), in the order the
 * calls were made (started_at_us; rows from before that column, which hold 0,
 * first and in the order they were added); the strings live until fn
 * returns. A non-zero return from fn stops the walk and is returned. 0, fn's
 * value, or -EIO. */
typedef int (*receipt_fn)(void *ctx, const struct receipt *rc);
int receipts_list(struct receipts *r, const char *session, receipt_fn fn, void *ctx);

const char *receipt_outcome_name(enum receipt_outcome o);
/* The method as kept: itself when standard (GET, HEAD, POST, PUT, DELETE,
 * CONNECT, OPTIONS, TRACE, PATCH), "OTHER" otherwise. */
const char *receipt_method(const char *method);
/* A path as kept, from a raw route path: cut at the query, decoded once, cut
 * again at a "?" it encoded, stand-ins replaced by "[stand-in]", control
 * characters and backslashes escaped (\xNN), at most RECEIPT_PATH_MAX bytes
 * (no escape cut in half). out must hold RECEIPT_PATH_MAX + 1. */
void receipt_path(const char *raw, char *out);

#endif
