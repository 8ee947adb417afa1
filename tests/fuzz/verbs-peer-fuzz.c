/* Fuzzing of the verbs layer's peer protocol parser (guest-agent/verbs/hv-proto.c): what
 * another guest's layer (or anything on the control network) sends. Every input must either be
 * refused or parse into a message that formats and parses back to the same message. A UDMAP
 * then goes into the UD table (hv-udtab.c) as the layer's handler puts it, one table for the
 * whole run: peer-controlled, it stays within its bounds and translates what it was told. */
#include "hv.h"
#include "hv-proto.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int msg_equal(const HvMsg *a, const HvMsg *b)
{
    if (memcmp(a, b, offsetof(HvMsg, keys)) != 0)
        return 0;
    return memcmp(a->keys, b->keys, a->nkeys * sizeof(a->keys[0])) == 0;
}

static void ud_table_feed(const HvMsg *m)
{
    static HvUdTable *t;
    uint32_t v[HV_PROTO_UDQPS_MAX], p[HV_PROTO_UDQPS_MAX], q;

    if (!t && !(t = calloc(1, sizeof(*t))))
        abort();
    for (uint32_t i = 0; i < m->nkeys; i++) {
        v[i] = m->keys[i].v;
        p[i] = m->keys[i].p;
    }
    if (hv_ud_learn(t, m->gid, v, p, m->nkeys) < 0)
        return;
    if (t->npeers > HV_UD_PEERS_MAX || t->peer_ix.n != t->npeers)
        abort();
    /* the last pair for a virtual QPN wins */
    if (m->nkeys && (!hv_ud_out(t, m->gid, v[m->nkeys - 1], &q) || q != p[m->nkeys - 1]))
        abort();
    if (hv_ud_target_note(t, m->gid, m->target, 1, 0) == -ENOMEM ||
        t->targets.n > HV_UD_TARGETS_MAX)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    HvMsg *m = malloc(sizeof(*m)), *back = malloc(sizeof(*back));
    char *out = malloc(HV_PROTO_LINE_MAX + 2);
    int n;

    if (!m || !back || !out)
        abort();
    /* the wire is lines: the fuzzer's input is one line, with or without its newline */
    if (size && data[size - 1] == '\n')
        size--;
    if (hv_proto_parse((const char *)data, size, m) == 0) {
        n = hv_proto_format(m, out, HV_PROTO_LINE_MAX + 2);
        if (n <= 0 || out[n - 1] != '\n')
            abort();
        if (hv_proto_parse(out, (size_t)n - 1, back) != 0 || !msg_equal(m, back))
            abort();
        if (m->type == HV_MSG_UDMAP)
            ud_table_feed(m);
    }
    free(m);
    free(back);
    free(out);
    return 0;
}
