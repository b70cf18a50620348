/* fuzz_topo.c - topology files (HCOMM_TOPO_FILE): hc_cluster_load over any
 * bytes. The first byte is the communicator's rank count: '1'..'9' as written
 * (so seeds stay readable text), any other byte 1 + byte % 64; the rest is the
 * file. A file that loads must survive a round trip: its dump loads into the
 * same model (docs/topology.md promises it). */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "topology/topo.h"

static int  fd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_logs_to_null();
    /* hc_cluster_load takes a path: one in-memory file, rewritten per input */
    fd = memfd_create("hc_fuzz_topo", 0);
    if (fd < 0) {
        perror("memfd_create");
        abort();
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    return 0;
}

static void put_file(const void *data, size_t size)
{
    FUZZ_ASSERT(ftruncate(fd, 0) == 0);
    FUZZ_ASSERT(size == 0 || pwrite(fd, data, size, 0) == (ssize_t)size);
}

static void same_model(const hc_cluster_t *a, const hc_cluster_t *b)
{
    FUZZ_ASSERT(a->nranks == b->nranks && a->nnodes == b->nnodes);
    for (int r = 0; r < a->nranks; r++)
        FUZZ_ASSERT(a->node_of[r] == b->node_of[r] && a->numa_of[r] == b->numa_of[r] &&
                    a->rail_of[r] == b->rail_of[r] && a->local_rank[r] == b->local_rank[r]);
    for (int k = 0; k < HC_LINK_CLASS_COUNT; k++)
        FUZZ_ASSERT(a->link[k].alpha_us == b->link[k].alpha_us &&
                    a->link[k].bw_gbps == b->link[k].bw_gbps);
    FUZZ_ASSERT(a->reduce_gbps == b->reduce_gbps);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hc_cluster_t *c = NULL, *d = NULL;
    if (size == 0)
        return 0;
    int nranks = data[0] >= '1' && data[0] <= '9' ? data[0] - '0' : 1 + data[0] % 64;
    put_file(data + 1, size - 1);
    if (hc_cluster_load(path, nranks, &c) != HCOMM_SUCCESS)
        return 0;
    FUZZ_ASSERT(c != NULL && c->nranks == nranks && c->nnodes >= 1 && c->nnodes <= nranks);

    char  *text = NULL;
    size_t len  = 0;
    FILE  *f    = open_memstream(&text, &len);
    FUZZ_ASSERT(f != NULL);
    FUZZ_ASSERT(hc_cluster_dump(c, f) == HCOMM_SUCCESS);
    FUZZ_ASSERT(fclose(f) == 0);
    put_file(text, len);
    FUZZ_ASSERT(hc_cluster_load(path, nranks, &d) == HCOMM_SUCCESS);
    same_model(c, d);
    free(text);
    hc_cluster_destroy(d);
    hc_cluster_destroy(c);
    return 0;
}
