/* dl.h - a library loaded at run time (dlopen) instead of linked, for the
 * transports whose libraries cost every process that links them (ofi_dl.c,
 * ucx_dl.c say why). */
#ifndef HC_BASE_DL_H
#define HC_BASE_DL_H

#include <stddef.h>

/* Opens lib (kept loaded for the process's life) and stores the address of
 * names[i] in *slots[i] for each of the n names. 0; or -1 with why in err
 * (errlen bytes), the slots then unreliable. */
int hc_dl_load(const char *lib, const char *const *names, void **const *slots, size_t n,
               char *err, size_t errlen);

#endif
