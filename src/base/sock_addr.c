/* sock_addr.c - socket addresses: parsing host:port, printing, and picking
 * the interface HCOMM_SOCKET_IFNAME names. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/params.h"
#include "base/sock.h"

#ifdef HC_HAVE_GETADDRINFO_A
/* A name lookup the resolver runs in its own thread (getaddrinfo_a), so that
 * a DNS server that never answers costs at most HCOMM_TIMEOUT, as every other
 * wait does; resolv.conf's timeouts and attempts alone can add up to minutes. */
typedef struct sock_lookup {
    struct gaicb    cb;
    struct addrinfo hints;
    char            host[256];
} sock_lookup_t;

/* getaddrinfo's status; EAI_AGAIN with *late set when bound seconds passed. */
static int sock_lookup_bounded(const char *host, const struct addrinfo *hints,
                               struct addrinfo **res, double bound, int *late)
{
    sock_lookup_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return EAI_MEMORY;
    snprintf(l->host, sizeof(l->host), "%s", host);
    l->hints              = *hints;
    l->cb.ar_name         = l->host;
    l->cb.ar_service      = "0";
    l->cb.ar_request      = &l->hints;
    struct gaicb *list[1] = {&l->cb};
    int           gai     = getaddrinfo_a(GAI_NOWAIT, list, 1, NULL);
    if (gai != 0) {
        free(l);
        return gai;
    }
    double deadline = hc_clock_now() + bound;
    while ((gai = gai_error(&l->cb)) == EAI_INPROGRESS) {
        double left = deadline - hc_clock_now();
        if (left <= 0)
            break;
        struct timespec ts = hc_clock_span(left);
        (void)gai_suspend((const struct gaicb *const *)list, 1, &ts);
    }
    if (gai == EAI_INPROGRESS) {
        *late = 1;
        int c = gai_cancel(&l->cb);
        if (c == EAI_ALLDONE && gai_error(&l->cb) == 0)
            freeaddrinfo(l->cb.ar_result);
        /* not cancelled: the resolver's thread still writes into l, which is
         * left to it (one small block per lookup that gave up) */
        if (c != EAI_NOTCANCELED)
            free(l);
        return EAI_AGAIN;
    }
    *res = gai == 0 ? l->cb.ar_result : NULL;
    free(l);
    return gai;
}
#else
/* No getaddrinfo_a (a libc without it; the fuzzers' build): the resolver's
 * own limits bound the lookup. */
static int sock_lookup_bounded(const char *host, const struct addrinfo *hints,
                               struct addrinfo **res, double bound, int *late)
{
    (void)bound;
    (void)late;
    return getaddrinfo(host, "0", hints, res);
}
#endif

hcomm_status_t hc_sock_parse_addr(const char *host_port, unsigned subsys,
                                  struct sockaddr_storage *ss, socklen_t *len)
{
    char        host[256];
    const char *host_s, *port_s;
    size_t      hlen;
    if (host_port == NULL)
        return HCOMM_ERR_INVALID_ARG;
    if (host_port[0] == '[') {
        const char *close_b = strchr(host_port, ']');
        if (close_b == NULL || close_b[1] != ':')
            goto err_syntax;
        host_s = host_port + 1;
        hlen   = (size_t)(close_b - host_s);
        port_s = close_b + 2;
    } else {
        const char *colon = strrchr(host_port, ':');
        if (colon == NULL || memchr(host_port, ':', (size_t)(colon - host_port)) != NULL)
            goto err_syntax;
        host_s = host_port;
        hlen   = (size_t)(colon - host_port);
        port_s = colon + 1;
    }
    if (hlen >= sizeof(host))
        goto err_syntax;
    memcpy(host, host_s, hlen);
    host[hlen] = '\0';

    char *end;
    errno     = 0;
    long port = strtol(port_s, &end, 10);
    if (port_s[0] < '0' || port_s[0] > '9' || *end != '\0' || errno != 0 || port > 65535)
        goto err_syntax;

    struct addrinfo  hints = {.ai_family   = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM,
                              .ai_flags    = AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *res, *pick = NULL;
    /* a numeric address first: no resolver, no thread, no wait */
    struct addrinfo num = hints;
    num.ai_flags |= AI_NUMERICHOST;
    int    gai = getaddrinfo(hlen ? host : NULL, "0", &num, &res), late = 0;
    double bound = hc_params_get()->timeout;
    if (gai == EAI_NONAME && hlen > 0)
        gai = sock_lookup_bounded(host, &hints, &res, bound, &late);
    if (late) {
        hc_log_as(HC_LOG_ERROR, subsys,
                  "cannot resolve %s: no answer within %.1f s (HCOMM_TIMEOUT)", host_port, bound);
        return HCOMM_ERR_TIMEOUT;
    }
    if (gai != 0) {
        hc_log_as(HC_LOG_ERROR, subsys, "cannot resolve %s: %s", host_port, gai_strerror(gai));
        return HCOMM_ERR_UNREACHABLE;
    }
    for (struct addrinfo *a = res; a != NULL; a = a->ai_next)
        if (pick == NULL || (a->ai_family == AF_INET && pick->ai_family != AF_INET))
            if (a->ai_family == AF_INET || a->ai_family == AF_INET6)
                pick = a;
    if (pick == NULL || pick->ai_addrlen > sizeof(*ss)) {
        freeaddrinfo(res);
        goto err_syntax;
    }
    memset(ss, 0, sizeof(*ss));
    memcpy(ss, pick->ai_addr, pick->ai_addrlen);
    *len = (socklen_t)pick->ai_addrlen;
    freeaddrinfo(res);
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    return HCOMM_SUCCESS;

err_syntax:
    hc_log_as(HC_LOG_ERROR, subsys, "invalid address \"%s\": expected host:port or [ipv6]:port",
              host_port);
    return HCOMM_ERR_INVALID_ARG;
}

void hc_sock_ip_str(const struct sockaddr *sa, char *buf, size_t size)
{
    const void *ip = NULL;
    if (sa->sa_family == AF_INET)
        ip = &((const struct sockaddr_in *)sa)->sin_addr;
    else if (sa->sa_family == AF_INET6)
        ip = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (ip == NULL || inet_ntop(sa->sa_family, ip, buf, (socklen_t)size) == NULL)
        snprintf(buf, size, "?");
}

void hc_sock_addr_str(const struct sockaddr *sa, char *buf, size_t size)
{
    char ip[INET6_ADDRSTRLEN];
    hc_sock_ip_str(sa, ip, sizeof(ip));
    if (sa->sa_family == AF_INET)
        snprintf(buf, size, "%s:%u", ip, ntohs(((const struct sockaddr_in *)sa)->sin_port));
    else if (sa->sa_family == AF_INET6)
        snprintf(buf, size, "[%s]:%u", ip, ntohs(((const struct sockaddr_in6 *)sa)->sin6_port));
    else
        snprintf(buf, size, "?");
}

/* Whether interface name matches the comma list of prefixes in list, or of
 * exact names when the list starts with '=' (NCCL_SOCKET_IFNAME's syntax). */
static int if_listed(const char *list, const char *name)
{
    int         exact = list[0] == '=';
    const char *p     = list + exact;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        if (n > 0 && strncmp(name, p, n) == 0 && (!exact || name[n] == '\0'))
            return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

/* Interfaces the default choice passes over, as NCCL's does: bridges of
 * containers and virtual machines, which reach no other host. */
#define IF_VIRTUAL "docker,virbr"

/* Whether ifa is a candidate of the given preference tier: without a list of
 * names (spec "" or ^list), 0 = an InfiniBand interface (IPoIB) with carrier,
 * 1 = any other with carrier but a virtual bridge, 2 = any that is up; with a
 * list, 0 = a listed one with carrier, 1 and 2 = a listed one that is up. */
static int if_usable(const struct ifaddrs *ifa, int family, const char *spec, int tier)
{
    if (ifa->ifa_addr == NULL || ifa->ifa_addr->sa_family != family || !(ifa->ifa_flags & IFF_UP))
        return 0;
    /* Link-local IPv6 needs a scope that peers cannot share. */
    if (family == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr))
        return 0;
    int carrier = (ifa->ifa_flags & IFF_RUNNING) != 0;
    if (spec[0] != '\0' && spec[0] != '^')
        return if_listed(spec, ifa->ifa_name) && (tier > 0 || carrier);
    if ((ifa->ifa_flags & IFF_LOOPBACK) || (spec[0] == '^' && if_listed(spec + 1, ifa->ifa_name)))
        return 0;
    if (tier == 0)
        return carrier && if_listed("ib", ifa->ifa_name);
    return tier == 2 || (carrier && !if_listed(IF_VIRTUAL, ifa->ifa_name));
}

const struct ifaddrs *hc_sock_if_pick(const struct ifaddrs *ifs, const char *spec)
{
    for (int tier = 0; tier < 3; tier++)
        for (int pass = 0; pass < 2; pass++) /* IPv4 first */
            for (const struct ifaddrs *ifa = ifs; ifa != NULL; ifa = ifa->ifa_next)
                if (if_usable(ifa, pass == 0 ? AF_INET : AF_INET6, spec, tier))
                    return ifa;
    return NULL;
}

hcomm_status_t hc_sock_if_addr(const char *spec, unsigned subsys, struct sockaddr_storage *ss,
                               socklen_t *len)
{
    struct ifaddrs *ifs;
    if (spec == NULL)
        spec = "";
    if (getifaddrs(&ifs) != 0)
        {
        int err = errno;
        hc_log_as(HC_LOG_ERROR, subsys, "getifaddrs: %s", strerror(err));
        return hc_sock_status(err);
    }
    const struct ifaddrs *pick = hc_sock_if_pick(ifs, spec);

    memset(ss, 0, sizeof(*ss));
    if (pick != NULL) {
        *len = pick->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                    : sizeof(struct sockaddr_in6);
        memcpy(ss, pick->ifa_addr, *len);
        hc_log_as(HC_LOG_DEBUG, subsys, "interface %s", pick->ifa_name);
    }
    freeifaddrs(ifs);
    if (pick == NULL && spec[0] != '\0' && spec[0] != '^') {
        hc_log_as(HC_LOG_ERROR, subsys, "no interface that is up matches HCOMM_SOCKET_IFNAME=%s",
                  spec);
        return HCOMM_ERR_UNREACHABLE;
    }
    if (pick == NULL) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family         = AF_INET;
        in->sin_addr.s_addr    = htonl(INADDR_LOOPBACK);
        *len                   = sizeof(*in);
    }
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = 0;
    return HCOMM_SUCCESS;
}
