/* auth.c - HMAC-SHA256 proofs over nonces, from libsodium: no hash is written
 * here. libsodium's HMAC keeps its state on the stack and takes no lock and no
 * allocation, so a process that forks while another thread authenticates (a
 * launcher, hcomm-perf --ranks, a data loader) hands its children nothing held. */
#include "base/auth.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>

#include "base/log.h"

static pthread_once_t auth_once = PTHREAD_ONCE_INIT;
static int            auth_ready;

static void auth_init(void)
{
    auth_ready = sodium_init() >= 0;
}

/* At load, in the loading thread: sodium_init takes a global mutex, and a
 * first call made by the root thread while the application forks its ranks
 * (hcomm-perf --ranks does) would hand a child the mutex held for good. */
__attribute__((constructor)) static void auth_load(void)
{
    (void)pthread_once(&auth_once, auth_init);
}

/* A piece, prefixed with its length, so that no two lists of pieces collide. */
static void auth_put(crypto_auth_hmacsha256_state *st, const void *p, size_t len)
{
    uint8_t n[8];
    for (int i = 0; i < 8; i++)
        n[i] = (uint8_t)((uint64_t)len >> (8 * i));
    crypto_auth_hmacsha256_update(st, n, sizeof(n));
    if (len > 0)
        crypto_auth_hmacsha256_update(st, p, len);
}

int hc_auth_mac(const uint8_t key[HC_AUTH_KEY_BYTES], const char *label,
                const hc_auth_part_t *parts, int nparts, uint8_t out[HC_AUTH_MAC_BYTES])
{
    crypto_auth_hmacsha256_state st;
    if (pthread_once(&auth_once, auth_init) != 0 || !auth_ready) {
        hc_error(INIT, "libsodium failed to initialise: no MAC for %s", label);
        return -1;
    }
    crypto_auth_hmacsha256_init(&st, key, HC_AUTH_KEY_BYTES);
    auth_put(&st, label, strlen(label));
    for (int i = 0; i < nparts; i++)
        auth_put(&st, parts[i].p, parts[i].len);
    crypto_auth_hmacsha256_final(&st, out);
    sodium_memzero(&st, sizeof(st));
    return 0;
}

int hc_auth_check(const uint8_t key[HC_AUTH_KEY_BYTES], const char *label,
                  const hc_auth_part_t *parts, int nparts, const uint8_t mac[HC_AUTH_MAC_BYTES])
{
    uint8_t want[HC_AUTH_MAC_BYTES];
    if (hc_auth_mac(key, label, parts, nparts, want) != 0)
        return 0;
    return hc_auth_equal(want, mac, sizeof(want));
}

int hc_auth_tag(const uint8_t key[HC_AUTH_KEY_BYTES], const char *label,
                const hc_auth_part_t *parts, int nparts, uint8_t tag[HC_AUTH_TAG_BYTES])
{
    uint8_t mac[HC_AUTH_MAC_BYTES];
    if (hc_auth_mac(key, label, parts, nparts, mac) != 0)
        return -1;
    memcpy(tag, mac, HC_AUTH_TAG_BYTES);
    return 0;
}

int hc_auth_tag_check(const uint8_t key[HC_AUTH_KEY_BYTES], const char *label,
                      const hc_auth_part_t *parts, int nparts, const uint8_t tag[HC_AUTH_TAG_BYTES])
{
    uint8_t want[HC_AUTH_TAG_BYTES];
    return hc_auth_tag(key, label, parts, nparts, want) == 0 &&
           hc_auth_equal(want, tag, sizeof(want));
}

int hc_auth_equal(const void *a, const void *b, size_t len)
{
    return sodium_memcmp(a, b, len) == 0;
}

int hc_auth_random(void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            hc_error(INIT, "getrandom: %s", strerror(errno));
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int hc_auth_public_name(const uint8_t key[HC_AUTH_KEY_BYTES], const char *label, char *buf,
                        size_t size)
{
    uint8_t mac[HC_AUTH_MAC_BYTES];
    if (size < 17 || hc_auth_mac(key, label, NULL, 0, mac) != 0)
        return -1;
    for (int i = 0; i < 8; i++)
        snprintf(buf + 2 * i, 3, "%02x", mac[i]);
    return 0;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Digit by digit: sscanf's "%2x" (api_comm.c's parser before this one) took
 * " f", "+f" and "-1" for bytes, so a cookie of spaces and signs was a key
 * (tests/fuzz/fuzz_params.c). */
int hc_auth_key_parse(const char *hex, uint8_t key[HC_AUTH_KEY_BYTES])
{
    uint8_t k[HC_AUTH_KEY_BYTES];
    if (hex == NULL || strlen(hex) != 2 * HC_AUTH_KEY_BYTES)
        return -1;
    for (int i = 0; i < HC_AUTH_KEY_BYTES; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        k[i] = (uint8_t)(hi << 4 | lo);
    }
    memcpy(key, k, sizeof(k));
    return 0;
}

int hc_auth_shm_sweep(const uint8_t key[HC_AUTH_KEY_BYTES],
                      void (*seen)(void *arg, const char *name), void *arg)
{
    char           pub[17], prefix[32], name[300];
    int            n = 0;
    DIR           *d;
    struct dirent *e;

    if (hc_auth_public_name(key, HC_AUTH_SHM_NAMES, pub, sizeof(pub)) != 0 ||
        (d = opendir("/dev/shm")) == NULL)
        return 0;
    snprintf(prefix, sizeof(prefix), "hcomm-%s-", pub);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        if (seen != NULL)
            seen(arg, e->d_name);
        snprintf(name, sizeof(name), "/%s", e->d_name);
        n += shm_unlink(name) == 0;
    }
    closedir(d);
    return n;
}
