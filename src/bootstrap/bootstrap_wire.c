/* bootstrap_wire.c - the bootstrap's wire formats: layouts and addresses. */
#include "bootstrap/bootstrap_wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "base/log.h"

_Static_assert(sizeof(hc_bootstrap_wire_addr_t) == 24, "wire address layout");
_Static_assert(sizeof(hc_bootstrap_hello_t) == 52, "hello layout");
_Static_assert(sizeof(hc_bootstrap_reply_t) == 36, "reply layout");
_Static_assert(sizeof(hc_bootstrap_ring_hello_t) == 24, "ring hello layout");

hcomm_status_t hc_bootstrap_addr_to_wire(const struct sockaddr *sa, hc_bootstrap_wire_addr_t *w)
{
    memset(w, 0, sizeof(*w));
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        w->family                    = 4;
        w->port                      = in->sin_port;
        memcpy(w->ip, &in->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        w->family                      = 6;
        w->port                        = in6->sin6_port;
        w->scope_id                    = htonl(in6->sin6_scope_id);
        memcpy(w->ip, &in6->sin6_addr, 16);
    } else {
        hc_error(BOOT, "unsupported address family %d", (int)sa->sa_family);
        return HCOMM_ERR_INVALID_ARG;
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_bootstrap_addr_from_wire(const hc_bootstrap_wire_addr_t *w,
                                           struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof(*ss));
    if (w->family == 4) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family         = AF_INET;
        in->sin_port           = w->port;
        memcpy(&in->sin_addr, w->ip, 4);
        *len = sizeof(*in);
    } else if (w->family == 6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        in6->sin6_family         = AF_INET6;
        in6->sin6_port           = w->port;
        in6->sin6_scope_id       = ntohl(w->scope_id);
        memcpy(&in6->sin6_addr, w->ip, 16);
        *len = sizeof(*in6);
    } else {
        return HCOMM_ERR_PROTOCOL;
    }
    return HCOMM_SUCCESS;
}

/* Whether s is an error status of hcomm.h's list. */
static int status_is_error(int32_t s)
{
    switch (s) {
#define HC_WIRE_STATUS_(name, value, desc) case value:
        HCOMM_STATUS_MAP(HC_WIRE_STATUS_)
#undef HC_WIRE_STATUS_
        return s < 0;
    }
    return 0;
}

hcomm_status_t hc_bootstrap_reply_check(const hc_bootstrap_reply_t *rep, int rank, int nranks,
                                        struct sockaddr_storage *succ, socklen_t *succ_len)
{
    int32_t status  = (int32_t)ntohl((uint32_t)rep->status);
    int     njoined = (int32_t)ntohl((uint32_t)rep->njoined);
    if (ntohl(rep->magic) != HC_BOOTSTRAP_REPLY_MAGIC) {
        hc_error(BOOT, "rank %d: unexpected message from the bootstrap root", rank);
        return HCOMM_ERR_PROTOCOL;
    }
    if (status == HCOMM_ERR_TIMEOUT) {
        hc_error(BOOT, "rank %d: the bootstrap root timed out with %d of %d ranks joined", rank,
                 njoined, nranks);
        return HCOMM_ERR_TIMEOUT;
    }
    if (status != 0) {
        hc_error(BOOT, "rank %d of %d: the bootstrap root refused this rank: %s", rank, nranks,
                 status_is_error(status) ? hcomm_status_str((hcomm_status_t)status)
                                         : "an unknown status");
        /* Only a status of the list passes on: a value in a gap of it (-10,
         * say: tests/fuzz/fuzz_boot_reply.c) was returned as a status that
         * has no name. */
        return status_is_error(status) ? (hcomm_status_t)status : HCOMM_ERR_PROTOCOL;
    }
    if (hc_bootstrap_addr_from_wire(&rep->succ, succ, succ_len) != HCOMM_SUCCESS) {
        hc_error(BOOT, "rank %d: the bootstrap root sent a bad address for rank %d", rank,
                 (rank + 1) % nranks);
        return HCOMM_ERR_PROTOCOL;
    }
    return HCOMM_SUCCESS;
}
