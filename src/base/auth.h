/* auth.h - proving knowledge of the job secret without sending it: HMAC-SHA256
 * (libsodium) keyed by the communicator's 16-byte cookie, over
 * nonces the verifier chose. Every connection hcomm accepts checks one of these;
 * the cookie itself never leaves the process. docs/security.md has the model. */
#ifndef HC_BASE_AUTH_H
#define HC_BASE_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define HC_AUTH_KEY_BYTES 16
#define HC_AUTH_NONCE_BYTES 16
#define HC_AUTH_MAC_BYTES 32

/* One piece of a message to authenticate (the MAC covers the pieces in order,
 * each prefixed with its length, so no two lists of pieces collide). */
typedef struct hc_auth_part {
    const void *p;
    size_t      len;
} hc_auth_part_t;

/* HMAC-SHA256 under key over a label (which protocol and role: no MAC made for
 * one use verifies in another) and the parts. 0, or -1 (logged) if libsodium
 * failed. */
int hc_auth_mac(const uint8_t key[HC_AUTH_KEY_BYTES], const char *label,
                const hc_auth_part_t *parts, int nparts, uint8_t out[HC_AUTH_MAC_BYTES]);

/* Non-zero when the MAC over label and parts under key equals mac; compares in
 * constant time. */
int hc_auth_check(const uint8_t key[HC_AUTH_KEY_BYTES], const char *label,
                  const hc_auth_part_t *parts, int nparts, const uint8_t mac[HC_AUTH_MAC_BYTES]);

/* A 16-byte tag, the MAC's first half, for messages with a 16-byte field where
 * a fabric's control messages once carried the cookie itself. */
#define HC_AUTH_TAG_BYTES 16
int hc_auth_tag(const uint8_t key[HC_AUTH_KEY_BYTES], const char *label,
                const hc_auth_part_t *parts, int nparts, uint8_t tag[HC_AUTH_TAG_BYTES]);
int hc_auth_tag_check(const uint8_t key[HC_AUTH_KEY_BYTES], const char *label,
                      const hc_auth_part_t *parts, int nparts,
                      const uint8_t tag[HC_AUTH_TAG_BYTES]);

/* Non-zero when the len bytes at a and b are equal; time independent of where
 * they differ. */
int hc_auth_equal(const void *a, const void *b, size_t len);

/* 0, or -1 (logged): len random bytes from the kernel. */
int hc_auth_random(void *buf, size_t len);

/* The key from exactly 2 * HC_AUTH_KEY_BYTES hex digits (HCOMM_COOKIE): 0, or
 * -1 for anything else (key untouched). */
int hc_auth_key_parse(const char *hex, uint8_t key[HC_AUTH_KEY_BYTES]);

/* The label of the public name in the names of a communicator's objects in
 * /dev/shm ("/hcomm-<name>-..."): a launcher that knows the key finds them. */
#define HC_AUTH_SHM_NAMES "hcomm shm names"

/* A name for shared objects that the job's ranks agree on without talking,
 * and that tells an onlooker nothing of the key: 16 hex digits of a MAC over
 * the label. buf holds at least 17 bytes. */
int hc_auth_public_name(const uint8_t key[HC_AUTH_KEY_BYTES], const char *label, char *buf,
                        size_t size);

/* Removes what a job keyed by key left in /dev/shm ("/hcomm-<public name>-*"),
 * calling seen (if not NULL) with each name first; how many it removed. For
 * launchers, once every rank has exited. */
int hc_auth_shm_sweep(const uint8_t key[HC_AUTH_KEY_BYTES],
                      void (*seen)(void *arg, const char *name), void *arg);

#endif
