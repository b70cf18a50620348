/* perf_size.c - perf_parse_size, shared by hcomm-perf and the shim benches. */
#include "perf_size.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

int perf_parse_size(const char *s, size_t *out)
{
    char              *end;
    unsigned long long v, mul = 1;

    errno = 0;
    v     = strtoull(s, &end, 0);
    if (errno != 0 || end == s || *s < '0' || *s > '9') /* strtoull takes " -1" */
        return -1;
    switch (*end) {
    case 'G':
    case 'g':
        mul <<= 10; /* fall through */
    case 'M':
    case 'm':
        mul <<= 10; /* fall through */
    case 'K':
    case 'k':
        mul <<= 10;
        end++;
        break;
    default:
        break;
    }
    if (*end != '\0' || (v != 0 && v > (unsigned long long)SIZE_MAX / mul))
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}
