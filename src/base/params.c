/* params.c - reads the HCOMM_* environment once, as params.def declares it. */
#include "base/params.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "hcomm.h"

extern char **environ;
void hc_log_configure(const char *level, const char *subsys, const char *file);

typedef enum { PT_INT, PT_SIZE, PT_DOUBLE, PT_STR } param_type_t;

typedef struct {
    const char  *name; /* without the HCOMM_ prefix */
    param_type_t type;
    const char  *def;
    const char  *doc;
    size_t       offset;
} param_desc_t;

static const param_desc_t param_table[] = {
#define HC_PARAM(NAME, TYPE, DEF, FIELD, DOC) \
    {#NAME, PT_##TYPE, DEF, DOC, offsetof(hc_params_t, FIELD)},
#include "params.def"
#undef HC_PARAM
};
#define NPARAMS (sizeof(param_table) / sizeof(param_table[0]))

hc_params_t                        hc_params_live;
static const char    *param_raw[NPARAMS]; /* the string each value came from */
static char           fallback_vals[NPARAMS][256]; /* values the fallback translated */
static pthread_once_t params_once = PTHREAD_ONCE_INIT;
int                                hc_params_loaded;
static const hc_params_fallback_t *params_fallback;

int hc_params_parse_size(const char *s, size_t *out)
{
    char *end;
    errno             = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno != 0 || s[strspn(s, " \t\n\v\f\r")] == '-') /* strtoull's negation */
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0' || (shift && v > (~0ull >> shift)))
        return -1;
    *out = (size_t)(v << shift);
    return 0;
}

/* Stores s into the field; returns 0 on success. */
static int param_set(const param_desc_t *d, const char *s)
{
    void *field = (char *)&hc_params_live + d->offset;
    char *end;
    switch (d->type) {
    case PT_INT: {
        errno  = 0;
        long v = strtol(s, &end, 10);
        if (end == s || *end != '\0' || errno != 0 || v < -2147483647L || v > 2147483647L)
            return -1;
        *(int *)field = (int)v;
        return 0;
    }
    case PT_SIZE:
        return hc_params_parse_size(s, (size_t *)field);
    case PT_DOUBLE: {
        errno    = 0;
        double v = strtod(s, &end);
        if (end == s || *end != '\0' || errno != 0 || !isfinite(v))
            return -1;
        *(double *)field = v;
        return 0;
    }
    case PT_STR:
        *(const char **)field = s;
        return 0;
    }
    return -1;
}

/* The fallback's value for HCOMM_<name> (in buf), or NULL. */
static const char *fallback_value(const char *name, char *buf, size_t len)
{
    const hc_params_alias_t *a = params_fallback != NULL ? params_fallback->aliases : NULL;
    for (; a != NULL && a->hcomm != NULL; a++) {
        const char *v = strcmp(a->hcomm, name) == 0 ? getenv(a->foreign) : NULL;
        if (v != NULL && a->conv(v, buf, len) == 0)
            return buf;
    }
    return NULL;
}

/* One info line per variable of the fallback's API that hcomm has no use
 * for: no equivalent, or a value its alias cannot translate. */
static void fallback_report(void)
{
    if (params_fallback == NULL)
        return;
    char buf[256];
    for (const hc_params_alias_t *a = params_fallback->aliases; a->hcomm != NULL; a++) {
        const char *v = getenv(a->foreign);
        if (v != NULL && a->conv(v, buf, sizeof(buf)) != 0)
            hc_info(PARAM, "%s=%s has no hcomm equivalent; ignored", a->foreign, v);
    }
    size_t plen = strlen(params_fallback->prefix);
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, params_fallback->prefix, plen) != 0)
            continue;
        size_t len   = strcspn(*e, "=");
        int    known = 0;
        for (const hc_params_alias_t *a = params_fallback->aliases; a->hcomm != NULL && !known; a++)
            known = strlen(a->foreign) == len && strncmp(a->foreign, *e, len) == 0;
        if (!known)
            hc_info(PARAM, "%.*s has no hcomm equivalent; ignored", (int)len, *e);
    }
}

/* The health round's limits (src/core/health.c, health.h): a window under
 * HEALTH_MIN_COMMON collectives never gives a verdict, one over HC_ARRIVALS
 * exceeds the rings; a round asks for up to 0.2 s holding the watch lock, so
 * a period under 0.1 s would keep the watch thread in it. */
#define HEALTH_WINDOW_MIN 16
#define HEALTH_WINDOW_MAX 256
#define HEALTH_PERIOD_MIN 0.1

/* Values that parse but mean nothing: NULL, or what the value must be. */
static const char *param_invalid(const param_desc_t *d)
{
    const hc_params_t *p   = &hc_params_live;
    size_t             off = d->offset;
    if (off == offsetof(hc_params_t, timeout)) /* a wait of 0 s would fail every call */
        return p->timeout > 0 ? NULL : "above 0";
    if (off == offsetof(hc_params_t, watch_timeout)) /* 0 s: every shrink finds all others dead */
        return p->watch_timeout > 0 ? NULL : "above 0";
    if (off == offsetof(hc_params_t, health_period))
        return p->health_period >= HEALTH_PERIOD_MIN ? NULL : "at least 0.1";
    if (off == offsetof(hc_params_t, health_window))
        return p->health_window >= HEALTH_WINDOW_MIN && p->health_window <= HEALTH_WINDOW_MAX
                   ? NULL
                   : "16 to 256";
    if (off == offsetof(hc_params_t, health_alpha))
        return p->health_alpha > 0 && p->health_alpha < 1 ? NULL : "between 0 and 1, exclusive";
    if (off == offsetof(hc_params_t, chunk_bytes)) /* a chunk of a few elements: a step each */
        return p->chunk_bytes == 0 || p->chunk_bytes >= 1024 ? NULL
                                                             : "0 (no pipelining) or 1K or more";
    if (off == offsetof(hc_params_t, ring_order))
        return strcmp(p->ring_order, "plan") == 0 || strcmp(p->ring_order, "rank") == 0
                   ? NULL
                   : "plan or rank";
    return NULL;
}

static void params_load(void)
{
    char        name[128];
    int         invalid[NPARAMS] = {0};
    const char *must[NPARAMS]    = {NULL}; /* what an out-of-range value must be */
    const char *bad[NPARAMS]     = {NULL}; /* and what it was */

    for (size_t i = 0; i < NPARAMS; i++) {
        const param_desc_t *d = &param_table[i];
        snprintf(name, sizeof(name), "HCOMM_%s", d->name);
        const char *env = getenv(name);
        if (env == NULL) /* NCCL's, for programs on libnccl.so.2 */
            env = fallback_value(d->name, fallback_vals[i], sizeof(fallback_vals[i]));
        param_set(d, d->def);
        param_raw[i] = d->def;
        if (env != NULL) {
            if (param_set(d, env) == 0)
                param_raw[i] = env;
            else
                invalid[i] = 1, param_set(d, d->def);
        }
    }
    for (size_t i = 0; i < NPARAMS; i++)
        if ((must[i] = param_invalid(&param_table[i])) != NULL) {
            invalid[i] = 1, bad[i] = param_raw[i];
            param_set(&param_table[i], param_table[i].def);
            param_raw[i] = param_table[i].def;
        }
    hc_log_configure(hc_params_live.log_level, hc_params_live.log_subsys, hc_params_live.log_file);

    for (size_t i = 0; i < NPARAMS; i++)
        if (must[i] != NULL)
            hc_warn(PARAM, "HCOMM_%s: invalid value %s (must be %s), using the default %s",
                    param_table[i].name, bad[i], must[i], param_table[i].def);
        else if (invalid[i])
            hc_warn(PARAM, "HCOMM_%s: invalid value, using the default %s", param_table[i].name,
                    param_table[i].def);
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "HCOMM_", 6) != 0)
            continue;
        const char *eq  = strchr(*e, '=');
        size_t      len = eq ? (size_t)(eq - *e) - 6 : strlen(*e) - 6;
        int         known = 0;
        for (size_t i = 0; i < NPARAMS && !known; i++)
            known = strlen(param_table[i].name) == len &&
                    strncmp(param_table[i].name, *e + 6, len) == 0;
        if (!known)
            hc_warn(PARAM, "unknown variable %.*s ignored", (int)(len + 6), *e);
    }
    fallback_report();
}

static void params_once_fn(void)
{
    params_load();
    __atomic_store_n(&hc_params_loaded, 1, __ATOMIC_RELEASE);
}

int hc_params_set_fallback(const hc_params_fallback_t *fallback)
{
    params_fallback = fallback;
    return __atomic_load_n(&hc_params_loaded, __ATOMIC_ACQUIRE) ? -1 : 0;
}

const hc_params_t *hc_params_load_once(void)
{
    pthread_once(&params_once, params_once_fn);
    return &hc_params_live;
}

void hc_params_reload(void)
{
    pthread_once(&params_once, params_once_fn);
    params_load();
}

void hcomm_params_print(FILE *out)
{
    hc_params_print(out != NULL ? out : stdout);
}

void hc_params_print(FILE *f)
{
    hc_params_get();
    for (size_t i = 0; i < NPARAMS; i++)
        fprintf(f, "HCOMM_%-18s = %-10s (default %s)\n    %s\n", param_table[i].name,
                param_raw[i], param_table[i].def, param_table[i].doc);
}

const char *hc_params_foreign(const char *name)
{
    return getenv(name);
}
