/* ucx_dl.c - UCX is loaded at the first ucx init (dlopen), not linked.
 *
 * Loading libucs runs its constructor, which installs UCX's memory hooks
 * (mmap, munmap, brk: for its registration cache) and its fatal-signal
 * handlers (UCX_ERROR_SIGNALS) in the whole process. Linked, that would be
 * every program on hcomm, whatever transport it uses; and a process that
 * forks while one of its threads is inside a hooked call leaves the hooks'
 * lock taken in the child, whose ucp_init then waits forever (seen with
 * hcomm-perf's forked ranks). Loaded here, only a process that opens the ucx
 * transport has them, from then on. A host without UCX just has no ucx. */
#include <pthread.h>
#include <stdio.h>

#include "base/dl.h"
#include "base/log.h"
#include "transport/ucx/ucx.h"

#define LIBUCP "libucp.so.0"

hc_ucx_api_t hc_ucx_api;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int            loaded;
static char           load_error[256];

#define HC_UCX_NAME_(f) #f,
#define HC_UCX_SLOT_(f) (void **)&hc_ucx_api.f,
static const char *const api_names[] = {HC_UCX_API(HC_UCX_NAME_)};
static void **const      api_slots[] = {HC_UCX_API(HC_UCX_SLOT_)};

static void load(void)
{
    unsigned major, minor, release;

    if (hc_dl_load(LIBUCP, api_names, api_slots, sizeof(api_names) / sizeof(api_names[0]),
                   load_error, sizeof(load_error)) != 0)
        return;
    /* the API this was built against must be there: same major, minor at least */
    hc_ucx_api.ucp_get_version(&major, &minor, &release);
    if (major != UCP_API_MAJOR || minor < UCP_API_MINOR) {
        snprintf(load_error, sizeof(load_error), "%s is UCX %u.%u, built for %d.%d", LIBUCP, major,
                 minor, UCP_API_MAJOR, UCP_API_MINOR);
        return;
    }
    loaded = 1; /* the library stays: UCX is not made to be unloaded */
}

hcomm_status_t hc_ucx_load(void)
{
    pthread_once(&load_once, load);
    if (loaded)
        return HCOMM_SUCCESS;
    hc_info(NET, "ucx: %s; the ucx transport is off", load_error);
    return HCOMM_ERR_UNSUPPORTED;
}
