/* params.h - parsed HCOMM_* environment variables (see params.def). */
#ifndef HC_BASE_PARAMS_H
#define HC_BASE_PARAMS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HC_PARAM_CTYPE_INT    int
#define HC_PARAM_CTYPE_SIZE   size_t
#define HC_PARAM_CTYPE_DOUBLE double
#define HC_PARAM_CTYPE_STR    const char *

/* HCOMM_NET's default; a library-backed transport opens over plain tcp or
 * shared memory only when the user changed it (hc_tl_params_t.fabric_only). */
#define HC_PARAM_NET_DEFAULT "ib,ofi,ucx,tcp"

typedef struct hc_params {
#define HC_PARAM(NAME, TYPE, DEF, FIELD, DOC) HC_PARAM_CTYPE_##TYPE FIELD;
#include "params.def"
#undef HC_PARAM
} hc_params_t;

/* The parameters, parsed on first call (thread-safe); invalid values warn and
 * keep the default; an unknown HCOMM_* variable warns once. Every call reads
 * them: once loaded, a load and a branch, no pthread_once call. */
extern hc_params_t hc_params_live __attribute__((visibility("hidden")));
extern int         hc_params_loaded __attribute__((visibility("hidden")));
const hc_params_t *hc_params_load_once(void);

static inline const hc_params_t *hc_params_get(void)
{
    if (__builtin_expect(__atomic_load_n(&hc_params_loaded, __ATOMIC_ACQUIRE), 1))
        return &hc_params_live;
    return hc_params_load_once();
}

/* Parses a size with an optional K/M/G suffix; returns 0 on success. */
int hc_params_parse_size(const char *s, size_t *out);

/* Prints every parameter: name, current value, default and doc. */
void hc_params_print(FILE *f);

/* Another program's environment variable: a library's a transport respects
 * (UCX_TLS, FI_PROVIDER), a launcher's (PMI_RANK, SLURM_PROCID, MASTER_ADDR:
 * bootstrap/launcher.c); NULL when unset. Every read of the environment stays
 * in this file. */
const char *hc_params_foreign(const char *name);

/* The settings every rank of a communicator must share (params_agree.c says
 * which and why): init gathers a digest of each from every rank and fails,
 * naming the variable, where they differ. */
#define HC_PARAMS_AGREED_MAX 24
#define HC_PARAMS_VALUE_MAX 128
/* No file a setting names is read past this many bytes (topology and tuning
 * files are far smaller). */
#define HC_PARAMS_FILE_MAX (16u << 20)
/* Writes a digest of each agreed setting of p to out (a file setting: of the
 * file's bytes); returns how many (at most max), or -1 (logged, naming the
 * variable) for a file larger than HC_PARAMS_FILE_MAX. */
int hc_params_agreed_digests(const hc_params_t *p, uint64_t *out, int max);
/* Agreed setting i's name without HCOMM_, and its value as a log shows it. */
const char *hc_params_agreed_name(int i);
/* The index of the agreed setting NAME (without HCOMM_), or -1. */
int         hc_params_agreed_index(const char *name);
void        hc_params_agreed_value(const hc_params_t *p, int i, char *buf, size_t len);

/* Re-reads the environment (tests). */
void hc_params_reload(void);

/* Another API's environment variables standing in for HCOMM_* ones (the NCCL
 * front end's NCCL_*). An alias names the HCOMM_<hcomm> parameter, the
 * foreign variable and conv, which translates its value into out (len bytes):
 * 0, or -1 when that value means nothing to hcomm. An HCOMM_* variable always
 * wins; a variable with the prefix and no alias gets one info line. */
typedef struct hc_params_alias {
    const char *hcomm, *foreign;
    int (*conv)(const char *in, char *out, size_t len);
} hc_params_alias_t;
typedef struct hc_params_fallback {
    const char              *prefix;  /* "NCCL_" */
    const hc_params_alias_t *aliases; /* ends with a NULL hcomm */
} hc_params_fallback_t;
/* Takes effect when the parameters are read: 0, or -1 when they were read
 * already (then from hc_params_reload on). */
int hc_params_set_fallback(const hc_params_fallback_t *fallback);

#endif
