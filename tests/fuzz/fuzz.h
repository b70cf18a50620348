/* fuzz.h - what the libFuzzer harnesses share (tests/fuzz/run.sh builds them). */
#ifndef HC_FUZZ_H
#define HC_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/params.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every log line is formatted (a bad format argument shows) but goes to
 * /dev/null, since the parsers log each rejected input; set HCOMM_LOG_FILE
 * and HCOMM_LOG_LEVEL to read them while replaying one input. */
static inline void fuzz_logs_to_null(void)
{
    setenv("HCOMM_LOG_FILE", "/dev/null", 0);
    setenv("HCOMM_LOG_LEVEL", "trace", 0);
    (void)hc_params_get(); /* the log reads them with the parameters: now, not at the first use */
}

/* A harness's check that failed: abort, so libFuzzer saves the input. */
#define FUZZ_ASSERT(cond)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: harness check failed: %s\n", __FILE__, __LINE__, #cond);       \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
