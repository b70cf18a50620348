/* fuzz_boot_reply.c - what a rank reads from the bootstrap root after its
 * hello passed: the reply (hc_bootstrap_reply_check) and the successor's
 * address in it (hc_bootstrap_addr_from_wire). Input: a byte for the rank
 * count (1 + byte % 64), a byte for the rank (byte % count), then the 36
 * bytes of the reply (short inputs padded with zeros). A reply that is
 * accepted has a whole address that goes back to the same wire bytes; a
 * refused one ends in an error status of hcomm.h's list, the root's own where
 * it sent one. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "base/sock.h"
#include "bootstrap/bootstrap_wire.h"
#include "fuzz.h"
#include "hcomm.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_logs_to_null();
    return 0;
}

static int status_named(hcomm_status_t st)
{
    return strcmp(hcomm_status_name(st), "HCOMM_UNKNOWN_STATUS") != 0;
}

/* from_wire then to_wire gives w back, less what from_wire ignores. */
static void round_trip(const hc_bootstrap_wire_addr_t *w, const struct sockaddr_storage *ss,
                       socklen_t len)
{
    hc_bootstrap_wire_addr_t back, want = *w;
    char                     s[HC_SOCK_ADDRSTRLEN];
    FUZZ_ASSERT(ss->ss_family == (w->family == 4 ? AF_INET : AF_INET6));
    FUZZ_ASSERT(len == (w->family == 4 ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)));
    want.pad = 0;
    if (w->family == 4) {
        want.scope_id = 0;
        memset(want.ip + 4, 0, sizeof(want.ip) - 4);
    }
    FUZZ_ASSERT(hc_bootstrap_addr_to_wire((const struct sockaddr *)ss, &back) == HCOMM_SUCCESS);
    FUZZ_ASSERT(memcmp(&back, &want, sizeof(want)) == 0);
    hc_sock_addr_str((const struct sockaddr *)ss, s, sizeof(s));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hc_bootstrap_reply_t    rep;
    struct sockaddr_storage ss;
    socklen_t               len = 0;
    if (size < 2)
        return 0;
    int nranks = 1 + data[0] % 64, rank = data[1] % nranks;
    memset(&rep, 0, sizeof(rep));
    memcpy(&rep, data + 2, size - 2 < sizeof(rep) ? size - 2 : sizeof(rep));

    /* the address alone: any family but 4 and 6 is refused */
    hcomm_status_t st = hc_bootstrap_addr_from_wire(&rep.succ, &ss, &len);
    FUZZ_ASSERT((st == HCOMM_SUCCESS) == (rep.succ.family == 4 || rep.succ.family == 6));
    if (st == HCOMM_SUCCESS)
        round_trip(&rep.succ, &ss, len);

    int32_t status = (int32_t)ntohl((uint32_t)rep.status);
    int     magic  = ntohl(rep.magic) == HC_BOOTSTRAP_REPLY_MAGIC;
    st             = hc_bootstrap_reply_check(&rep, rank, nranks, &ss, &len);
    if (st == HCOMM_SUCCESS) {
        FUZZ_ASSERT(magic && status == 0);
        round_trip(&rep.succ, &ss, len);
        return 0;
    }
    FUZZ_ASSERT(st < 0 && status_named(st));
    if (magic && status < 0 && status_named((hcomm_status_t)status))
        FUZZ_ASSERT(st == (hcomm_status_t)status); /* the root's refusal passes on */
    else
        FUZZ_ASSERT(st == HCOMM_ERR_PROTOCOL);
    return 0;
}
