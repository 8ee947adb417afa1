/* Fuzzing of the verbs peer channel's authenticated frame (guest-agent/verbs/hv-auth.c): what
 * anything on the control network, or a process of the guest, may send a layer after its
 * CHALLENGE. The input is one line. It must be refused or parse into a frame that, sealed again
 * from its own fields, gives the same line; a frame verifies only when sealed with the key:
 * with the fuzzer's MAC it is refused unless the fuzzer found HMAC-SHA256 of the key, and the
 * same frame opened twice in one session is refused the second time. */
#include "hv-auth.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t key[] = "fuzz-key-0123456789abcdef";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *out = malloc(HV_AUTH_LINE_MAX + 2);
    HvAuthSession s = {0}, t;
    HvAuthFrame f, g;
    int n, r;

    if (!out)
        abort();
    if (size && data[size - 1] == '\n')
        size--;
    memset(s.nonce_s, 0x5a, sizeof(s.nonce_s));
    if (hv_auth_frame_parse((const char *)data, size, &f) == 0) {
        /* the same line again from its fields (the MAC as given: a fresh seal recomputes it) */
        t = s;
        memcpy(t.nonce_c, f.nonce, sizeof(t.nonce_c));
        n = hv_auth_seal(key, sizeof(key) - 1, &t, HV_AUTH_REQUEST, f.seq, f.gid, f.msg, f.msg_len,
                         out, HV_AUTH_LINE_MAX + 2);
        if (n <= 0 || out[n - 1] != '\n' || hv_auth_frame_parse(out, (size_t)n - 1, &g) != 0 ||
            g.seq != f.seq || g.msg_len != f.msg_len || memcmp(g.msg, f.msg, f.msg_len) ||
            memcmp(g.gid, f.gid, 16) || memcmp(g.nonce, f.nonce, 16))
            abort();
        /* the fuzzer's own MAC: verifies only if it is the real one */
        t = s;
        r = hv_auth_open(key, sizeof(key) - 1, &t, HV_AUTH_REQUEST, (const char *)data, size, &g);
        if (r == 0 && memcmp(g.mac, f.mac, sizeof(f.mac)))
            abort();
        if (r != 0 && r != -EACCES && r != -EPROTO)
            abort();
        /* the resealed line verifies once, then is a replay */
        t = s;
        r = hv_auth_open(key, sizeof(key) - 1, &t, HV_AUTH_REQUEST, out, (size_t)n - 1, &g);
        if (f.seq == 1 ? r != 0 : r != -EPROTO)
            abort();
        if (r == 0 &&
            hv_auth_open(key, sizeof(key) - 1, &t, HV_AUTH_REQUEST, out, (size_t)n - 1, &g) !=
                -EPROTO)
            abort();
    } else if (hv_auth_open(key, sizeof(key) - 1, &s, HV_AUTH_REQUEST, (const char *)data, size,
                            &f) != -EINVAL) {
        abort();
    }
    free(out);
    return 0;
}
