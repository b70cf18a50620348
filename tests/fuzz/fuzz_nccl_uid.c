/* fuzz_nccl_uid.c - the NCCL shim's unique ids: an ncclUniqueId is hcomm's id
 * byte for byte (nccl_shim.c asserts the sizes), decoded by
 * hc_bootstrap_id_check when ncclCommInitRank* hands it to hcomm_comm_init.
 * Any 128 bytes (short inputs padded with zeros): one the check refuses must
 * make every ncclCommInitRank* call fail with ncclInvalidArgument, before
 * anything is allocated or connected; one it accepts is never joined (that
 * would connect to its address). */
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "fuzz.h"
#include "shim/nccl/nccl_shim.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_logs_to_null();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ncclUniqueId      nid;
    hcomm_unique_id_t id;
    memset(&nid, 0, sizeof(nid));
    memcpy(&nid, data, size < sizeof(nid) ? size : sizeof(nid));
    memcpy(&id, &nid, sizeof(id)); /* as hcomm_nccl_CommInitRankConfig does */
    if (hc_bootstrap_id_check(&id, NULL) == HCOMM_SUCCESS)
        return 0;
    ncclComm_t   comm = NULL;
    ncclConfig_t cfg  = NCCL_CONFIG_INITIALIZER;
    FUZZ_ASSERT(hcomm_nccl_CommInitRank(&comm, 2, nid, 1) == ncclInvalidArgument);
    FUZZ_ASSERT(hcomm_nccl_CommInitRankConfig(&comm, 2, nid, 1, &cfg) == ncclInvalidArgument);
    FUZZ_ASSERT(hcomm_nccl_CommInitRankScalable(&comm, 2, 1, 1, &nid, &cfg) == ncclInvalidArgument);
    FUZZ_ASSERT(comm == NULL && hcomm_nccl_GetLastError(NULL)[0] != '\0');
    return 0;
}
