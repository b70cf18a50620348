/* fuzz_uid.c - hcomm's unique ids (hcomm_unique_id_t), which a program passes
 * from rank to rank as bytes: hc_bootstrap_id_check over any 128 bytes (short
 * inputs are padded with zeros). An id it refuses must be refused by init
 * too, before init allocates or connects anything; an id it accepts is only
 * decoded and printed, never joined (that would connect to its address). */
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "base/sock.h"
#include "bootstrap/bootstrap.h"
#include "fuzz.h"
#include "hcomm.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_logs_to_null();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hcomm_unique_id_t id;
    hc_uid_t          uid;
    memset(&id, 0, sizeof(id));
    memcpy(&id, data, size < sizeof(id) ? size : sizeof(id));
    if (hc_bootstrap_id_check(&id, &uid) == HCOMM_SUCCESS) {
        struct sockaddr_storage ss;
        char                    s[HC_SOCK_ADDRSTRLEN];
        FUZZ_ASSERT(uid.magic == HC_UID_MAGIC && uid.root_addrlen <= sizeof(uid.root_addr));
        memset(&ss, 0, sizeof(ss));
        memcpy(&ss, uid.root_addr, uid.root_addrlen);
        /* the address is whole: its family, read inside root_addrlen, and that
         * family's length */
        FUZZ_ASSERT(ss.ss_family == AF_INET || ss.ss_family == AF_INET6);
        FUZZ_ASSERT(uid.root_addrlen == (ss.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                                                 : sizeof(struct sockaddr_in6)));
        hc_sock_addr_str((struct sockaddr *)&ss, s, sizeof(s));
        return 0;
    }
    hcomm_comm_t    comm = NULL;
    hc_bootstrap_t *bs   = NULL;
    FUZZ_ASSERT(hcomm_comm_init(&comm, 2, &id, 1) == HCOMM_ERR_INVALID_ARG && comm == NULL);
    FUZZ_ASSERT(hc_bootstrap_init(&id, 2, 1, 1.0, &bs) == HCOMM_ERR_INVALID_ARG && bs == NULL);
    return 0;
}
