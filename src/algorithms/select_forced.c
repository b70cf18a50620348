/* select_forced.c - HCOMM_ALGO: "NAME" forces an algorithm on every
 * collective it implements, "COLL:NAME,..." on one collective; an entry naming
 * the collective wins over a bare name. */
#include <stdatomic.h>
#include <string.h>

#include "algorithms/select.h"
#include "base/log.h"

/* HCOMM_ALGO is read for every operation: say once that part of it is ignored. */
static void forced_warn_once(const char *spec, const char *p, size_t len)
{
    static atomic_flag warned = ATOMIC_FLAG_INIT;

    if (!atomic_flag_test_and_set(&warned))
        hc_warn(ALGO,
                "HCOMM_ALGO=%s: ignoring '%.*s' (names: ring, rd, chain, pairwise, direct, "
                "dissem, rabenseifner, bruck, tree, hier, leader; optionally COLL:NAME with "
                "an algorithm of that collective)",
                spec, (int)len, p);
}

hc_algo_t hc_select_forced(const char *spec, hc_coll_t coll)
{
    hc_algo_t bare = HC_ALGO_AUTO;

    for (const char *p = spec; p != NULL && *p != '\0';) {
        p += strspn(p, " \t");
        size_t      len   = strcspn(p, ",");
        const char *colon = memchr(p, ':', len);
        const char *name  = colon != NULL ? colon + 1 : p;
        hc_algo_t   a     = hc_algo_parse_n(name, len - (size_t)(name - p));
        hc_coll_t   named = colon != NULL ? hc_coll_parse_n(p, (size_t)(colon - p)) : coll;

        if (len == 0) { /* "a,,b" or a trailing comma */
            p += p[len] == ',';
            continue;
        }
        if (a == HC_ALGO_COUNT || named == HC_COLL_COUNT)
            forced_warn_once(spec, p, len);
        else if (colon != NULL && named == coll) {
            if (a == HC_ALGO_AUTO || hc_algo_implements(coll, a))
                return a;
            forced_warn_once(spec, p, len);
        } else if (colon == NULL && bare == HC_ALGO_AUTO && hc_algo_implements(coll, a))
            bare = a;
        p += len + (p[len] == ',');
    }
    return bare;
}
