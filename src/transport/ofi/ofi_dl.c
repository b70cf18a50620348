/* ofi_dl.c - libfabric is loaded at the first ofi init (dlopen), not linked.
 *
 * Debian's libfabric links the libraries of all its providers (psm, psm2,
 * efa, rdmacm...), and libpsm_infinipath's constructor calibrates a timer at
 * load: pinned to one CPU, it sleeps 125 us some 500 times, ~0.2 s in every
 * process that links libfabric, whatever transport it then uses (measured:
 * `hcomm-perf --help` took 216 ms linked, 8 ms without). Loaded here, only a
 * process that opens the ofi transport pays, once. The few functions that
 * are not inline calls through a fid's ops come through hc_ofi_lib. */
#include <pthread.h>
#include <stdio.h>

#include "base/dl.h"
#include "base/log.h"
#include "transport/ofi/ofi.h"

#define LIBFABRIC "libfabric.so.1"

hc_ofi_lib_t hc_ofi_lib;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int            loaded;
static char           load_error[256];

#define HC_OFI_NAME_(f) #f,
#define HC_OFI_SLOT_(f) (void **)&hc_ofi_lib.f,
static const char *const lib_names[] = {HC_OFI_LIB(HC_OFI_NAME_)};
static void **const      lib_slots[] = {HC_OFI_LIB(HC_OFI_SLOT_)};

static void load(void)
{
    if (hc_dl_load(LIBFABRIC, lib_names, lib_slots, sizeof(lib_names) / sizeof(lib_names[0]),
                   load_error, sizeof(load_error)) != 0)
        return;
    if (FI_MAJOR(hc_ofi_lib.fi_version()) != FI_MAJOR_VERSION) {
        snprintf(load_error, sizeof(load_error), "%s is libfabric %u.x, built for %d.x", LIBFABRIC,
                 FI_MAJOR(hc_ofi_lib.fi_version()), FI_MAJOR_VERSION);
        return;
    }
    loaded = 1; /* the library stays: its providers keep threads and state */
}

hcomm_status_t hc_ofi_load(void)
{
    pthread_once(&load_once, load);
    if (loaded)
        return HCOMM_SUCCESS;
    hc_info(NET, "ofi: %s; the ofi transport is off", load_error);
    return HCOMM_ERR_UNSUPPORTED;
}
