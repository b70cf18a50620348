/* perf_size.h - the byte sizes the perf tools take on their command lines. */
#ifndef HC_PERF_SIZE_H
#define HC_PERF_SIZE_H

#include <stddef.h>

/* "4096", "0x1000", "64K", "16M", "2G" (k, m, g too); 0, or -1 for anything
 * else (junk after the number, a sign, overflow). */
int perf_parse_size(const char *s, size_t *out);

#endif
