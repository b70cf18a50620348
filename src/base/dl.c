/* dl.c - loading a library's functions at run time (dl.h). */
#include <dlfcn.h>
#include <stdio.h>

#include "base/dl.h"

int hc_dl_load(const char *lib, const char *const *names, void **const *slots, size_t n,
               char *err, size_t errlen)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

    if (h == NULL) {
        snprintf(err, errlen, "cannot load %s: %s", lib, dlerror());
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        *slots[i] = dlsym(h, names[i]);
        if (*slots[i] == NULL) {
            snprintf(err, errlen, "%s has no %s", lib, names[i]);
            return -1;
        }
    }
    return 0;
}
