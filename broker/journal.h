/* The broker's receipt writer: calls hand their receipts over and go on; one
 * thread writes whatever has gathered to receipts.db in one transaction, so a
 * slow or locked database never holds a call up. */
#ifndef ERRAND_BROKER_JOURNAL_H
#define ERRAND_BROKER_JOURNAL_H

#include "broker/receipts.h"

/* Starts the writer for r (NULL: every receipt is lost, and logged). 0 or -errno. */
int journal_start(struct receipts *r);
/* Queues a copy of rc. Never blocks on the database; a receipt that cannot
 * be queued (the queue full) is logged as lost. */
void journal_add(const struct receipt *rc);
/* A call's place in the order of calls, taken when its head has been read:
 * wall-clock microseconds, made unique and increasing within the broker, so a
 * call its session made after another's answer always sorts after it, however
 * late either receipt reaches the queue. */
int64_t journal_stamp(void);
/* Writes what is queued and stops the writer. */
void journal_stop(void);

#endif
