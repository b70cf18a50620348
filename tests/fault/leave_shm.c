/* leave_shm.c - a rank that leaves objects of its job in /dev/shm, as a rank
 * killed in the middle of init or a collective does: run under hcomm-run, it
 * creates /hcomm-<the job's public name>-left-<rank>, and rank 1 kills
 * itself once all have. hcomm-run must remove them all once the job is over
 * (run_sweep.sh). */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/auth.h"

int main(void)
{
    const char *hex = getenv("HCOMM_COOKIE"), *rank = getenv("HCOMM_RANK");
    uint8_t     key[16];
    char        pub[17], name[64];
    if (hex == NULL || rank == NULL || strlen(hex) != 32) {
        fprintf(stderr, "leave_shm: run me under hcomm-run\n");
        return 2;
    }
    for (int i = 0; i < 16; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return 2;
        key[i] = (uint8_t)v;
    }
    if (hc_auth_public_name(key, HC_AUTH_SHM_NAMES, pub, sizeof(pub)) != 0)
        return 3;
    snprintf(name, sizeof(name), "/hcomm-%s-left-%s", pub, rank);
    int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
    if (fd < 0) {
        perror("leave_shm: shm_open");
        return 4;
    }
    close(fd);
    if (strcmp(rank, "1") != 0)
        return 0;
    /* Dies once every rank's object is there (up to 10 s). */
    const char *n = getenv("HCOMM_NRANKS");
    for (int r = 0, tries = 0; n != NULL && r < atoi(n) && tries < 1000; tries++) {
        snprintf(name, sizeof(name), "/dev/shm/hcomm-%s-left-%d", pub, r);
        if (access(name, F_OK) == 0)
            r++;
        else
            usleep(10000);
    }
    raise(SIGKILL);
    return 0;
}
