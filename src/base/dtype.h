/* dtype.h - a datatype's size on the call path, inline: hcomm_dtype_size is
 * the public, checked entry point to the same table (dtype.c). */
#ifndef HC_BASE_DTYPE_H
#define HC_BASE_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "hcomm.h"

extern const uint8_t hc_dtype_sizes[HCOMM_DTYPE_COUNT] __attribute__((visibility("hidden")));

/* The size of dt in bytes; 0 for a value outside the enum. */
static inline size_t hc_dtype_size(hcomm_dtype_t dt)
{
    return (unsigned)dt < HCOMM_DTYPE_COUNT ? hc_dtype_sizes[dt] : 0;
}

#endif
