/* test_topo_discover.c - discovery's parts: devices read from a fake sysfs
 * tree (NICs with speed and NUMA node, RDMA ports as rails, accelerators by
 * PCI class), and one discovery per host: ranks started at once elect one
 * writer and read the same record; a dead, failed or slow writer leaves the
 * readers to discover on their own, within the timeout. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/clock.h"
#include "topology/topo_host.h"

#define NPROC 6

static char share[64];

static int setup(void **state)
{
    (void)state;
    snprintf(share, sizeof(share), "/hcomm-test-topo-share-%d", (int)getpid());
    shm_unlink(share);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    shm_unlink(share);
    return 0;
}

static void assert_same_place(const hc_rank_topo_t *a, const hc_rank_topo_t *b)
{
    assert_int_equal(a->host_hash, b->host_hash);
    assert_int_equal(a->numa, b->numa);
    assert_int_equal(a->nnuma, b->nnuma);
    assert_int_equal(a->ncpus, b->ncpus);
    assert_string_equal(a->cpuset, b->cpuset);
    assert_int_equal(a->nnics, b->nnics);
    for (int i = 0; i < a->nnics; i++) {
        assert_string_equal(a->nics[i].name, b->nics[i].name);
        assert_int_equal(a->nics[i].numa, b->nics[i].numa);
    }
    assert_int_equal(a->ngpus, b->ngpus);
}

/* NPROC processes at once: exactly one writes, all see what discovery sees. */
static void test_one_writer(void **state)
{
    hc_rank_topo_t alone, got[NPROC];
    int            owner, fds[NPROC][2], owners = 0;
    (void)state;
    assert_int_equal(hc_topo_discover(&alone, NULL, 0.0, &owner), HCOMM_SUCCESS);
    for (int i = 0; i < NPROC; i++) {
        assert_int_equal(pipe(fds[i]), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            struct {
                int            owner;
                hcomm_status_t st;
                hc_rank_topo_t t;
            } r;
            memset(&r, 0, sizeof(r));
            r.st = hc_topo_discover(&r.t, share, 10.0, &r.owner);
            _exit(write(fds[i][1], &r, sizeof(r)) == (ssize_t)sizeof(r) ? 0 : 1);
        }
        close(fds[i][1]);
    }
    for (int i = 0; i < NPROC; i++) {
        struct {
            int            owner;
            hcomm_status_t st;
            hc_rank_topo_t t;
        } r;
        int status;
        assert_int_equal(read(fds[i][0], &r, sizeof(r)), (ssize_t)sizeof(r));
        close(fds[i][0]);
        assert_int_equal(r.st, HCOMM_SUCCESS);
        owners += r.owner;
        got[i] = r.t;
        assert_same_place(&alone, &got[i]);
        wait(&status);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    assert_int_equal(owners, 1);
    /* later ranks of the host read the record the writer left */
    hc_rank_topo_t late;
    assert_int_equal(hc_topo_discover(&late, share, 1.0, &owner), HCOMM_SUCCESS);
    assert_int_equal(owner, 0);
    assert_same_place(&alone, &late);
    hc_topo_share_remove(share);
    assert_int_equal(shm_open(share, O_RDONLY, 0), -1);
    assert_int_equal(errno, ENOENT);
}

/* A record header as topo_share.c writes it: state word, then writer pid. */
static void plant_record(uint32_t state_word, int32_t pid)
{
    uint32_t head[2] = {state_word, (uint32_t)pid};
    int      fd      = shm_open(share, O_CREAT | O_EXCL | O_RDWR, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, head, sizeof(head)), (ssize_t)sizeof(head));
    close(fd);
}

static void discover_alone_within(double timeout, double at_least, double at_most)
{
    hc_rank_topo_t alone, t;
    int            owner = -1;
    assert_int_equal(hc_topo_discover(&alone, NULL, 0.0, &owner), HCOMM_SUCCESS);
    double t0 = hc_clock_now();
    assert_int_equal(hc_topo_discover(&t, share, timeout, &owner), HCOMM_SUCCESS);
    double took = hc_clock_now() - t0;
    assert_int_equal(owner, 0);
    assert_same_place(&alone, &t);
    print_message("fell back to own discovery after %.3f s (timeout %.1f s)\n", took, timeout);
    assert_true(took >= at_least && took < at_most);
    shm_unlink(share);
}

/* The writer exited mid-discovery: readers see it is gone and do not wait. */
static void test_dead_writer(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    plant_record(0, (int32_t)pid);
    discover_alone_within(30.0, 0.0, 10.0);
}

/* The writer's discovery failed: readers try their own at once. */
static void test_failed_writer(void **state)
{
    (void)state;
    plant_record(0x6863f00du, (int32_t)getpid());
    discover_alone_within(30.0, 0.0, 10.0);
}

/* The writer died between creating the record and writing its pid: an empty
 * record unchanged for a minute is not waited for; a fresh one is, up to the
 * timeout. */
static void test_empty_record(void **state)
{
    (void)state;
    struct timespec old[2] = {{0, UTIME_OMIT}, {0, 0}};
    int             fd     = shm_open(share, O_CREAT | O_EXCL | O_RDWR, 0600);
    assert_true(fd >= 0);
    assert_int_equal(clock_gettime(CLOCK_REALTIME, &old[1]), 0);
    old[1].tv_sec -= 60;
    assert_int_equal(futimens(fd, old), 0);
    close(fd);
    discover_alone_within(30.0, 0.0, 10.0);
    fd = shm_open(share, O_CREAT | O_EXCL | O_RDWR, 0600);
    assert_true(fd >= 0);
    close(fd);
    discover_alone_within(0.3, 0.3, 10.0);
}

/* The writer lives but never finishes: readers wait the timeout, no longer. */
static void test_slow_writer(void **state)
{
    (void)state;
    plant_record(0, (int32_t)getpid());
    discover_alone_within(0.3, 0.3, 10.0);
}

/* A complete record whose counts run past its arrays and whose strings never
 * end (another build's, or damaged): readers discover on their own (a NUMA
 * count of 5000 made them parse CPU lists past the record: SIGSEGV in
 * hwloc_bitmap_list_sscanf). The header is topo_share.c's: state, pid,
 * layout, pad. */
static void test_garbled_record(void **state)
{
    (void)state;
    size_t   len = 16 + sizeof(hc_topo_host_t);
    uint8_t *rec = malloc(len);
    assert_non_null(rec);
    memset(rec, 'A', len);
    uint32_t head[4] = {0x68636f74u, (uint32_t)getpid(), (uint32_t)sizeof(hc_topo_host_t), 0};
    int32_t  counts  = 5000;
    memcpy(rec, head, sizeof(head));
    memcpy(rec + 16 + offsetof(hc_topo_host_t, nnuma), &counts, sizeof(counts));
    memcpy(rec + 16 + offsetof(hc_topo_host_t, nnics), &counts, sizeof(counts));
    int fd = shm_open(share, O_CREAT | O_EXCL | O_RDWR, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, rec, len), (ssize_t)len);
    close(fd);
    free(rec);
    discover_alone_within(30.0, 0.0, 10.0);
}

/* ---- devices from sysfs ---- */

static char sysroot[128];

/* Writes text to root/rel, creating the folders on the way. */
static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", sysroot, rel);
    for (char *p = strchr(path + strlen(sysroot) + 1, '/'); p != NULL; p = strchr(p + 1, '/')) {
        *p = '\0';
        mkdir(path, 0700);
        *p = '/';
    }
    if (text == NULL) {
        mkdir(path, 0700);
        return;
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void link_to(const char *rel, const char *target_rel)
{
    char path[512], target[512];
    snprintf(path, sizeof(path), "%s/%s", sysroot, rel);
    snprintf(target, sizeof(target), "%s/%s", sysroot, target_rel);
    assert_int_equal(symlink(target, path), 0);
}

static int sys_setup(void **state)
{
    (void)state;
    snprintf(sysroot, sizeof(sysroot), "/tmp/hcomm-test-sysfs-%d", (int)getpid());
    assert_int_equal(mkdir(sysroot, 0700), 0);
    put("sys/devices/pci0000:00/0000:00:03.0/numa_node", "1\n");
    put("sys/devices/pci0000:00/0000:00:03.0/virtio2", NULL);
    put("sys/devices/pci0000:00/0000:81:00.0/numa_node", "0\n");
    put("sys/class/net/eth0/speed", "25000\n");
    link_to("sys/class/net/eth0/device", "sys/devices/pci0000:00/0000:00:03.0/virtio2");
    put("sys/class/net/veth0/speed", "10000\n");                 /* virtual: no device */
    put("sys/bus/pci/devices/0000:07:00.0/class", "0x030200\n"); /* 3D controller */
    put("sys/bus/pci/devices/0000:07:00.0/vendor", "0x10de\n");
    put("sys/bus/pci/devices/0000:02:00.0/class", "0x030000\n"); /* board VGA */
    put("sys/bus/pci/devices/0000:02:00.0/vendor", "0x1a03\n");
    put("sys/bus/pci/devices/0000:81:00.0/class", "0x020000\n"); /* a NIC */
    put("sys/bus/pci/devices/0000:81:00.0/vendor", "0x15b3\n");
    put("sys/bus/pci/devices/0000:0a:00.0/class", "0x120000\n"); /* accelerator */
    put("sys/bus/pci/devices/0000:0a:00.0/vendor", "0x1da3\n");
    hc_topo_set_sysfs_root(sysroot);
    return 0;
}

static int sys_teardown(void **state)
{
    char cmd[256];
    (void)state;
    hc_topo_set_sysfs_root(NULL);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sysroot);
    return system(cmd) == 0 ? 0 : -1;
}

/* Without RDMA: the interfaces backed by a device, NUMA node from the parent
 * function of a virtio device, Mb/s as GB/s; accelerators by class. */
static void test_sysfs_netdevs(void **state)
{
    hc_topo_host_t host;
    (void)state;
    memset(&host, 0, sizeof(host));
    hc_topo_scan_devices(&host);
    assert_int_equal(host.nnics, 1);
    assert_string_equal(host.nics[0].name, "eth0");
    assert_int_equal(host.nics[0].numa, 1);
    assert_true(host.nics[0].speed_gbps > 3.12 && host.nics[0].speed_gbps < 3.13);
    assert_int_equal(host.ngpus, 2);
    assert_string_equal(host.gpus[0], "0000:07:00.0");
    assert_string_equal(host.gpus[1], "0000:0a:00.0");
}

/* Active RDMA ports are the rails (down ones are not); their netdevs are not
 * counted again. */
static void test_sysfs_rdma(void **state)
{
    hc_topo_host_t host;
    (void)state;
    put("sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
    put("sys/class/infiniband/mlx5_0/ports/1/rate", "100 Gb/sec (4X EDR)\n");
    put("sys/class/infiniband/mlx5_0/ports/2/state", "1: DOWN\n");
    put("sys/class/infiniband/mlx5_0/ports/2/rate", "100 Gb/sec (4X EDR)\n");
    link_to("sys/class/infiniband/mlx5_0/device", "sys/devices/pci0000:00/0000:81:00.0");
    put("sys/class/infiniband/mlx5_1/ports/1/state", "4: ACTIVE\n");
    put("sys/class/infiniband/mlx5_1/ports/1/rate", "200 Gb/sec (4X HDR)\n");
    memset(&host, 0, sizeof(host));
    hc_topo_scan_devices(&host);
    assert_int_equal(host.nnics, 2);
    assert_string_equal(host.nics[0].name, "mlx5_0:1");
    assert_int_equal(host.nics[0].numa, 0);
    assert_true(host.nics[0].speed_gbps == 12.5);
    assert_string_equal(host.nics[1].name, "mlx5_1:1");
    assert_int_equal(host.nics[1].numa, -1);
    assert_true(host.nics[1].speed_gbps == 25.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sysfs_netdevs, sys_setup, sys_teardown),
        cmocka_unit_test_setup_teardown(test_sysfs_rdma, sys_setup, sys_teardown),
        cmocka_unit_test_setup_teardown(test_one_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slow_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbled_record, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
