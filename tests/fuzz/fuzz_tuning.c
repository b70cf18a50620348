/* fuzz_tuning.c - tuning files (HCOMM_TUNING_FILE, docs/tuning.md): any bytes
 * through hc_tuning_parse, then lookups over what it kept, whose answers must
 * be algorithms of the collective asked about. */
#include <stdint.h>
#include <stdio.h>

#include "algorithms/select.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_logs_to_null();
    unsetenv("HCOMM_TUNING_FILE"); /* the first lookup would load it over ours */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t sizes[] = {0, 1, 65536, SIZE_MAX};
    if (size == 0) /* fmemopen refuses an empty buffer */
        return 0;
    FILE *f = fmemopen((void *)data, size, "r");
    FUZZ_ASSERT(f != NULL);
    int n = hc_tuning_parse(f, "fuzz");
    fclose(f);
    FUZZ_ASSERT(n >= -1);
    for (int c = 0; c < HC_COLL_COUNT && n > 0; c++)
        for (int nranks = 1; nranks <= 4; nranks++)
            for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
                hc_algo_t algo;
                size_t    chunk;
                if (hc_tuning_lookup((hc_coll_t)c, nranks, sizes[i], &algo, &chunk) == 0)
                    FUZZ_ASSERT(hc_algo_implements((hc_coll_t)c, algo));
            }
    return 0;
}
