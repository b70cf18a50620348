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
