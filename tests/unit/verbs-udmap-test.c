/* libhotmig-verbs: UD peers that moved. The UDMAP message (guest-agent/verbs/hv-proto.c) and
 * the per-peer-GID translation it feeds (hv-udtab.c): wr.ud.remote_qpn out, wc.src_qp back. */
#include "hv.h"
#include "hv-proto.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define GID_A "00000000000000000000ffffc6336402"

static int parse(const char *line, HvMsg *m)
{
    return hv_proto_parse(line, strlen(line), m);
}

static void test_udmap_round_trip(void **state)
{
    HvMsg *m = calloc(1, sizeof(*m)), *back = calloc(1, sizeof(*back));
    char buf[256];
    int n;

    (void)state;
    m->type = HV_MSG_UDMAP;
    m->target = 19;
    m->gid[10] = m->gid[11] = 0xff;
    m->gid[12] = 0xc6;
    m->gid[13] = 0x33;
    m->gid[14] = 0x64;
    m->gid[15] = 2;
    m->lid = 0x201; /* IB: the mover's LID now (0 on RoCE) */
    m->nkeys = 2;
    m->keys[0] = (HvKeyPair){25, 19};
    m->keys[1] = (HvKeyPair){0xffffff, 0x11};
    n = hv_proto_format(m, buf, sizeof(buf));
    assert_true(n > 0);
    assert_string_equal(buf, "UDMAP 19 " GID_A " 513 2 19:13 ffffff:11\n");
    assert_int_equal(hv_proto_parse(buf, (size_t)n - 1, back), 0);
    assert_int_equal(back->type, HV_MSG_UDMAP);
    assert_int_equal(back->target, 19);
    assert_memory_equal(back->gid, m->gid, 16);
    assert_int_equal(back->lid, 0x201);
    assert_int_equal(back->nkeys, 2);
    assert_int_equal(back->keys[1].v, 0xffffff);
    assert_int_equal(back->keys[1].p, 0x11);
    assert_int_equal(parse("UDMAPPED", back), 0);
    assert_int_equal(back->type, HV_MSG_UDMAPPED);
    free(m);
    free(back);
}

/* UDHOLD / UDHELD: a moving process asks its UD peers to hold their sends (docs/protocol.md) */
static void test_udhold_round_trip(void **state)
{
    HvMsg *m = calloc(1, sizeof(*m)), *back = calloc(1, sizeof(*back));
    char buf[256];
    int n;

    (void)state;
    m->type = HV_MSG_UDHOLD;
    m->target = 0x11;
    assert_int_equal(parse("UDHOLD 17 " GID_A, back), 0);
    memcpy(m->gid, back->gid, 16);
    n = hv_proto_format(m, buf, sizeof(buf));
    assert_true(n > 0);
    assert_string_equal(buf, "UDHOLD 17 " GID_A "\n");
    assert_int_equal(back->type, HV_MSG_UDHOLD);
    assert_int_equal(back->target, 17);

    memset(m, 0, sizeof(*m));
    m->type = HV_MSG_UDHELD;
    m->nkeys = 2;
    m->keys[0] = (HvKeyPair){0x11, 5};
    m->keys[1] = (HvKeyPair){0xffffff, 0xffffffff};
    n = hv_proto_format(m, buf, sizeof(buf));
    assert_true(n > 0);
    assert_string_equal(buf, "UDHELD 2 11:5 ffffff:ffffffff\n");
    assert_int_equal(hv_proto_parse(buf, (size_t)n - 1, back), 0);
    assert_int_equal(back->type, HV_MSG_UDHELD);
    assert_int_equal(back->nkeys, 2);
    assert_int_equal(back->keys[1].p, 0xffffffff);
    assert_int_equal(parse("UDHELD 0", back), 0); /* sent nothing to the mover: held anyway */
    assert_int_equal(back->nkeys, 0);

    assert_int_equal(parse("UDHOLD 17", back), -EINVAL);              /* no GID */
    assert_int_equal(parse("UDHOLD 16777216 " GID_A, back), -EINVAL); /* > 24 bits */
    assert_int_equal(parse("UDHOLD 17 " GID_A " 1", back), -EINVAL);  /* extra */
    assert_int_equal(parse("UDHELD 1 1000000:1", back), -EINVAL);     /* QPN > 24 bits */
    assert_int_equal(parse("UDHELD 1 1:100000000", back), -EINVAL);   /* count > 32 bits */
    assert_int_equal(parse("UDHELD 2 1:1", back), -EINVAL);           /* fewer than said */
    assert_int_equal(parse("UDHELD 65 1:1", back), -EINVAL);          /* > UDQPS_MAX */
    assert_int_equal(parse("UDHELD", back), -EINVAL);
    m->keys[0].v = 0x1000000; /* the formatter refuses what the parser would */
    assert_int_equal(hv_proto_format(m, buf, sizeof(buf)), -EINVAL);
    m->keys[0].v = 1;
    m->nkeys = HV_PROTO_UDQPS_MAX + 1;
    assert_int_equal(hv_proto_format(m, buf, sizeof(buf)), -EINVAL);
    free(m);
    free(back);
}

static void test_udmap_refuses_bad_lines(void **state)
{
    HvMsg *m = calloc(1, sizeof(*m));
    char *big = malloc(2048);
    size_t off;

    (void)state;
    assert_int_equal(parse("UDMAP 19 " GID_A " 0", m), -EINVAL);         /* no pairs */
    assert_int_equal(parse("UDMAP 19 " GID_A " 1 1000000:1", m), -EINVAL); /* > 24 bits */
    assert_int_equal(parse("UDMAP 19 " GID_A " 1 1:1000000", m), -EINVAL);
    assert_int_equal(parse("UDMAP 19 " GID_A " 2 1:2", m), -EINVAL);     /* fewer than said */
    assert_int_equal(parse("UDMAP 19 " GID_A " 1 1:2 3:4", m), -EINVAL); /* extra */
    assert_int_equal(parse("UDMAP 19 " GID_A " 1 1:2 ", m), -EINVAL);    /* trailing space */
    assert_int_equal(parse("UDMAP 16777216 " GID_A " 1 1:2", m), -EINVAL);
    assert_int_equal(parse("UDMAP 19 00ff 1 1:2", m), -EINVAL);          /* short GID */
    assert_int_equal(parse("UDMAP 19 " GID_A " 1 1:G", m), -EINVAL);
    assert_int_equal(parse("UDMAPPED 1", m), -EINVAL);
    /* more pairs than HV_PROTO_UDQPS_MAX */
    off = (size_t)snprintf(big, 2048, "UDMAP 19 " GID_A " %d", HV_PROTO_UDQPS_MAX + 1);
    for (int i = 0; i <= HV_PROTO_UDQPS_MAX; i++)
        off += (size_t)snprintf(big + off, 2048 - off, " %x:%x", i + 1, i + 2);
    assert_int_equal(hv_proto_parse(big, off, m), -EINVAL);
    /* and the formatter refuses what the parser would */
    memset(m, 0, sizeof(*m));
    m->type = HV_MSG_UDMAP;
    m->target = 19;
    m->nkeys = 0;
    assert_int_equal(hv_proto_format(m, big, 2048), -EINVAL);
    m->nkeys = 1;
    m->keys[0] = (HvKeyPair){0x1000000, 1};
    assert_int_equal(hv_proto_format(m, big, 2048), -EINVAL);
    free(big);
    free(m);
}

static void test_ud_table_translates_per_gid(void **state)
{
    HvUdTable *t = calloc(1, sizeof(*t));
    uint8_t a[16] = {[15] = 1}, b[16] = {[15] = 2};
    uint32_t v[] = {25, 26}, p[] = {19, 20}, q = 0;

    (void)state;
    assert_false(hv_ud_out(t, a, 25, &q)); /* nobody moved yet */
    assert_int_equal(hv_ud_learn(t, a, v, p, 2), 0);
    assert_true(hv_ud_out(t, a, 25, &q));
    assert_int_equal(q, 19);
    assert_false(hv_ud_out(t, b, 25, &q)); /* the same number at another GID is another QP */
    assert_true(hv_ud_in(t, 20, &q));
    assert_int_equal(q, 26);
    /* a second move replaces the first translation */
    p[0] = 30;
    assert_int_equal(hv_ud_learn(t, a, v, p, 1), 0);
    assert_true(hv_ud_out(t, a, 25, &q));
    assert_int_equal(q, 30);
    assert_false(hv_ud_out(t, a, 26, &q));
    assert_false(hv_ud_in(t, 19, &q));
    /* two peers with the same physical number: a receive's sender is unknown */
    v[0] = 40;
    assert_int_equal(hv_ud_learn(t, b, v, p, 1), 0);
    assert_false(hv_ud_in(t, 30, &q));
    hv_ud_clear(t);
    hv_ud_set_free(&t->peer_ix);
    hv_ud_set_free(&t->targets);
    free(t);
}

static void gid_of(uint8_t g[16], uint32_t i)
{
    memset(g, 0, 16);
    g[0] = (uint8_t)(i >> 16);
    g[1] = (uint8_t)(i >> 8);
    g[2] = (uint8_t)i;
}

/* Sized for a 1,000-guest job (issue 29 item 5): more than the 64 moved peers the table used to
 * keep (the 65th replaced the first, whose posts then went to its old QPNs); past
 * HV_UD_PEERS_MAX (peer-controlled input: bounded) the oldest is replaced and counted. */
static void test_ud_table_bounds(void **state)
{
    HvUdTable *t = calloc(1, sizeof(*t));
    uint8_t g[16];
    uint32_t v = 1, p = 2;

    (void)state;
    for (uint32_t i = 0; i < HV_UD_PEERS_MAX; i++) {
        gid_of(g, i);
        p = 1000 + i;
        assert_int_equal(hv_ud_learn(t, g, &v, &p, 1), 0);
    }
    assert_true(HV_UD_PEERS_MAX >= 4096);
    assert_int_equal(t->evicted, 0);
    for (uint32_t i = 0; i < HV_UD_PEERS_MAX; i += 97) { /* each still translated */
        gid_of(g, i);
        assert_int_equal(hv_ud_out(t, g, 1, &p), 1);
        assert_int_equal(p, 1000 + i);
    }
    /* full: a new GID replaces the one learned longest ago (it used to be refused for good, so
     * 64 forged GIDs kept every real peer out), and the table says so */
    gid_of(g, 0xffffff);
    p = 3;
    assert_int_equal(hv_ud_learn(t, g, &v, &p, 1), 0);
    assert_int_equal(t->npeers, HV_UD_PEERS_MAX);
    assert_int_equal(t->evicted, 1);
    assert_int_equal(hv_ud_out(t, g, 1, &p), 1);
    assert_int_equal(p, 3);
    gid_of(g, 0); /* the first one went */
    assert_int_equal(hv_ud_out(t, g, 1, &p), 0);
    gid_of(g, 1); /* the second stays */
    assert_int_equal(hv_ud_out(t, g, 1, &p), 1);
    assert_int_equal(p, 1001);
    hv_ud_clear(t);
    assert_int_equal(t->npeers, 0);
    gid_of(g, 1);
    assert_int_equal(hv_ud_out(t, g, 1, &p), 0);
    hv_ud_set_free(&t->peer_ix);
    free(t);
}

/* The (GID, QPN) targets a process sent to: every one is kept up to HV_UD_TARGETS_MAX (the table
 * used to keep 64 and drop the rest without a word: those peers were neither held nor told at a
 * move); past it a target is refused with -ENOSPC, for the layer to report. */
static void test_ud_targets_grow(void **state)
{
    HvUdTable *t = calloc(1, sizeof(*t));
    uint8_t g[16];

    (void)state;
    gid_of(g, 7);
    assert_int_equal(hv_ud_target_note(t, g, 7, 1, 1), 1);
    assert_int_equal(hv_ud_target_note(t, g, 7, 1, 1), 0); /* once */
    assert_true(HV_UD_TARGETS_MAX >= 64000);
    for (uint32_t i = 1; i < HV_UD_TARGETS_MAX; i++) {
        gid_of(g, i / 64); /* 64 ranks' QPs behind each GID */
        assert_int_equal(hv_ud_target_note(t, g, 100 + i, 1, (uint8_t)i), 1);
    }
    assert_int_equal(t->targets.n, HV_UD_TARGETS_MAX);
    gid_of(g, 5);
    assert_int_equal(hv_ud_target_note(t, g, 100 + 5 * 64 + 3, 1, 9), 0); /* known */
    assert_int_equal(hv_ud_target_note(t, g, 1, 1, 1), -ENOSPC);
    assert_int_equal(t->targets.n, HV_UD_TARGETS_MAX);
    {
        HvUdEntry *e = hv_ud_set_find(&t->targets, g, 100 + 5 * 64 + 3);

        assert_non_null(e);
        assert_int_equal(e->sgid_index, (uint8_t)(5 * 64 + 3));
    }
    hv_ud_clear(t);
    assert_int_equal(t->targets.n, 0);
    assert_int_equal(hv_ud_target_note(t, g, 1, 1, 1), 1);
    hv_ud_set_free(&t->targets);
    free(t);
}

/* A set with its default max (a QP's per-GID send counts): 4096 GIDs, not 16; the next one is
 * refused and the set says it is full. */
static void test_ud_set_counts(void **state)
{
    HvUdSet s = {0};
    uint8_t g[16];
    int added;

    (void)state;
    for (uint32_t i = 0; i < HV_UD_SENT_MAX; i++) {
        HvUdEntry *e;

        gid_of(g, i);
        e = hv_ud_set_add(&s, g, 0, &added);
        assert_non_null(e);
        assert_int_equal(added, 1);
        e->n = i;
    }
    assert_true(HV_UD_SENT_MAX >= 1000);
    for (uint32_t i = 0; i < HV_UD_SENT_MAX; i++) {
        gid_of(g, i);
        assert_int_equal(hv_ud_set_add(&s, g, 0, &added)->n, i);
        assert_int_equal(added, 0);
    }
    assert_false(s.full);
    gid_of(g, HV_UD_SENT_MAX);
    assert_null(hv_ud_set_add(&s, g, 0, &added));
    assert_true(s.full);
    assert_null(hv_ud_set_find(&s, g, 0));
    hv_ud_set_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_udmap_round_trip),
        cmocka_unit_test(test_udmap_refuses_bad_lines),
        cmocka_unit_test(test_udhold_round_trip),
        cmocka_unit_test(test_ud_table_translates_per_gid),
        cmocka_unit_test(test_ud_table_bounds),
        cmocka_unit_test(test_ud_targets_grow),
        cmocka_unit_test(test_ud_set_counts),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
