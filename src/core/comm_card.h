/* comm_card.h - what every rank publishes about itself at init (private to
 * comm.c and comm_transports.c): its info, its discovered topology, digests
 * of the settings all ranks must share, and an address for each transport it
 * opened. */
#ifndef HC_CORE_COMM_CARD_H
#define HC_CORE_COMM_CARD_H

#include <stdint.h>

#include "base/params.h"
#include "bootstrap/bootstrap_wire.h"
#include "topology/topo.h"
#include "transport/transport.h"

typedef struct comm_card {
    hc_peer_info_t info;
    hc_rank_topo_t topo;
    uint32_t       opened; /* bit t: hc_tl_table[t] opened on this rank */
    hc_bootstrap_wire_addr_t watch;  /* where peers ask where it is (core/watch.h) */
    int32_t        nagreed; /* digests of the settings every rank must share */
    uint64_t       agreed[HC_PARAMS_AGREED_MAX];
    uint32_t       addr_len[HC_TL_TABLE_MAX];
    uint8_t        addr[HC_TL_TABLE_MAX][HC_TL_ADDR_MAX];
} comm_card_t;

/* Opens the transports HCOMM_TRANSPORT allows into comm and writes this
 * rank's part of its card (comm_transports.c). */
hcomm_status_t hc_comm_tl_open(hcomm_comm_t comm, comm_card_t *card);
/* Chooses each peer's transport from every rank's card (both ends of a pair
 * choose alike), keeps the chosen addresses and closes the transports no peer
 * uses. No connection is made: hc_comm_connect does that on first use. */
hcomm_status_t hc_comm_tl_choose(hcomm_comm_t comm, const comm_card_t *cards);

#endif
