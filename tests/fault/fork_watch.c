/* fork_watch.c - a process that holds a communicator (so hcomm's watch thread
 * runs) forks two children; they make a 2-rank communicator of their own.
 * Child B blocks in an allreduce (timeout 8 s); child A revokes after 1 s.
 * B's allreduce must end HCOMM_ERR_REVOKED within 4 s, as it does when the
 * children are not forked from an hcomm process ("nofirst"). The children
 * once inherited a watch thread that was not theirs (a fork copies no
 * thread): B's watch never answered and it timed out. Exits 0 when B's call
 * was revoked in time. Not under hcomm-run: a process of its own. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "hcomm.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    hcomm_comm_t first = NULL;
    int          p[2];
    if (!(argc > 1 && strcmp(argv[1], "nofirst") == 0)) {
        hcomm_unique_id_t id0;
        if (hcomm_get_unique_id(&id0) || hcomm_comm_init(&first, 1, &id0, 0))
            return 2;
        printf("parent: a 1-rank communicator is up (watch thread running)\n");
        fflush(stdout);
    }
    if (pipe(p) != 0)
        return 2;
    pid_t a = fork();
    if (a == 0) {
        hcomm_unique_id_t id;
        hcomm_comm_t      c;
        if (hcomm_get_unique_id(&id))
            _exit(3);
        if (write(p[1], &id, sizeof(id)) != sizeof(id))
            _exit(3);
        if (hcomm_comm_init(&c, 2, &id, 0))
            _exit(4);
        sleep(1);
        hcomm_comm_revoke(c);
        printf("child A: revoked\n");
        fflush(stdout);
        sleep(9);
        hcomm_comm_abort(c);
        _exit(0);
    }
    pid_t b = fork();
    if (b == 0) {
        hcomm_unique_id_t id;
        hcomm_comm_t      c;
        static float      x[1024];
        if (read(p[0], &id, sizeof(id)) != sizeof(id))
            _exit(3);
        if (hcomm_comm_init(&c, 2, &id, 1) || hcomm_comm_set_timeout(c, 8))
            _exit(4);
        double t = now();
        hcomm_status_t st = hcomm_allreduce(x, x, 1024, HCOMM_FLOAT32, HCOMM_SUM, c, NULL);
        double took = now() - t;
        printf("child B: allreduce: %s after %.2f s\n", hcomm_status_str(st), took);
        fflush(stdout);
        hcomm_comm_abort(c);
        _exit(st == HCOMM_ERR_REVOKED && took < 4 ? 0 : 1);
    }
    int s, sb = -1;
    waitpid(b, &sb, 0);
    if (waitpid(a, &s, WNOHANG) == 0) /* A waits 9 s more: not needed now */
        kill(a, SIGKILL), waitpid(a, &s, 0);
    if (first)
        hcomm_comm_destroy(first);
    return WIFEXITED(sb) && WEXITSTATUS(sb) == 0 ? 0 : 1;
}
