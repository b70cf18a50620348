/* select_tuning.c - the tuning file (HCOMM_TUNING_FILE, written by
 * hcomm-perf --tune; format in docs/tuning.md): per collective, rank count and
 * size range, the algorithm and chunk size that measured fastest. Read once;
 * selection asks it after HCOMM_ALGO. */
#include "algorithms/select.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/log.h"
#include "base/params.h"

typedef struct tuning_entry {
    hc_coll_t coll;
    int       nranks;
    size_t    lo, hi; /* bytes, inclusive */
    hc_algo_t algo;
    size_t    chunk;
} tuning_entry_t;

#define TUNING_MAX 1024
#define TUNING_LINE_MAX 255 /* characters, its end of line not counted */
#define TUNING_LINE_MAX_STR "255"
#define TUNING_FILE_MAX (1u << 20) /* far more than TUNING_MAX lines of entries */
#define TUNING_FILE_MAX_STR "1 MiB"

static tuning_entry_t  tuning[TUNING_MAX];
static int             ntuning;
static pthread_once_t  tuning_once = PTHREAD_ONCE_INIT;

/* A chunk column: bytes (0 keeps HCOMM_CHUNK_BYTES), or "none"; 0 on success. */
static int tuning_chunk(const char *s, size_t *chunk)
{
    char *end;
    if (strcmp(s, "none") == 0) {
        *chunk = HC_TUNING_CHUNK_NONE;
        return 0;
    }
    if (*s < '0' || *s > '9')
        return -1; /* strtoull would take "-1" */
    unsigned long long v = strtoull(s, &end, 10);
    if (*end != '\0' || v >= HC_TUNING_CHUNK_NONE)
        return -1;
    *chunk = (size_t)v;
    return 0;
}

/* One "coll nranks min max algo chunk" line into *e; 0 on success. */
static int tuning_line(const char *line, tuning_entry_t *e)
{
    char               coll[32], algo[32], chunk[32];
    unsigned long long lo, hi;
    int                nranks, used = 0;
    if (sscanf(line, " %31s %d %llu %llu %31s %31s %n", coll, &nranks, &lo, &hi, algo, chunk,
               &used) != 6 ||
        line[used] != '\0' || tuning_chunk(chunk, &e->chunk) != 0)
        return -1;
    e->coll = hc_coll_parse_n(coll, strlen(coll));
    if (e->coll == HC_COLL_COUNT || nranks < 1 || lo > hi)
        return -1;
    e->algo = hc_algo_parse(algo);
    if (!hc_algo_implements(e->coll, e->algo))
        return -1;
    e->nranks = nranks;
    e->lo     = (size_t)lo;
    e->hi     = hi > SIZE_MAX ? SIZE_MAX : (size_t)hi;
    return 0;
}

/* One line of f into buf (size bytes, its end of line dropped): 1, 0 at the
 * end of the file, or -1 with *why. Over-long lines and NUL bytes are errors:
 * fgets read the rest of a long line as a line of its own (a comment's tail
 * became an entry) and went round for ever on /dev/zero's empty lines; the
 * file as a whole stops at TUNING_FILE_MAX bytes (*total counts them). */
static int tuning_getline(FILE *f, char *buf, size_t size, size_t *total, const char **why)
{
    size_t n = 0;
    int    c;
    while ((c = getc(f)) != EOF) {
        if (++*total > TUNING_FILE_MAX) {
            *why = "the file is larger than " TUNING_FILE_MAX_STR;
            return -1;
        }
        if (c == '\n')
            break;
        if (c == '\0') {
            *why = "a NUL byte: not a text file";
            return -1;
        }
        if (n + 1 == size) {
            *why = "a line longer than " TUNING_LINE_MAX_STR " characters";
            return -1;
        }
        buf[n++] = (char)c;
    }
    if (c == EOF && ferror(f)) {
        *why = "read error";
        return -1;
    }
    if (c == EOF && n == 0)
        return 0;
    buf[n] = '\0';
    return 1;
}

int hc_tuning_parse(FILE *f, const char *path)
{
    char        line[TUNING_LINE_MAX + 1];
    int         n = 0, lineno = 0, r;
    size_t      total = 0;
    const char *why   = NULL;
    while ((r = tuning_getline(f, line, sizeof(line), &total, &why)) > 0) {
        lineno++;
        line[strcspn(line, "\r")] = '\0';
        const char *p = line + strspn(line, " \t");
        if (*p == '\0' || *p == '#')
            continue;
        if (n == TUNING_MAX || tuning_line(p, &tuning[n]) != 0) {
            why = n == TUNING_MAX ? "too many entries"
                                  : "expected: coll nranks min max algo chunk (bytes or none), "
                                    "algo one of coll's";
            break;
        }
        n++;
    }
    if (why != NULL) {
        /* a line that could not be read is the one after the last read */
        hc_warn(ALGO, "tuning file (HCOMM_TUNING_FILE) %s:%d: %s; the file is ignored", path,
                lineno + (r < 0), why);
        ntuning = 0;
        return -1;
    }
    ntuning = n;
    return n;
}

static void tuning_load(void)
{
    const char *path = hc_params_get()->tuning_file;
    if (path[0] == '\0')
        return;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        hc_warn(ALGO, "HCOMM_TUNING_FILE %s: cannot open it; built-in selection", path);
        return;
    }
    if (hc_tuning_parse(f, path) >= 0)
        hc_info(ALGO, "tuning file %s: %d entries", path, ntuning);
    fclose(f);
}

uint64_t hc_tuning_digest(void)
{
    pthread_once(&tuning_once, tuning_load);
    uint64_t h = hc_hash_bytes(HC_HASH_FNV_SEED, &ntuning, sizeof(ntuning));
    for (int i = 0; i < ntuning; i++) { /* field by field: the struct has padding */
        const tuning_entry_t *e = &tuning[i];
        uint64_t f[6] = {(uint64_t)e->coll, (uint64_t)e->nranks, e->lo, e->hi, (uint64_t)e->algo,
                         e->chunk};
        h             = hc_hash_bytes(h, f, sizeof(f));
    }
    return h;
}

int hc_tuning_lookup(hc_coll_t coll, int nranks, size_t bytes, hc_algo_t *algo, size_t *chunk)
{
    pthread_once(&tuning_once, tuning_load);
    for (int i = 0; i < ntuning; i++) {
        const tuning_entry_t *e = &tuning[i];
        if (e->coll == coll && e->nranks == nranks && bytes >= e->lo && bytes <= e->hi) {
            *algo  = e->algo;
            *chunk = e->chunk;
            return 0;
        }
    }
    return -1;
}
