/* bootstrap_root.h - the root's roll of the ranks that joined, and how it
 * admits a connection that passed the gate (bootstrap_root.c). Apart from the
 * root's thread so that tests/fuzz/fuzz_boot_gate.c can run the admission on
 * hellos of its making. */
#ifndef HC_BOOTSTRAP_ROOT_H
#define HC_BOOTSTRAP_ROOT_H

#include "bootstrap/bootstrap_wire.h"
#include "hcomm.h"

#define HC_BOOTSTRAP_MAX_RANKS (1 << 22)

typedef struct hc_bootstrap_roll {
    int                       nranks; /* 0 until the first hello of a valid size */
    int                       njoined;
    int                       nseen;   /* distinct ranks that said hello, refused ones included */
    hcomm_status_t            doomed;  /* a rank that proved the secret was refused: all are */
    int                      *rank_fd; /* nranks entries, -1 until the rank joined */
    hc_bootstrap_wire_addr_t *rank_addr;
    uint8_t                  *seen; /* nranks flags: the rank said hello */
} hc_bootstrap_roll_t;

/* An hc_gate_admit_fn, arg a roll: the hello (an hc_bootstrap_hello_t) names a
 * rank, and fd becomes that rank's; or the fd gets a reply with the refusal's
 * status and is closed. */
void hc_bootstrap_roll_admit(void *roll, int fd, const void *hello, const char *peer);
/* Best effort: a reply with status why on fd, then closes it. */
void hc_bootstrap_roll_refuse(const hc_bootstrap_roll_t *roll, int fd, hcomm_status_t why);
/* Closes the ranks' fds and frees the roll's arrays (not the roll). */
void hc_bootstrap_roll_free(hc_bootstrap_roll_t *roll);

#endif
