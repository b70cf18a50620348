/* ib_hca.c - parsing and matching HCOMM_IB_HCA (see ib_hca.h). */
#include "transport/ib/ib_hca.h"

#include <stdio.h>
#include <string.h>

static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
}

/* One item, item[0..n): "name" or "name:port". */
static int parse_item(const char *item, size_t n, hc_ib_hca_entry_t *e, char *why, size_t len)
{
    const char *colon = memchr(item, ':', n);
    size_t      nl    = colon != NULL ? (size_t)(colon - item) : n;

    if (nl == 0 || nl >= HC_IB_NAME_MAX) {
        snprintf(why, len, "device name '%.*s' is empty or longer than %d characters", (int)n, item,
                 HC_IB_NAME_MAX - 1);
        return -1;
    }
    for (size_t i = 0; i < nl; i++) {
        if (!name_char(item[i])) {
            snprintf(why, len, "'%.*s': '%c' cannot be in a device name", (int)n, item, item[i]);
            return -1;
        }
    }
    memcpy(e->name, item, nl);
    e->name[nl] = '\0';
    e->port     = -1;
    if (colon == NULL)
        return 0;
    int port = 0;
    for (size_t i = nl + 1; i < n; i++) {
        if (item[i] < '0' || item[i] > '9' || port > 255) {
            port = 0;
            break;
        }
        port = port * 10 + (item[i] - '0');
    }
    if (nl + 1 == n || port < 1 || port > 255) {
        snprintf(why, len, "'%.*s': the port must be a number from 1 to 255", (int)n, item);
        return -1;
    }
    e->port = port;
    return 0;
}

int hc_ib_hca_parse(const char *spec, hc_ib_hca_filter_t *f, char *why, size_t len)
{
    memset(f, 0, sizeof(*f));
    if (spec == NULL || spec[0] == '\0')
        return 0;
    const char *p = spec;
    if (*p == '^') {
        f->exclude = 1;
        p++;
    }
    if (*p == '=') {
        f->exact = 1;
        p++;
    }
    while (*p != '\0') {
        const char *end = strchr(p, ',');
        size_t      n   = end != NULL ? (size_t)(end - p) : strlen(p);
        if (n > 0) {
            if (f->n == HC_IB_HCA_MAX) {
                snprintf(why, len, "more than %d devices in '%s'", HC_IB_HCA_MAX, spec);
                return -1;
            }
            if (parse_item(p, n, &f->e[f->n], why, len) != 0)
                return -1;
            f->n++;
        }
        p += n + (end != NULL);
    }
    if (f->n == 0) {
        snprintf(why, len, "'%s' names no device", spec);
        return -1;
    }
    return 0;
}

int hc_ib_hca_match(const hc_ib_hca_filter_t *f, const char *dev, int port)
{
    if (f->n == 0)
        return 1;
    int hit = 0;
    for (int i = 0; i < f->n && !hit; i++) {
        const hc_ib_hca_entry_t *e = &f->e[i];
        int                      name =
            f->exact ? strcmp(dev, e->name) == 0 : strncmp(dev, e->name, strlen(e->name)) == 0;
        hit = name && (e->port < 0 || e->port == port);
    }
    return f->exclude ? !hit : hit;
}
