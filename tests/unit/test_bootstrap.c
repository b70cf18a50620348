/* test_bootstrap.c - the bootstrap over loopback: rings of forked processes,
 * a wrong cookie, strangers and a squatter, a missing rank, a rank or a root
 * that dies during init, a root that starts after its ranks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/params.h"
#include "base/sock.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_gate.h"
#include "bootstrap/bootstrap_root.h"
#include "bootstrap/bootstrap_wire.h"

#define MAX_RANKS 8
#define SMALL_SLOT 13
#define BIG_SLOT (1u << 20)
#define CHILD_ALARM 60 /* seconds before a stuck child is killed */

static const uint8_t test_cookie[16] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe,
                                        0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};

static void set_timeout_env(const char *seconds)
{
    setenv("HCOMM_TIMEOUT", seconds, 1);
    hc_params_reload();
}

static int group_setup(void **state)
{
    (void)state;
    setenv("HCOMM_SOCKET_IFNAME", "lo", 1);
    setenv("HCOMM_LOG_LEVEL", "warn", 1);
    unsetenv("HCOMM_LOG_FILE");
    set_timeout_env("30");
    return 0;
}

/* Log capture: the library logs to stderr; tests that expect errors keep
 * them in a file and show it only when they fail. */
static int  saved_stderr = -1;
static char capture_path[64];

static void capture_begin(void)
{
    snprintf(capture_path, sizeof(capture_path), "/tmp/hc_test_bootstrap_%d.log", (int)getpid());
    int fd = open(capture_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    fflush(stderr);
    saved_stderr = dup(2);
    assert_true(saved_stderr >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    close(fd);
}

/* Counts the lines of the capture that contain both needles. */
static int capture_count(const char *a, const char *b)
{
    FILE *f = fopen(capture_path, "r");
    char  line[2048];
    int   n = 0;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, a) != NULL && strstr(line, b) != NULL;
    fclose(f);
    return n;
}

static void capture_end(int show)
{
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    if (show) {
        FILE *f = fopen(capture_path, "r");
        char  line[2048];
        while (f != NULL && fgets(line, sizeof(line), f) != NULL)
            fprintf(stderr, "  captured: %s", line);
        if (f != NULL)
            fclose(f);
    }
    unlink(capture_path);
}

static uint8_t pattern(int rank, size_t size, size_t i)
{
    return (uint8_t)(rank * 131 + i * 7 + size + (i >> 11));
}

/* One allgather of size-byte slots; 0 on success, else an exit code. */
static int check_allgather(hc_bootstrap_t *bs, int nranks, int rank, size_t size, int code)
{
    uint8_t *buf = malloc(size * (size_t)nranks);
    if (buf == NULL)
        return 9;
    memset(buf, 0xee, size * (size_t)nranks);
    for (size_t i = 0; i < size; i++)
        buf[(size_t)rank * size + i] = pattern(rank, size, i);
    int rc = hc_bootstrap_allgather(bs, buf, size) == HCOMM_SUCCESS ? 0 : code;
    for (int r = 0; r < nranks && rc == 0; r++)
        for (size_t i = 0; i < size && rc == 0; i++)
            if (buf[(size_t)r * size + i] != pattern(r, size, i))
                rc = code + 1;
    free(buf);
    return rc;
}

/* A rank's whole life; returns its exit code (0 = all checks passed). */
static int rank_main(const hcomm_unique_id_t *id, int nranks, int rank)
{
    hc_bootstrap_t *bs;
    if (hc_bootstrap_init(id, nranks, rank, 20.0, &bs) != HCOMM_SUCCESS)
        return 1;
    int rc = check_allgather(bs, nranks, rank, SMALL_SLOT, 2);
    if (rc == 0)
        rc = check_allgather(bs, nranks, rank, BIG_SLOT, 4);
    if (rc == 0 && hc_bootstrap_barrier(bs) != HCOMM_SUCCESS)
        rc = 6;
    if (rc == 0 && strcmp(hc_bootstrap_local_ip(bs), "127.0.0.1") != 0)
        rc = 7;
    if (rc == 0 && memcmp(hc_bootstrap_cookie(bs), test_cookie, 16) != 0)
        rc = 8;
    hc_bootstrap_destroy(bs);
    return rc;
}

typedef int (*child_fn)(const hcomm_unique_id_t *id, int nranks, int rank);

static void spawn(child_fn fn, const hcomm_unique_id_t *id, int nranks, int first, int count,
                  pid_t *pids)
{
    for (int i = 0; i < count; i++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            alarm(CHILD_ALARM);
            _exit(fn(id, nranks, first + i));
        }
        pids[i] = pid;
    }
}

/* Waits for every child; returns how many did not exit with 0. */
static int reap(const pid_t *pids, int count)
{
    int bad = 0;
    for (int i = 0; i < count; i++) {
        int status;
        while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "  child %d: %s %d\n", i, WIFEXITED(status) ? "exit" : "signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            bad++;
        }
    }
    return bad;
}

static void run_ring(int nranks)
{
    hcomm_unique_id_t id;
    pid_t             pids[MAX_RANKS];
    assert_int_equal(hc_bootstrap_root_start(NULL, test_cookie, &id), HCOMM_SUCCESS);
    spawn(rank_main, &id, nranks, 0, nranks, pids);
    assert_int_equal(reap(pids, nranks), 0);
}

static void test_ring_1(void **state)
{
    (void)state;
    run_ring(1);
}
static void test_ring_2(void **state)
{
    (void)state;
    run_ring(2);
}
static void test_ring_3(void **state)
{
    (void)state;
    run_ring(3);
}
static void test_ring_5(void **state)
{
    (void)state;
    run_ring(5);
}
static void test_ring_8(void **state)
{
    (void)state;
    run_ring(8);
}

/* ---- interface choice on a made-up list ---- */

typedef struct fake_if {
    struct ifaddrs      ifa;
    struct sockaddr_in6 addr; /* room for either family */
} fake_if_t;

/* name, flags and address of entry i; linked in order. */
static void fake_if(fake_if_t *f, int i, const char *name, unsigned flags, const char *ip)
{
    memset(&f[i], 0, sizeof(f[i]));
    f[i].ifa.ifa_name  = (char *)name;
    f[i].ifa.ifa_flags = flags;
    f[i].ifa.ifa_addr  = (struct sockaddr *)&f[i].addr;
    if (strchr(ip, ':') != NULL) {
        f[i].addr.sin6_family = AF_INET6;
        assert_int_equal(inet_pton(AF_INET6, ip, &f[i].addr.sin6_addr), 1);
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)&f[i].addr;
        in->sin_family         = AF_INET;
        assert_int_equal(inet_pton(AF_INET, ip, &in->sin_addr), 1);
    }
    if (i > 0)
        f[i - 1].ifa.ifa_next = &f[i].ifa;
}

static const char *picked(const fake_if_t *f, const char *spec)
{
    const struct ifaddrs *p = hc_sock_if_pick(&f[0].ifa, spec);
    return p != NULL ? p->ifa_name : "(none)";
}

/* As NCCL: by default a container's or VM's bridge, or a NIC without carrier,
 * is passed over for one that reaches other hosts, and IPoIB comes first. */
static void test_interface_choice(void **state)
{
    fake_if_t f[7];
    unsigned  up = IFF_UP, run = IFF_UP | IFF_RUNNING;
    (void)state;
    fake_if(f, 0, "lo", run | IFF_LOOPBACK, "127.0.0.1");
    fake_if(f, 1, "docker0", run, "172.17.0.1");
    fake_if(f, 2, "eno1", up, "10.0.0.5"); /* no carrier */
    fake_if(f, 3, "virbr0", run, "192.168.122.1");
    fake_if(f, 4, "eno2", run, "10.0.1.5");
    fake_if(f, 5, "ib0", run, "fd00::5");
    fake_if(f, 6, "ib1", up, "10.2.0.5");
    assert_string_equal(picked(f, ""), "ib0"); /* IPoIB with carrier, IPv6 though it is */
    assert_string_equal(picked(f, "^ib"), "eno2");
    assert_string_equal(picked(f, "^ib,eno2"), "docker0"); /* nothing better: up will do */
    assert_string_equal(picked(f, "eno"), "eno2");         /* a listed one with carrier first */
    assert_string_equal(picked(f, "=eno1"), "eno1");       /* named: taken without carrier */
    assert_string_equal(picked(f, "docker"), "docker0");
    assert_string_equal(picked(f, "^ib,eno,docker,virbr"), "(none)");
    f[4].ifa.ifa_next = NULL; /* no IPoIB */
    assert_string_equal(picked(f, ""), "eno2");
    f[2].ifa.ifa_flags = run;
    assert_string_equal(picked(f, ""), "eno1");
}

static void test_addresses(void **state)
{
    struct sockaddr_storage ss;
    socklen_t               len;
    char                    s[HC_SOCK_ADDRSTRLEN];
    (void)state;
    assert_int_equal(hc_sock_parse_addr("127.0.0.1:8080", HC_SUBSYS(BOOT), &ss, &len), HCOMM_SUCCESS);
    hc_sock_addr_str((struct sockaddr *)&ss, s, sizeof(s));
    assert_string_equal(s, "127.0.0.1:8080");
    assert_int_equal(hc_sock_parse_addr("[::1]:443", HC_SUBSYS(BOOT), &ss, &len), HCOMM_SUCCESS);
    assert_int_equal(ss.ss_family, AF_INET6);
    hc_sock_addr_str((struct sockaddr *)&ss, s, sizeof(s));
    assert_string_equal(s, "[::1]:443");

    capture_begin();
    static const char *bad[] = {"127.0.0.1", "::1:80",      "[::1]",      "[::1]80",
                                "h:99999",   "127.0.0.1:x", "127.0.0.1:", "127.0.0.1:-1"};
    int                nbad  = 0;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        nbad += hc_sock_parse_addr(bad[i], HC_SUBSYS(BOOT), &ss, &len) == HCOMM_ERR_INVALID_ARG;
    hcomm_unique_id_t id;
    int               port0 = hc_bootstrap_id_from_addr("127.0.0.1:0", test_cookie, &id);
    int               noif  = hc_sock_if_addr("hcnoif", HC_SUBSYS(BOOT), &ss, &len);
    int               exact = hc_sock_if_addr("=l", HC_SUBSYS(BOOT), &ss, &len); /* "lo" is no exact "l" */
    capture_end(0);
    assert_int_equal(nbad, (int)(sizeof(bad) / sizeof(bad[0])));
    assert_int_equal(port0, HCOMM_ERR_INVALID_ARG);
    assert_int_equal(noif, HCOMM_ERR_UNREACHABLE);
    assert_int_equal(exact, HCOMM_ERR_UNREACHABLE);
    assert_int_equal(hc_sock_if_addr("=lo", HC_SUBSYS(BOOT), &ss, &len), HCOMM_SUCCESS);

    assert_int_equal(hc_sock_if_addr("lo", HC_SUBSYS(BOOT), &ss, &len), HCOMM_SUCCESS);
    hc_sock_ip_str((struct sockaddr *)&ss, s, sizeof(s));
    assert_string_equal(s, "127.0.0.1");
    assert_int_equal(hc_sock_if_addr("", HC_SUBSYS(BOOT), &ss, &len), HCOMM_SUCCESS);
    assert_true(ss.ss_family == AF_INET || ss.ss_family == AF_INET6);

    uint8_t a[16], b[16];
    assert_int_equal(hc_bootstrap_random(a, sizeof(a)), HCOMM_SUCCESS);
    assert_int_equal(hc_bootstrap_random(b, sizeof(b)), HCOMM_SUCCESS);
    assert_memory_not_equal(a, b, sizeof(a));
}

/* A child that joins with a wrong cookie: passes when refused with AUTH. */
static int intruder_main(const hcomm_unique_id_t *id, int nranks, int rank)
{
    hcomm_unique_id_t bad = *id;
    hc_uid_t          uid;
    hc_bootstrap_t   *bs;
    memcpy(&uid, bad.internal, sizeof(uid));
    uid.cookie[3] ^= 0x5a;
    memcpy(bad.internal, &uid, sizeof(uid));
    hcomm_status_t st = hc_bootstrap_init(&bad, nranks, rank, 10.0, &bs);
    return st == HCOMM_ERR_AUTH ? 0 : 1;
}

static int connect_root(const hcomm_unique_id_t *id)
{
    hc_uid_t uid;
    memcpy(&uid, id->internal, sizeof(uid));
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)uid.root_addr, uid.root_addrlen), 0);
    return fd;
}

static void wait_for_lines(const char *a, const char *b, int n)
{
    for (int i = 0; i < 500 && capture_count(a, b) < n; i++)
        usleep(10000);
}

static void test_wrong_cookie(void **state)
{
    hcomm_unique_id_t id;
    pid_t             pids[MAX_RANKS];
    (void)state;
    assert_int_equal(hc_bootstrap_root_start(NULL, test_cookie, &id), HCOMM_SUCCESS);
    capture_begin();
    /* Refused with AUTH before the real ranks exist. */
    spawn(intruder_main, &id, 3, 0, 1, pids);
    int intruder_bad = reap(pids, 1);
    /* A silent client and a garbage hello must not hold the root up. */
    int                  silent  = connect_root(&id);
    int                  garbage = connect_root(&id);
    hc_bootstrap_hello_t junk;
    memset(&junk, 0x41, sizeof(junk));
    assert_int_equal(send(garbage, &junk, sizeof(junk), 0), (ssize_t)sizeof(junk));
    /* Fork only once the root thread has logged, so no child inherits a held
     * log lock; the intruder's and the garbage's refusals are one warning (the
     * rest are counted, not logged). */
    wait_for_lines("refused a connection from", "", 1);
    usleep(100000);
    spawn(rank_main, &id, 3, 0, 3, pids);
    int ranks_bad = reap(pids, 3);
    int refused   = capture_count("refused a connection from", "");
    close(silent);
    close(garbage);
    capture_end(intruder_bad || ranks_bad || refused != 1);
    assert_int_equal(intruder_bad, 0);
    assert_int_equal(ranks_bad, 0);
    assert_int_equal(refused, 1);
}

/* A stranger's hello gets the root's challenge and, after a wrong proof,
 * nothing more: not how many ranks have joined (here two of three have), not
 * even a refusal. Returns the bytes that came after the challenge, or -1. */
static int stranger_hello(const hcomm_unique_id_t *id)
{
    struct timeval       tv = {5, 0};
    hc_bootstrap_hello_t h;
    hc_gate_challenge_t  c;
    hc_gate_proof_t      p;
    uint8_t              more[64];
    int                  fd = connect_root(id);

    memset(&h, 0x11, sizeof(h));
    memset(&p, 0x22, sizeof(p));
    h.magic  = htonl(HC_BOOTSTRAP_HELLO_MAGIC);
    h.rank   = (int32_t)htonl(2);
    h.nranks = (int32_t)htonl(3);
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    assert_int_equal(send(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
    ssize_t n = recv(fd, &c, sizeof(c), MSG_WAITALL);
    if (n != (ssize_t)sizeof(c) || ntohl(c.magic) != HC_GATE_CHALLENGE_MAGIC) {
        close(fd);
        return -1;
    }
    assert_int_equal(send(fd, &p, sizeof(p), 0), (ssize_t)sizeof(p));
    n = recv(fd, more, sizeof(more), MSG_WAITALL);
    close(fd);
    return (int)n;
}

static void test_refusal_says_nothing(void **state)
{
    hcomm_unique_id_t id;
    pid_t             pids[MAX_RANKS];
    int               told = 0;
    (void)state;
    assert_int_equal(hc_bootstrap_root_start(NULL, test_cookie, &id), HCOMM_SUCCESS);
    capture_begin();
    spawn(rank_main, &id, 3, 0, 2, pids);
    for (int i = 0; i < 10; i++) { /* the two join within these 0.5 s */
        usleep(50000);
        int n = stranger_hello(&id);
        told  = n != 0 ? n : told;
    }
    wait_for_lines("refused a connection from", "wrong proof", 1); /* then fork */
    spawn(rank_main, &id, 3, 2, 1, pids + 2);
    int bad = reap(pids, 3);
    capture_end(bad || told != 0);
    assert_int_equal(bad, 0);
    assert_int_equal(told, 0);
}

/* A rank that meets a squatter on the root's port: the squatter answers with
 * a challenge it made up; the rank must see through it (HCOMM_ERR_AUTH) and
 * send nothing that holds the secret. */
static int squatted_main(const hcomm_unique_id_t *id, int nranks, int rank)
{
    hc_bootstrap_t *bs;
    hcomm_status_t  st = hc_bootstrap_init(id, nranks, rank, 5.0, &bs);
    if (st == HCOMM_SUCCESS)
        hc_bootstrap_destroy(bs);
    return st == HCOMM_ERR_AUTH ? 0 : 1;
}

static int holds_cookie(const uint8_t *buf, size_t len)
{
    for (size_t i = 0; i + sizeof(test_cookie) <= len; i++)
        if (memcmp(buf + i, test_cookie, sizeof(test_cookie)) == 0)
            return 1;
    return 0;
}

static void test_squatter_learns_nothing(void **state)
{
    struct sockaddr_in  sa  = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t           len = sizeof(sa);
    struct timeval      tv  = {3, 0};
    hcomm_unique_id_t   id;
    hc_gate_challenge_t c;
    uint8_t             got[512];
    pid_t               pid;
    char                addr[32];
    (void)state;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(lfd >= 0);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(lfd, 4), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(sa.sin_port));
    assert_int_equal(hc_bootstrap_id_from_addr(addr, test_cookie, &id), HCOMM_SUCCESS);
    capture_begin();
    spawn(squatted_main, &id, 2, 1, 1, &pid);
    int fd = accept(lfd, NULL, NULL);
    assert_true(fd >= 0);
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    size_t  have = 0;
    ssize_t n    = recv(fd, got, sizeof(hc_bootstrap_hello_t), MSG_WAITALL);
    have += n > 0 ? (size_t)n : 0;
    memset(&c, 0x5c, sizeof(c));
    c.magic = htonl(HC_GATE_CHALLENGE_MAGIC);
    assert_int_equal(send(fd, &c, sizeof(c), MSG_NOSIGNAL), (ssize_t)sizeof(c));
    while ((n = recv(fd, got + have, sizeof(got) - have, 0)) > 0) /* until the rank hangs up */
        have += (size_t)n;
    close(fd);
    close(lfd);
    int bad    = reap(&pid, 1);
    int logged = capture_count("does not know the job secret", "");
    capture_end(bad || logged != 1 || have != sizeof(hc_bootstrap_hello_t));
    assert_int_equal(bad, 0);
    assert_int_equal(have, sizeof(hc_bootstrap_hello_t)); /* the hello, and no proof */
    assert_false(holds_cookie(got, have));
    assert_int_equal(logged, 1);
}

/* Joins and says whether it took less than the gate's deadline for one stranger:
 * a root that waited on a stranger's hello would take at least that. */
static int quick_rank_main(const hcomm_unique_id_t *id, int nranks, int rank)
{
    double t0 = hc_clock_now();
    int    rc = rank_main(id, nranks, rank);
    return rc != 0 ? rc : hc_clock_now() - t0 < HC_GATE_HELLO_TIMEOUT ? 0 : 10;
}

/* More silent connections than the gate holds, and garbage, before the ranks
 * come: strangers cost the real ranks no wait. */
static void test_strangers_do_not_stall(void **state)
{
    enum { SILENT = 300, GARBAGE = 30 };
    hcomm_unique_id_t id;
    pid_t             pids[MAX_RANKS];
    int               fds[SILENT + GARBAGE];
    uint8_t           junk[100];
    (void)state;
    assert_int_equal(hc_bootstrap_root_start(NULL, test_cookie, &id), HCOMM_SUCCESS);
    capture_begin();
    memset(junk, 0x41, sizeof(junk));
    for (int i = 0; i < SILENT + GARBAGE; i++) {
        fds[i] = connect_root(&id);
        if (i >= SILENT)
            (void)send(fds[i], junk, sizeof(junk), MSG_NOSIGNAL);
    }
    wait_for_lines("refused a connection from", "", 1); /* the root has started on them */
    usleep(100000);
    spawn(quick_rank_main, &id, 3, 0, 3, pids);
    int bad = reap(pids, 3);
    for (int i = 0; i < SILENT + GARBAGE; i++)
        close(fds[i]);
    capture_end(bad != 0);
    assert_int_equal(bad, 0);
}

/* Expects a timeout within the 2 s deadline, with some slack for scheduling. */
static int lonely_rank_main(const hcomm_unique_id_t *id, int nranks, int rank)
{
    hc_bootstrap_t *bs;
    double          t0 = hc_clock_now();
    hcomm_status_t  st = hc_bootstrap_init(id, nranks, rank, 2.0, &bs);
    double          dt = hc_clock_now() - t0;
    if (st == HCOMM_SUCCESS)
        hc_bootstrap_destroy(bs);
    if (st != HCOMM_ERR_TIMEOUT)
        return 1;
    return dt < 3.5 ? 0 : 2;
}

/* Rank 3 of 4 never comes: the root gives up first (timeout 2 s) and tells the
 * others, or, with a patient root, the ranks' own 2 s deadline fires. */
static void run_missing_rank(const char *root_timeout)
{
    hcomm_unique_id_t id;
    pid_t             pids[MAX_RANKS];
    set_timeout_env(root_timeout);
    hcomm_status_t st = hc_bootstrap_root_start(NULL, test_cookie, &id);
    set_timeout_env("30");
    assert_int_equal(st, HCOMM_SUCCESS);
    capture_begin();
    spawn(lonely_rank_main, &id, 4, 0, 3, pids);
    int bad    = reap(pids, 3);
    int logged = capture_count("timed out", "");
    capture_end(bad != 0 || logged == 0);
    assert_int_equal(bad, 0);
    assert_true(logged > 0);
}

static void test_missing_rank(void **state)
{
    (void)state;
    run_missing_rank("2");
    run_missing_rank("30");
}

/* A rank that says hello to the root, proves the secret and dies before the
 * ring: the root answers everyone, and the ring must fail round it. */
static int dying_rank_main(const hcomm_unique_id_t *id, int nranks, int rank)
{
    hc_uid_t             u;
    hc_gate_client_t     cl;
    hc_bootstrap_hello_t h;
    int                  rfd, lfd;
    struct sockaddr_in   any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_storage bound;
    socklen_t               blen;
    double                  deadline = hc_clock_now() + 10;
    memcpy(&u, id->internal, sizeof(u));
    if (hc_sock_connect((struct sockaddr *)u.root_addr, (socklen_t)u.root_addrlen, 0, deadline,
                        hc_bootstrap_peer(-1), &rfd) != HCOMM_SUCCESS ||
        hc_sock_listen((struct sockaddr *)&any, sizeof(any), 0, HC_SUBSYS(BOOT), &lfd, &bound,
                       &blen) != HCOMM_SUCCESS)
        return 1;
    memset(&h, 0, sizeof(h));
    h.magic  = htonl(HC_BOOTSTRAP_HELLO_MAGIC);
    h.rank   = (int32_t)htonl((uint32_t)rank);
    h.nranks = (int32_t)htonl((uint32_t)nranks);
    if (hc_bootstrap_addr_to_wire((struct sockaddr *)&bound, &h.addr) != HCOMM_SUCCESS ||
        hc_gate_client_run(&cl, rfd, test_cookie, &h, sizeof(h), deadline, hc_bootstrap_peer(-1)) !=
            HCOMM_SUCCESS)
        return 2;
    return 0; /* exits: its listener and the root's connection close */
}

/* Expects a failure well before its 30 s deadline: in init, or in the first
 * allgather where both its neighbours were up (init links only them). */
static int abandoned_rank_main(const hcomm_unique_id_t *id, int nranks, int rank)
{
    hc_bootstrap_t *bs;
    uint8_t         slots[MAX_RANKS] = {0};
    double          t0               = hc_clock_now();
    hcomm_status_t  st               = hc_bootstrap_init(id, nranks, rank, 30.0, &bs);
    if (st == HCOMM_SUCCESS) {
        st = hc_bootstrap_allgather(bs, slots, 1);
        hc_bootstrap_destroy(bs);
    }
    double dt = hc_clock_now() - t0;
    if (st != HCOMM_ERR_REMOTE) {
        fprintf(stderr, "  rank %d: %s after %.1f s\n", rank, hcomm_status_str(st), dt);
        return 1;
    }
    return dt < 5.0 ? 0 : 2;
}

/* Rank 2 of 5 dies after the root admitted it: every other rank fails within
 * seconds, not at its deadline (ranks 0, 1 and 3 waited 30 s: a refused
 * connect to a dead rank's listener was retried, and its neighbours' links
 * were not watched). */
static void test_rank_dies_in_init(void **state)
{
    hcomm_unique_id_t id;
    pid_t             pids[MAX_RANKS];
    (void)state;
    assert_int_equal(hc_bootstrap_root_start(NULL, test_cookie, &id), HCOMM_SUCCESS);
    capture_begin();
    spawn(abandoned_rank_main, &id, 5, 0, 2, pids);
    spawn(dying_rank_main, &id, 5, 2, 1, pids + 2);
    spawn(abandoned_rank_main, &id, 5, 3, 2, pids + 3);
    int bad = reap(pids, 5);
    capture_end(bad != 0);
    assert_int_equal(bad, 0);
}

/* The root's process dies after ranks 1 and 2 of 3 said hello: they fail
 * at once (they retried the refused root until their deadline). */
static void test_root_dies_in_init(void **state)
{
    hcomm_unique_id_t id;
    pid_t             root, pids[MAX_RANKS];
    int               pp[2];
    (void)state;
    assert_int_equal(pipe(pp), 0);
    root = fork();
    assert_true(root >= 0);
    if (root == 0) {
        alarm(CHILD_ALARM);
        if (hc_bootstrap_root_start(NULL, test_cookie, &id) != HCOMM_SUCCESS ||
            write(pp[1], &id, sizeof(id)) != (ssize_t)sizeof(id))
            _exit(1);
        pause();
        _exit(0);
    }
    assert_int_equal(read(pp[0], &id, sizeof(id)), (ssize_t)sizeof(id));
    close(pp[0]);
    close(pp[1]);
    capture_begin();
    spawn(abandoned_rank_main, &id, 3, 1, 2, pids);
    usleep(500000);
    kill(root, SIGKILL);
    waitpid(root, NULL, 0);
    int bad = reap(pids, 2);
    capture_end(bad != 0);
    assert_int_equal(bad, 0);
}

static int free_port(void)
{
    struct sockaddr_in sa  = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t          len = sizeof(sa);
    int                fd  = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* Ranks start before the root listens (HCOMM_ROOT style) and retry. */
static void test_root_at_address(void **state)
{
    hcomm_unique_id_t id, id_root, id_again;
    pid_t             pids[MAX_RANKS];
    char              addr[32];
    (void)state;
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", free_port());
    assert_int_equal(hc_bootstrap_id_from_addr(addr, test_cookie, &id), HCOMM_SUCCESS);
    spawn(rank_main, &id, 3, 0, 3, pids);
    usleep(300000);
    hcomm_status_t st = hc_bootstrap_root_start(addr, test_cookie, &id_root);
    capture_begin();
    hcomm_status_t again = hc_bootstrap_root_start(addr, test_cookie, &id_again);
    int            inuse = capture_count("listener on", "in use");
    capture_end(again == HCOMM_SUCCESS || inuse != 1);
    int bad = reap(pids, 3);
    assert_int_equal(st, HCOMM_SUCCESS);
    hc_uid_t agreed, made; /* the same root; only the root's own id knows it is up */
    memcpy(&agreed, id.internal, sizeof(agreed));
    memcpy(&made, id_root.internal, sizeof(made));
    assert_int_equal(agreed.flags, 0);
    assert_int_equal(made.flags, HC_UID_ROOT_UP);
    made.flags = 0;
    assert_memory_equal(&agreed, &made, sizeof(hc_uid_t));
    assert_int_equal(again, HCOMM_ERR_SYSTEM);
    assert_int_equal(inuse, 1);
    assert_int_equal(bad, 0);
}

/* A unique id serves one init: its root ends after it. A second init with it
 * fails at once, saying so (it retried the refused root until its 20 s
 * deadline: "connect to the root ...: timed out"); an id made from an address
 * agreed beforehand still waits for its root. */
static void test_id_used_twice(void **state)
{
    hcomm_unique_id_t id;
    pid_t             pids[MAX_RANKS];
    hc_bootstrap_t   *bs = NULL;
    (void)state;
    assert_int_equal(hc_bootstrap_root_start(NULL, test_cookie, &id), HCOMM_SUCCESS);
    spawn(rank_main, &id, 2, 0, 2, pids);
    assert_int_equal(reap(pids, 2), 0);
    usleep(100000); /* the root closes its listener once it answered */
    capture_begin();
    double         t0   = hc_clock_now();
    hcomm_status_t st   = hc_bootstrap_init(&id, 2, 0, 20.0, &bs);
    double         dt   = hc_clock_now() - t0;
    int            said = capture_count("has ended", "serves one");
    capture_end(st != HCOMM_ERR_REMOTE || said != 1);
    assert_int_equal(st, HCOMM_ERR_REMOTE);
    assert_int_equal(said, 1);
    assert_true(dt < 2.0);
}

/* More ranks than the bootstrap takes: refused at once, with a line that says
 * so (the root refused the first hello after 10 s: "says 5000000 ranks,
 * expected 0"). */
static void test_too_many_ranks(void **state)
{
    hcomm_unique_id_t id;
    hc_bootstrap_t   *bs = NULL;
    (void)state;
    assert_int_equal(hc_bootstrap_root_start(NULL, test_cookie, &id), HCOMM_SUCCESS);
    capture_begin();
    double         t0   = hc_clock_now();
    hcomm_status_t st   = hc_bootstrap_init(&id, HC_BOOTSTRAP_MAX_RANKS + 1, 0, 20.0, &bs);
    double         dt   = hc_clock_now() - t0;
    int            said = capture_count("ranks: at most", "");
    capture_end(st != HCOMM_ERR_INVALID_ARG || said != 1);
    hc_bootstrap_root_release(&id);
    assert_int_equal(st, HCOMM_ERR_INVALID_ARG);
    assert_int_equal(said, 1);
    assert_true(dt < 1.0);
}

/* hc_bootstrap_id_check: ids from hcomm pass; a root address whose length is
 * not its family's is refused (tests/fuzz/corpus/uid/addrlen-zero). */
/* One hello to the roll over a socketpair (the roll keeps or closes its end). */
static void roll_hello(hc_bootstrap_roll_t *roll, int rank, int nranks)
{
    int                  sv[2];
    hc_bootstrap_hello_t h;
    memset(&h, 0, sizeof(h));
    h.magic       = htonl(HC_BOOTSTRAP_HELLO_MAGIC);
    h.rank        = (int32_t)htonl((uint32_t)rank);
    h.nranks      = (int32_t)htonl((uint32_t)nranks);
    h.addr.family = 4;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    hc_bootstrap_roll_admit(roll, sv[0], &h, "test");
    close(sv[1]);
}

/* A doomed root counts the ranks it has answered (hc_bootstrap_root_settle
 * waits for all): from a first hello that is refused on, and never a hello
 * of another size. */
static void test_roll_seen(void **state)
{
    (void)state;
    hc_bootstrap_roll_t roll;
    memset(&roll, 0, sizeof(roll));
    roll_hello(&roll, 5, 3); /* out of range: dooms the root, sizes the roll */
    assert_int_equal(roll.doomed, HCOMM_ERR_INVALID_RANK);
    assert_int_equal(roll.nranks, 3);
    assert_int_equal(roll.nseen, 0);
    roll_hello(&roll, 2, 4); /* another job's size: not rank 2 of this one */
    assert_int_equal(roll.nseen, 0);
    int want[]  = {1, 2, 2, 3};
    int ranks[] = {0, 1, 1, 2};
    for (int i = 0; i < 4; i++) {
        roll_hello(&roll, ranks[i], 3);
        assert_int_equal(roll.nseen, want[i]);
    }
    assert_int_equal(roll.njoined, 0);
    hc_bootstrap_roll_free(&roll);
}

static void test_id_check(void **state)
{
    hcomm_unique_id_t id, bad;
    hc_uid_t          uid;
    (void)state;
    assert_int_equal(hc_bootstrap_id_from_addr("127.0.0.1:1234", test_cookie, &id), HCOMM_SUCCESS);
    assert_int_equal(hc_bootstrap_id_check(&id, &uid), HCOMM_SUCCESS);
    assert_int_equal(uid.root_addrlen, sizeof(struct sockaddr_in));
    assert_int_equal(hc_bootstrap_id_from_addr("[::1]:1234", test_cookie, &id), HCOMM_SUCCESS);
    assert_int_equal(hc_bootstrap_id_check(&id, NULL), HCOMM_SUCCESS);
    static const uint32_t lens[]  = {0, 2, 16, 27, 29};
    int                   refused = 0;
    capture_begin();
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        memcpy(&uid, id.internal, sizeof(uid));
        uid.root_addrlen = lens[i];
        bad              = id;
        memcpy(bad.internal, &uid, sizeof(uid));
        refused += hc_bootstrap_id_check(&bad, NULL) == HCOMM_ERR_INVALID_ARG;
    }
    memset(&bad, 0, sizeof(bad));
    refused += hc_bootstrap_id_check(&bad, NULL) == HCOMM_ERR_INVALID_ARG;
    capture_end(0);
    assert_int_equal(refused, (int)(sizeof(lens) / sizeof(lens[0])) + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addresses),
        cmocka_unit_test(test_interface_choice),
        cmocka_unit_test(test_ring_1),
        cmocka_unit_test(test_ring_2),
        cmocka_unit_test(test_ring_3),
        cmocka_unit_test(test_ring_5),
        cmocka_unit_test(test_ring_8),
        cmocka_unit_test(test_wrong_cookie),
        cmocka_unit_test(test_missing_rank),
        cmocka_unit_test(test_rank_dies_in_init),
        cmocka_unit_test(test_root_dies_in_init),
        cmocka_unit_test(test_root_at_address),
        cmocka_unit_test(test_refusal_says_nothing),
        cmocka_unit_test(test_squatter_learns_nothing),
        cmocka_unit_test(test_strangers_do_not_stall),
        cmocka_unit_test(test_roll_seen),
        cmocka_unit_test(test_id_check),
        cmocka_unit_test(test_too_many_ranks),
        cmocka_unit_test(test_id_used_twice),
    };
    return cmocka_run_group_tests_name("bootstrap", tests, group_setup, NULL);
}
