/* topo_file.c - topology files (docs/topology.md): hc_cluster_dump writes the
 * model as a small XML document; hc_cluster_load reads one back with a
 * hand-written, non-recursive parser that bounds every buffer, since the file
 * is user input. A loaded file's nodes may be virtual (ranks of one host). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/params.h"
#include "topology/topo.h"

#define TF_MAX_FILE HC_PARAMS_FILE_MAX
#define TF_NAME_MAX 32
#define TF_VAL_MAX HC_TOPO_NAME_MAX
#define TF_MAX_ATTRS 8
#define TF_MAX_DEPTH 3
#define TF_MAX_NUMA (1 << 20)
#define TF_MAX_RAIL (1 << 20)
#define TF_MAX_COST 1e9

static const char *const tf_class_names[HC_LINK_CLASS_COUNT] = {[HC_LINK_SELF]       = "self",
                                                                [HC_LINK_SAME_NUMA]  = "same_numa",
                                                                [HC_LINK_CROSS_NUMA] = "cross_numa",
                                                                [HC_LINK_CROSS_NODE] =
                                                                    "cross_node"};

/* ---- dump ---- */

/* The shortest %g that reads back as the same double. */
static void tf_fmt(char *buf, size_t len, double v)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

hcomm_status_t hc_cluster_dump(const hc_cluster_t *c, FILE *f)
{
    char a[32], b[32];
    int  bad = 0;
    if (c == NULL || f == NULL)
        return HCOMM_ERR_INVALID_ARG;
    bad |= fprintf(f,
                   "<?xml version=\"1.0\"?>\n<!-- hcomm cluster model: %d ranks on %d "
                   "nodes -->\n<hcomm_topology version=\"1\">\n",
                   c->nranks, c->nnodes) < 0;
    for (int k = 0; k < HC_LINK_CLASS_COUNT; k++) {
        tf_fmt(a, sizeof(a), c->link[k].alpha_us);
        tf_fmt(b, sizeof(b), c->link[k].bw_gbps);
        bad |= fprintf(f, "  <link class=\"%s\" alpha_us=\"%s\" bw_gbps=\"%s\"/>\n",
                       tf_class_names[k], a, b) < 0;
    }
    tf_fmt(a, sizeof(a), c->reduce_gbps);
    bad |= fprintf(f, "  <reduce bw_gbps=\"%s\"/>\n", a) < 0;
    for (int n = 0; n < c->nnodes; n++) {
        bad |= fprintf(f, "  <node id=\"%d\"", n) < 0;
        if (c->ranks != NULL) {
            char host[HC_TOPO_NAME_MAX];
            snprintf(host, sizeof(host), "%s", c->ranks[c->node_ranks[c->node_first[n]]].hostname);
            for (char *h = host; *h; h++)
                if (!isalnum((unsigned char)*h) && *h != '.' && *h != '-')
                    *h = '_';
            bad |= fprintf(f, " host=\"%s\"", host) < 0;
        }
        bad |= fprintf(f, ">\n") < 0;
        for (int i = c->node_first[n]; i < c->node_first[n + 1]; i++) {
            int r = c->node_ranks[i];
            bad |= fprintf(f, "    <rank id=\"%d\" numa=\"%d\" rail=\"%d\"/>\n", r, c->numa_of[r],
                           c->rail_of[r]) < 0;
        }
        bad |= fprintf(f, "  </node>\n") < 0;
    }
    bad |= fprintf(f, "</hcomm_topology>\n") < 0;
    if (bad || fflush(f) != 0 || ferror(f)) {
        hc_error(INIT, "writing the topology file: %s", strerror(errno));
        return HCOMM_ERR_IO;
    }
    return HCOMM_SUCCESS;
}

/* ---- load: lexer and element handlers ---- */

typedef enum { TF_ROOT, TF_LINK, TF_REDUCE, TF_NODE, TF_RANK, TF_KINDS } tf_kind_t;
static const char *const tf_elem[TF_KINDS]   = {"hcomm_topology", "link", "reduce", "node", "rank"};
static const int         tf_parent[TF_KINDS] = {-1, TF_ROOT, TF_ROOT, TF_ROOT, TF_NODE};

typedef struct {
    char name[TF_NAME_MAX];
    char val[TF_VAL_MAX];
} tf_attr_t;

typedef struct {
    const char    *path, *p, *end;
    int            line, nranks;
    int            stack[TF_MAX_DEPTH], depth, seen_root, done;
    hc_link_cost_t link[HC_LINK_CLASS_COUNT];
    int            link_set[HC_LINK_CLASS_COUNT], reduce_set;
    double         reduce_gbps;
    int           *node_of, *numa, *rail; /* [nranks]; node_of -1: rank not seen */
    long          *node_id;               /* [nranks]: ids of the nodes so far */
    int            nnodes, node_nranks, count;
} tf_t;

static int tf_fail(tf_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int tf_fail(tf_t *t, const char *fmt, ...)
{
    char    msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    hc_error(INIT, "topology file %s:%d: %s", t->path, t->line, msg);
    return -1;
}

static void tf_skip_ws(tf_t *t)
{
    for (; t->p < t->end && isspace((unsigned char)*t->p); t->p++)
        if (*t->p == '\n')
            t->line++;
}

/* Skips to just past `term`, counting lines; -1 when the file ends first. */
static int tf_skip_past(tf_t *t, const char *term)
{
    size_t n = strlen(term);
    for (; t->p + n <= t->end; t->p++) {
        if (memcmp(t->p, term, n) == 0) {
            t->p += n;
            return 0;
        }
        if (*t->p == '\n')
            t->line++;
    }
    return -1;
}

static int tf_name(tf_t *t, char *out)
{
    size_t n = 0;
    if (t->p >= t->end || !(isalpha((unsigned char)*t->p) || *t->p == '_'))
        return tf_fail(t, "expected a name");
    /* strchr finds the terminator too: a NUL byte is not a name character */
    while (t->p < t->end &&
           (isalnum((unsigned char)*t->p) || (*t->p != '\0' && strchr("_-.", *t->p) != NULL))) {
        if (n + 1 >= TF_NAME_MAX)
            return tf_fail(t, "name too long");
        out[n++] = *t->p++;
    }
    out[n] = '\0';
    return 0;
}

static int tf_value(tf_t *t, char *out)
{
    size_t n = 0;
    if (t->p >= t->end || (*t->p != '"' && *t->p != '\''))
        return tf_fail(t, "expected a quoted value");
    char q = *t->p++;
    for (; t->p < t->end && *t->p != q; t->p++) {
        unsigned char ch = (unsigned char)*t->p;
        if (ch < 0x20 || ch == 0x7f || ch == '<' || ch == '&')
            return tf_fail(t, "bad character 0x%02x in a value", ch);
        if (n + 1 >= TF_VAL_MAX)
            return tf_fail(t, "value too long");
        out[n++] = (char)ch;
    }
    if (t->p >= t->end)
        return tf_fail(t, "truncated value");
    t->p++;
    out[n] = '\0';
    return 0;
}

/* Attributes up to '>' or "/>"; sets *empty for the latter. */
static int tf_attrs(tf_t *t, tf_attr_t *a, int *na, int *empty)
{
    for (*na = 0;;) {
        tf_skip_ws(t);
        if (t->p < t->end && *t->p == '>') {
            t->p++;
            *empty = 0;
            return 0;
        }
        if (t->end - t->p >= 2 && t->p[0] == '/' && t->p[1] == '>') {
            t->p += 2;
            *empty = 1;
            return 0;
        }
        if (t->p >= t->end)
            return tf_fail(t, "truncated element");
        if (*na == TF_MAX_ATTRS)
            return tf_fail(t, "too many attributes");
        tf_attr_t *x = &a[*na];
        if (tf_name(t, x->name) != 0)
            return -1;
        for (int i = 0; i < *na; i++)
            if (strcmp(a[i].name, x->name) == 0)
                return tf_fail(t, "attribute %s given twice", x->name);
        tf_skip_ws(t);
        if (t->p >= t->end || *t->p++ != '=')
            return tf_fail(t, "expected '=' after %s", x->name);
        tf_skip_ws(t);
        if (tf_value(t, x->val) != 0)
            return -1;
        (*na)++;
    }
}

/* Rejects attributes not in `allowed` (NULL-terminated). */
static int tf_known(tf_t *t, int kind, const tf_attr_t *a, int na, const char *const *allowed)
{
    for (int i = 0; i < na; i++) {
        int ok = 0;
        for (int j = 0; allowed[j] != NULL && !ok; j++)
            ok = strcmp(a[i].name, allowed[j]) == 0;
        if (!ok)
            return tf_fail(t, "unknown attribute %s on <%s>", a[i].name, tf_elem[kind]);
    }
    return 0;
}

static const char *tf_get(const tf_attr_t *a, int na, const char *name)
{
    for (int i = 0; i < na; i++)
        if (strcmp(a[i].name, name) == 0)
            return a[i].val;
    return NULL;
}

static int tf_int(tf_t *t, const char *s, const char *what, long lo, long hi, long *out)
{
    char *e;
    errno = 0;
    if (s == NULL)
        return tf_fail(t, "missing attribute %s", what);
    long v = strtol(s, &e, 10);
    if (!(isdigit((unsigned char)*s) || *s == '-') || *e != '\0' || errno != 0 || v < lo || v > hi)
        return tf_fail(t, "%s=\"%s\": expected an integer in %ld..%ld", what, s, lo, hi);
    *out = v;
    return 0;
}

static int tf_num(tf_t *t, const char *s, const char *what, int positive, double *out)
{
    char *e;
    errno = 0;
    if (s == NULL)
        return tf_fail(t, "missing attribute %s", what);
    double v = strtod(s, &e);
    /* decimal only: strtod takes "0x1p3" too */
    if (!(isdigit((unsigned char)*s) || *s == '.') || strpbrk(s, "xX") != NULL || *e != '\0' ||
        errno != 0 || !isfinite(v) || v < 0.0 || v > TF_MAX_COST || (positive && v <= 0.0))
        return tf_fail(t, "%s=\"%s\": expected a %s number up to %g", what, s,
                       positive ? "positive" : "non-negative", TF_MAX_COST);
    *out = v;
    return 0;
}

static int tf_open_link(tf_t *t, const tf_attr_t *a, int na)
{
    static const char *const allowed[] = {"class", "alpha_us", "bw_gbps", NULL};
    const char              *cls       = tf_get(a, na, "class");
    int                      k;
    if (tf_known(t, TF_LINK, a, na, allowed) != 0)
        return -1;
    if (cls == NULL)
        return tf_fail(t, "missing attribute class");
    for (k = 0; k < HC_LINK_CLASS_COUNT && strcmp(cls, tf_class_names[k]) != 0; k++)
        ;
    if (k == HC_LINK_CLASS_COUNT)
        return tf_fail(t, "unknown link class \"%s\"", cls);
    if (t->link_set[k])
        return tf_fail(t, "link class %s given twice", cls);
    if (tf_num(t, tf_get(a, na, "alpha_us"), "alpha_us", 0, &t->link[k].alpha_us) != 0 ||
        tf_num(t, tf_get(a, na, "bw_gbps"), "bw_gbps", 1, &t->link[k].bw_gbps) != 0)
        return -1;
    t->link_set[k] = 1;
    return 0;
}

static int tf_open_node(tf_t *t, const tf_attr_t *a, int na)
{
    static const char *const allowed[] = {"id", "host", NULL};
    long                     id;
    if (tf_known(t, TF_NODE, a, na, allowed) != 0 ||
        tf_int(t, tf_get(a, na, "id"), "id", 0, INT_MAX, &id) != 0)
        return -1;
    if (t->nnodes == t->nranks)
        return tf_fail(t, "more nodes than the %d ranks", t->nranks);
    for (int n = 0; n < t->nnodes; n++)
        if (t->node_id[n] == id)
            return tf_fail(t, "node id %ld given twice", id);
    t->node_id[t->nnodes++] = id;
    t->node_nranks          = 0;
    return 0;
}

static int tf_open_rank(tf_t *t, const tf_attr_t *a, int na)
{
    static const char *const allowed[] = {"id", "numa", "rail", NULL};
    const char              *numa = tf_get(a, na, "numa"), *rail = tf_get(a, na, "rail");
    long                     id, nu = -1, ra = 0;
    if (tf_known(t, TF_RANK, a, na, allowed) != 0 ||
        tf_int(t, tf_get(a, na, "id"), "id", 0, INT_MAX, &id) != 0 ||
        (numa != NULL && tf_int(t, numa, "numa", -1, TF_MAX_NUMA, &nu) != 0) ||
        (rail != NULL && tf_int(t, rail, "rail", 0, TF_MAX_RAIL, &ra) != 0))
        return -1;
    if (id >= t->nranks)
        return tf_fail(t, "rank %ld out of range: the file must describe %d ranks", id, t->nranks);
    if (t->node_of[id] >= 0)
        return tf_fail(t, "rank %ld appears twice", id);
    t->node_of[id] = t->nnodes - 1;
    t->numa[id]    = (int)nu;
    t->rail[id]    = (int)ra;
    t->node_nranks++;
    t->count++;
    return 0;
}

static int tf_open(tf_t *t, int kind, const tf_attr_t *a, int na)
{
    static const char *const root_allowed[]   = {"version", NULL};
    static const char *const reduce_allowed[] = {"bw_gbps", NULL};
    long                     v;
    switch (kind) {
    case TF_ROOT:
        t->seen_root = 1;
        if (tf_known(t, kind, a, na, root_allowed) != 0 ||
            tf_int(t, tf_get(a, na, "version"), "version", 1, 1, &v) != 0)
            return -1;
        return 0;
    case TF_LINK:
        return tf_open_link(t, a, na);
    case TF_REDUCE:
        if (t->reduce_set)
            return tf_fail(t, "<reduce> given twice");
        t->reduce_set = 1;
        if (tf_known(t, kind, a, na, reduce_allowed) != 0)
            return -1;
        return tf_num(t, tf_get(a, na, "bw_gbps"), "bw_gbps", 1, &t->reduce_gbps);
    case TF_NODE:
        return tf_open_node(t, a, na);
    default:
        return tf_open_rank(t, a, na);
    }
}

static int tf_close(tf_t *t, int kind)
{
    if (kind == TF_NODE && t->node_nranks == 0)
        return tf_fail(t, "node %ld has no ranks", t->node_id[t->nnodes - 1]);
    if (kind == TF_ROOT)
        t->done = 1;
    return 0;
}

/* One element start tag: name, placement, attributes, and its close if empty. */
static int tf_start_tag(tf_t *t)
{
    char      name[TF_NAME_MAX];
    tf_attr_t a[TF_MAX_ATTRS];
    int       na, empty = 0, kind;
    if (tf_name(t, name) != 0)
        return -1;
    for (kind = 0; kind < TF_KINDS && strcmp(name, tf_elem[kind]) != 0; kind++)
        ;
    if (kind == TF_KINDS)
        return tf_fail(t, "unknown element <%s>", name);
    if (t->done)
        return tf_fail(t, "<%s> after </hcomm_topology>", name);
    if (t->depth == 0 ? kind != TF_ROOT : tf_parent[kind] != t->stack[t->depth - 1])
        return tf_fail(t, "<%s> not allowed %s%s%s", name, t->depth ? "inside <" : "here",
                       t->depth ? tf_elem[t->stack[t->depth - 1]] : "", t->depth ? ">" : "");
    if (tf_attrs(t, a, &na, &empty) != 0 || tf_open(t, kind, a, na) != 0)
        return -1;
    if (empty)
        return tf_close(t, kind);
    t->stack[t->depth++] = kind; /* depth is bounded by tf_parent's chain */
    return 0;
}

static int tf_end_tag(tf_t *t)
{
    char name[TF_NAME_MAX];
    if (tf_name(t, name) != 0)
        return -1;
    tf_skip_ws(t);
    if (t->p >= t->end || *t->p++ != '>')
        return tf_fail(t, "expected '>' after </%s", name);
    if (t->depth == 0 || strcmp(name, tf_elem[t->stack[t->depth - 1]]) != 0)
        return tf_fail(t, "unexpected </%s>", name);
    return tf_close(t, t->stack[--t->depth]);
}

static int tf_parse(tf_t *t)
{
    for (;;) {
        tf_skip_ws(t);
        if (t->p >= t->end)
            break;
        size_t left = (size_t)(t->end - t->p);
        if (*t->p != '<')
            return tf_fail(t, "unexpected text (0x%02x)", (unsigned char)*t->p);
        if (left >= 4 && memcmp(t->p, "<!--", 4) == 0) {
            t->p += 4;
            if (tf_skip_past(t, "-->") != 0)
                return tf_fail(t, "truncated comment");
        } else if (left >= 2 && t->p[1] == '?' && !t->seen_root) {
            if (tf_skip_past(t, "?>") != 0)
                return tf_fail(t, "truncated <?...?>");
        } else if (left >= 2 && t->p[1] == '/') {
            t->p += 2;
            if (tf_end_tag(t) != 0)
                return -1;
        } else {
            t->p++;
            if (tf_start_tag(t) != 0)
                return -1;
        }
    }
    if (t->depth > 0)
        return tf_fail(t, "truncated: <%s> not closed", tf_elem[t->stack[t->depth - 1]]);
    if (!t->seen_root)
        return tf_fail(t, "no <hcomm_topology> element");
    if (t->count != t->nranks) {
        int r = 0;
        while (r < t->nranks && t->node_of[r] >= 0)
            r++;
        return tf_fail(t, "describes %d ranks, expected %d (rank %d missing)", t->count, t->nranks,
                       r);
    }
    return 0;
}

/* ---- load: file reading and model construction ---- */

static hcomm_status_t tf_read(const char *path, char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        hc_error(INIT, "topology file %s: %s", path, strerror(errno));
        return HCOMM_ERR_IO;
    }
    size_t cap = 0, n = 0;
    char  *b = NULL;
    for (;;) {
        if (n == cap) {
            /* the last step lands on the limit + 1, so a file of exactly the
             * limit (which the digest takes) loads */
            size_t nc = cap ? cap * 2 : 65536;
            if (nc > TF_MAX_FILE + 1 && cap < TF_MAX_FILE + 1)
                nc = TF_MAX_FILE + 1;
            char  *nb = nc <= TF_MAX_FILE + 1 ? realloc(b, nc) : NULL;
            if (nb == NULL) {
                hc_error(INIT, "topology file %s: larger than %u bytes or out of memory", path,
                         TF_MAX_FILE);
                free(b);
                fclose(f);
                return HCOMM_ERR_INVALID_ARG;
            }
            b = nb, cap = nc;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        hc_error(INIT, "topology file %s: read error", path);
        free(b);
        return HCOMM_ERR_IO;
    }
    *buf = b, *len = n;
    return HCOMM_SUCCESS;
}

/* The parsed nodes through hc_cluster_build: one pseudo-host per file node. */
static hcomm_status_t tf_model(tf_t *t, hc_cluster_t **out)
{
    hc_rank_topo_t *rt = calloc((size_t)t->nranks, sizeof(*rt));
    hc_cluster_t   *c  = NULL;
    if (rt == NULL) {
        hc_error(INIT, "topology file %s: out of memory", t->path);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (int r = 0; r < t->nranks; r++) {
        rt[r].host_hash = (uint64_t)t->node_of[r];
        rt[r].numa      = t->numa[r];
    }
    hcomm_status_t st = hc_cluster_build(rt, t->nranks, &c);
    free(rt);
    if (st != HCOMM_SUCCESS)
        return st;
    for (int r = 0; r < t->nranks; r++)
        c->rail_of[r] = t->rail[r];
    for (int k = 0; k < HC_LINK_CLASS_COUNT; k++)
        if (t->link_set[k])
            c->link[k] = t->link[k];
    if (t->reduce_set)
        c->reduce_gbps = t->reduce_gbps;
    free(c->ranks);
    c->ranks = NULL;
    *out     = c;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_cluster_load(const char *path, int nranks, hc_cluster_t **out)
{
    tf_t           t = {.path = path, .line = 1, .nranks = nranks};
    char          *buf;
    size_t         len;
    hcomm_status_t st;
    if (path == NULL || out == NULL || nranks < 1 || nranks > (1 << 24))
        return HCOMM_ERR_INVALID_ARG;
    st = tf_read(path, &buf, &len);
    if (st != HCOMM_SUCCESS)
        return st;
    t.p = buf, t.end = buf + len;
    t.node_of = malloc((size_t)nranks * sizeof(int));
    t.numa    = malloc((size_t)nranks * sizeof(int));
    t.rail    = malloc((size_t)nranks * sizeof(int));
    t.node_id = malloc((size_t)nranks * sizeof(long));
    if (t.node_of == NULL || t.numa == NULL || t.rail == NULL || t.node_id == NULL) {
        hc_error(INIT, "topology file %s: out of memory", path);
        st = HCOMM_ERR_NO_MEMORY;
        goto out_free;
    }
    for (int r = 0; r < nranks; r++)
        t.node_of[r] = -1;
    st = tf_parse(&t) != 0 ? HCOMM_ERR_INVALID_ARG : tf_model(&t, out);
out_free:
    free(t.node_id);
    free(t.rail);
    free(t.numa);
    free(t.node_of);
    free(buf);
    return st;
}
