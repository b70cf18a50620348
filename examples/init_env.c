/* init_env.c - the README's first example, whole: a communicator from
 * whatever launched this process (hcomm-run, mpirun, srun, torchrun;
 * docs/launchers.md), one allreduce, checked. Build it on an installed hcomm:
 *   cc init_env.c $(pkg-config --cflags --libs hcomm) -o init_env
 *   mpirun -np 3 ./init_env
 * Each rank prints one line; the exit status is 0 when the sum is right. */
#include <hcomm.h>
#include <stdio.h>

#define N 1024

int main(void)
{
    static float   grad[N];
    hcomm_comm_t   comm;
    int            rank, nranks;
    hcomm_status_t st = hcomm_comm_init_env(&comm);

    if (st != HCOMM_SUCCESS) {
        fprintf(stderr, "init_env: hcomm_comm_init_env: %s\n", hcomm_status_str(st));
        return 1;
    }
    hcomm_comm_rank(comm, &rank);
    hcomm_comm_size(comm, &nranks);
    for (int i = 0; i < N; i++)
        grad[i] = (float)(rank + 1);
    st = hcomm_allreduce(grad, grad, N, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL); /* in place */
    float want = (float)nranks * (float)(nranks + 1) / 2;
    int   bad  = st != HCOMM_SUCCESS;
    for (int i = 0; i < N && !bad; i++)
        bad = grad[i] != want;
    printf("init_env: rank %d of %d: allreduce %s (%g, want %g)\n", rank, nranks,
           bad ? "WRONG" : "ok", (double)grad[0], (double)want);
    fflush(stdout);
    if (hcomm_comm_destroy(comm) != HCOMM_SUCCESS)
        bad = 1;
    return bad;
}
