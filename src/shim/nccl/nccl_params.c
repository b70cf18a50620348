/* nccl_params.c - NCCL's environment variables as stand-ins for their HCOMM_*
 * equivalents (docs/nccl.md), so that a program moved onto libnccl.so.2 keeps
 * its settings: an HCOMM_* variable always wins; an NCCL_* variable without
 * an equivalent is ignored with one info line. Programs on libnccl.so.2 get
 * them (its constructor calls hcomm_nccl_env_enable); native hcomm programs
 * read HCOMM_* only. base/params.c reads the variables this table names. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "base/params.h"
#include "nccl_shim.h"

static int conv_copy(const char *in, char *out, size_t len)
{
    return snprintf(out, len, "%s", in) < (int)len ? 0 : -1;
}

static int conv_debug(const char *in, char *out, size_t len)
{
    static const char *const map[][2] = {{"VERSION", "warn"}, {"WARN", "warn"},
                                         {"INFO", "info"},    {"ABORT", "error"},
                                         {"TRACE", "trace"}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcasecmp(in, map[i][0]) == 0)
            return conv_copy(map[i][1], out, len);
    return -1;
}

/* Whether the comma list holds word as a whole token ("all" is not in "coll"). */
static int has_word(const char *list, const char *word)
{
    size_t w = strlen(word);
    for (const char *p = list; *p != '\0';) {
        size_t t = strcspn(p, ",");
        if (t == w && strncmp(p, word, w) == 0)
            return 1;
        p += t + (p[t] != '\0');
    }
    return 0;
}

/* Comma lists, each word mapped through map (others dropped), each result
 * once; -1 if none is left. */
static int conv_words(const char *in, char *out, size_t len, const char *const (*map)[2],
                      size_t nmap)
{
    size_t n = 0;
    out[0]   = '\0';
    for (const char *p = in; *p != '\0';) {
        size_t w = strcspn(p, ",;");
        for (size_t i = 0; i < nmap; i++)
            if (strlen(map[i][0]) == w && strncasecmp(p, map[i][0], w) == 0 &&
                !has_word(out, map[i][1])) {
                int k = snprintf(out + n, len - n, "%s%s", n ? "," : "", map[i][1]);
                if (k < 0 || (size_t)k >= len - n)
                    return -1;
                n += (size_t)k;
            }
        p += w + (p[w] != '\0');
    }
    return n > 0 ? 0 : -1;
}

static int conv_subsys(const char *in, char *out, size_t len)
{
    static const char *const map[][2] = {
        {"ALL", "all"},   {"INIT", "init"}, {"COLL", "coll"}, {"P2P", "p2p"},
        {"NET", "net"},   {"SHM", "shm"},   {"BOOTSTRAP", "boot"}, {"ENV", "param"},
        {"TUNING", "algo"}, {"GRAPH", "topo"}};
    int excl = in[0] == '^'; /* NCCL's "^A,B": all but A and B; hcomm reads it alike */
    if (excl && len > 1)
        out[0] = '^';
    if (conv_words(in + excl, out + excl, len - (size_t)excl, map, sizeof(map) / sizeof(map[0])))
        return -1;
    /* ALL among others is all of them, which hcomm reads only alone; all but
     * ALL, nothing, hcomm cannot say */
    if (has_word(out + excl, "all"))
        return excl ? -1 : conv_copy("all", out, len);
    return 0;
}

static int conv_algo(const char *in, char *out, size_t len)
{
    static const char *const map[][2] = {{"Ring", "ring"}, {"Tree", "tree"}};
    return conv_words(in, out, len, map, sizeof(map) / sizeof(map[0]));
}

static int conv_disable(const char *in, char *out, size_t len)
{
    return strcmp(in, "1") == 0 ? conv_copy("tcp", out, len) : -1;
}

/* NCCL_NET names a network back end ("IB", "Socket", a plugin's name): the
 * transport that plays its part leads the list, the others stay behind it. */
static int conv_net(const char *in, char *out, size_t len)
{
    static const char *const map[][2] = {{"IB", "ib"},         {"Socket", "tcp"},
                                         {"Libfabric", "ofi"}, {"AWS Libfabric", "ofi"},
                                         {"OFI", "ofi"},       {"UCX", "ucx"}};
    static const char *const rest[]   = {"ib", "ofi", "ucx", "tcp"};
    char                     first[16];
    if (conv_words(in, first, sizeof(first), map, sizeof(map) / sizeof(map[0])) != 0 ||
        conv_copy(first, out, len) != 0)
        return -1;
    for (size_t i = 0; i < sizeof(rest) / sizeof(rest[0]); i++) {
        size_t n = strlen(out);
        if (strcmp(first, rest[i]) != 0 &&
            snprintf(out + n, len - n, ",%s", rest[i]) >= (int)(len - n))
            return -1;
    }
    return 0;
}

static int conv_ib_disable(const char *in, char *out, size_t len)
{
    return strcmp(in, "1") == 0 ? conv_copy("ofi,ucx,tcp", out, len) : -1;
}

static const hc_params_alias_t nccl_aliases[] = {
    {"LOG_LEVEL", "NCCL_DEBUG", conv_debug},
    {"LOG_SUBSYS", "NCCL_DEBUG_SUBSYS", conv_subsys},
    {"LOG_FILE", "NCCL_DEBUG_FILE", conv_copy},
    {"SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", conv_copy},
    {"ALGO", "NCCL_ALGO", conv_algo},
    {"TRANSPORT", "NCCL_SHM_DISABLE", conv_disable},
    {"TCP_NSOCKS", "NCCL_NSOCKS_PERTHREAD", conv_copy},
    {"NET", "NCCL_NET", conv_net},
    {"NET", "NCCL_IB_DISABLE", conv_ib_disable},
    {"IB_HCA", "NCCL_IB_HCA", conv_copy},
    {"IB_GID_INDEX", "NCCL_IB_GID_INDEX", conv_copy},
    {"NCCL_PROFILER_PLUGIN", "NCCL_PROFILER_PLUGIN", conv_copy},
    {NULL, NULL, NULL},
};

static const hc_params_fallback_t nccl_fallback = {"NCCL_", nccl_aliases};

void hcomm_nccl_env_enable(void)
{
    if (hc_params_set_fallback(&nccl_fallback) != 0)
        hc_info(PARAM, "libnccl.so.2 loaded after hcomm read its parameters: NCCL_* variables "
                       "are not read");
}
