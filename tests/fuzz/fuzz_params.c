/* fuzz_params.c - parameter values: the HCOMM_* variables (params.def) and
 * the NCCL_* ones that stand in for them (shim/nccl/nccl_params.c). Each
 * input line sets one variable: its first byte picks the variable, the rest
 * is the value. The harness sets them, re-reads the environment
 * (hc_params_reload: the int, size and double parsers, the NCCL converters,
 * the log level and subsystem list), then hands the string values to the
 * parsers that read them (HCOMM_ALGO, TRANSPORT, NET, IB_HCA, SOCKET_IFNAME,
 * ROOT, COOKIE) and every value to hc_params_parse_size and to HCOMM_COOKIE's
 * parser, hc_auth_key_parse (a key it takes prints back alike). Variables
 * that name files (LOG_FILE, TOPO_FILE, TUNING_FILE, TOPO_DUMP_FILE,
 * NCCL_DEBUG_FILE) are left out: the harness must not open or create files
 * that inputs name; HCOMM_ROOT is resolved with numeric hosts only (no DNS
 * queries: the fuzzers' build has no HC_HAVE_GETADDRINFO_A, so every lookup
 * goes through the wrapped getaddrinfo). */
// fuzz-ldflags: -Wl,--wrap=getaddrinfo
#include <math.h>
#include <netdb.h>
#include <string.h>
#include <strings.h>

#include "algorithms/algo.h"
#include "algorithms/select.h"
#include "base/auth.h"
#include "base/log.h"
#include "base/params.h"
#include "base/sock.h"
#include "fuzz.h"
#include "transport/ib/ib_hca.h"
#include "transport/transport.h"

void hcomm_nccl_env_enable(void); /* nccl_params.c: what libnccl.so.2's constructor calls */

int __real_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res);
int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res)
{
    struct addrinfo h = *hints;
    h.ai_flags |= AI_NUMERICHOST;
    return __real_getaddrinfo(node, service, &h, res);
}

static const char *const hcomm_names[] = {
#define HC_PARAM(NAME, TYPE, DEF, FIELD, DOC) "HCOMM_" #NAME,
#include "base/params.def"
#undef HC_PARAM
};
static const char *const other_names[] = {
    "NCCL_DEBUG",       "NCCL_DEBUG_SUBSYS", "NCCL_SOCKET_IFNAME",    "NCCL_ALGO",
    "NCCL_SHM_DISABLE", "NCCL_NET",          "NCCL_NSOCKS_PERTHREAD", "NCCL_IB_DISABLE",
    "NCCL_IB_HCA",      "NCCL_IB_GID_INDEX", "NCCL_FUZZ_UNKNOWN",     "HCOMM_FUZZ_UNKNOWN",
};
static const char *const file_names[] = {"HCOMM_LOG_FILE", "HCOMM_TOPO_FILE", "HCOMM_TUNING_FILE",
                                         "HCOMM_TOPO_DUMP_FILE"};

#define NVARS_MAX                                                                                  \
    (sizeof(hcomm_names) / sizeof(hcomm_names[0]) + sizeof(other_names) / sizeof(other_names[0]))
#define VALUE_MAX 300

static const char *vars[NVARS_MAX];
static const char *outside[NVARS_MAX]; /* each one's value before the harness ran, or NULL */
static size_t      nvars;
static char        env[NVARS_MAX][VALUE_MAX + 32]; /* "NAME=value", put in the environment */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_logs_to_null();
    hcomm_nccl_env_enable();
    for (size_t i = 0; i < sizeof(hcomm_names) / sizeof(hcomm_names[0]); i++) {
        int file = 0;
        for (size_t j = 0; j < sizeof(file_names) / sizeof(file_names[0]); j++)
            file |= strcmp(hcomm_names[i], file_names[j]) == 0;
        if (!file)
            vars[nvars++] = hcomm_names[i];
    }
    for (size_t i = 0; i < sizeof(other_names) / sizeof(other_names[0]); i++)
        vars[nvars++] = other_names[i];
    for (size_t v = 0; v < nvars; v++) /* HCOMM_LOG_LEVEL=info, say, to replay one input */
        outside[v] = getenv(vars[v]) != NULL ? strdup(getenv(vars[v])) : NULL;
    return 0;
}

/* HCOMM_COOKIE's parser: a key it takes prints back as the same 32 hex
 * digits, but for case. */
static void key_round_trip(const char *value)
{
    uint8_t key[HC_AUTH_KEY_BYTES];
    char    hex[2 * HC_AUTH_KEY_BYTES + 1];
    if (hc_auth_key_parse(value, key) != 0)
        return;
    for (int i = 0; i < HC_AUTH_KEY_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", key[i]);
    FUZZ_ASSERT(strcasecmp(hex, value) == 0);
}

/* What the consumers of the parsed values do with them. */
static void use_values(const hc_params_t *p)
{
    FUZZ_ASSERT(p->timeout > 0 && isfinite(p->timeout)); /* params.c keeps it so */
    for (int c = 0; c < HC_COLL_COUNT; c++) {
        hc_algo_t a = hc_select_forced(p->algo, (hc_coll_t)c);
        FUZZ_ASSERT(a == HC_ALGO_AUTO || hc_algo_implements((hc_coll_t)c, a));
    }
    int forced = hc_tl_forced(p->transport);
    FUZZ_ASSERT(forced >= -2 && forced < hc_tl_table_len());
    for (int same_host = 0; same_host < 2; same_host++) {
        int t = hc_tl_choose(forced < 0 ? -1 : forced, p->net, ~0u, same_host);
        FUZZ_ASSERT(t >= -1 && t < hc_tl_table_len());
    }

    hc_ib_hca_filter_t f;
    char               why[128];
    if (hc_ib_hca_parse(p->ib_hca, &f, why, sizeof(why)) == 0)
        (void)hc_ib_hca_match(&f, "mlx5_0", 1);

    struct sockaddr_storage ss;
    socklen_t               len;
    if (hc_sock_if_addr(p->socket_ifname, HC_SUBSYS(PARAM), &ss, &len) == HCOMM_SUCCESS)
        FUZZ_ASSERT(len <= sizeof(ss));
    if (hc_sock_parse_addr(p->root, HC_SUBSYS(PARAM), &ss, &len) == HCOMM_SUCCESS)
        FUZZ_ASSERT(ss.ss_family == AF_INET || ss.ss_family == AF_INET6);

    key_round_trip(p->cookie);

    uint64_t d[HC_PARAMS_AGREED_MAX];
    char     val[HC_PARAMS_VALUE_MAX];
    int      n = hc_params_agreed_digests(p, d, HC_PARAMS_AGREED_MAX);
    for (int i = 0; i < n; i++)
        hc_params_agreed_value(p, i, val, sizeof(val));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int set[NVARS_MAX] = {0};
    for (size_t at = 0; at < size;) {
        const uint8_t *nl  = memchr(data + at, '\n', size - at);
        size_t         end = nl != NULL ? (size_t)(nl - data) : size;
        if (end > at) {
            size_t v = data[at] % nvars, n = end - at - 1;
            int    pre = snprintf(env[v], sizeof(env[v]), "%s=", vars[v]);
            n          = n < VALUE_MAX ? n : VALUE_MAX;
            memcpy(env[v] + pre, data + at + 1, n);
            env[v][pre + n] = '\0'; /* a NUL inside ends the value, as in a real environment */
            FUZZ_ASSERT(putenv(env[v]) == 0);
            set[v] = 1;

            key_round_trip(env[v] + pre);
            size_t sz, again;
            char   s[32];
            if (hc_params_parse_size(env[v] + pre, &sz) == 0) { /* it prints back alike */
                snprintf(s, sizeof(s), "%zu", sz);
                FUZZ_ASSERT(hc_params_parse_size(s, &again) == 0 && again == sz);
            }
        }
        at = end + 1;
    }
    hc_params_reload();
    use_values(hc_params_get());
    for (size_t v = 0; v < nvars; v++)
        if (set[v] && outside[v] != NULL)
            setenv(vars[v], outside[v], 1);
        else if (set[v])
            unsetenv(vars[v]);
    return 0;
}
