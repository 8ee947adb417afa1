/* libhotmig-verbs: both ends of a connection moving at once (docs/verbs-layer.md). The called
 * end's verdict on a RECONNECT (hv_reconnect_verdict, hv_drives in hv-verdict.c), and a model of
 * the two ends' resumes run through every interleaving of their steps: whatever the order,
 * exactly one RECONNECT takes effect at both ends (the same one), and no end is left waiting. */
#include "hv.h"
#include "hv-proto.h"

#include <errno.h>
#include <stdlib.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static const uint8_t GID_LO[16] = {
    [10] = 0xff, [11] = 0xff, [12] = 198, [13] = 51, [14] = 100, [15] = 1};
static const uint8_t GID_HI[16] = {
    [10] = 0xff, [11] = 0xff, [12] = 198, [13] = 51, [14] = 100, [15] = 2};

static void test_drives_is_antisymmetric(void **state)
{
    (void)state;
    assert_int_equal(hv_drives(GID_LO, 20, GID_HI, 17), 1);
    assert_int_equal(hv_drives(GID_HI, 17, GID_LO, 20), 0);
    /* same guest (two processes): the lower QPN drives */
    assert_int_equal(hv_drives(GID_LO, 17, GID_LO, 18), 1);
    assert_int_equal(hv_drives(GID_LO, 18, GID_LO, 17), 0);
    assert_int_equal(hv_drives(GID_LO, 17, GID_LO, 17), 0);
}

static void test_verdict_table(void **state)
{
    (void)state;
    /* one end moving, the other not: always applied */
    assert_int_equal(hv_reconnect_verdict(0, 1, 0, 0, 0, 0), HV_VERDICT_ACCEPT);
    assert_int_equal(hv_reconnect_verdict(0, 1, 0, 1, 0, 0), HV_VERDICT_ACCEPT);
    /* a second RECONNECT for one event changes nothing */
    assert_int_equal(hv_reconnect_verdict(1, 1, 0, 0, 0, 0), HV_VERDICT_RECONNECTED);
    assert_int_equal(hv_reconnect_verdict(1, 1, 1, 1, 0, 1), HV_VERDICT_RECONNECTED);
    /* the called end is away (no device yet): it reconnects when back */
    assert_int_equal(hv_reconnect_verdict(0, 0, 1, 0, 0, 0), HV_VERDICT_MOVING);
    assert_int_equal(hv_reconnect_verdict(0, 0, 1, 1, 1, 1), HV_VERDICT_MOVING);
    /* both back and resuming: the driver's own RECONNECT is the one */
    assert_int_equal(hv_reconnect_verdict(0, 1, 1, 1, 0, 0), HV_VERDICT_MOVING);
    assert_int_equal(hv_reconnect_verdict(0, 1, 1, 0, 0, 0), HV_VERDICT_ACCEPT);
    assert_int_equal(hv_reconnect_verdict(0, 1, 1, 0, 0, 1), HV_VERDICT_ACCEPT); /* never waits */
    /* the driver's own RECONNECT is out: its answer decides */
    assert_int_equal(hv_reconnect_verdict(0, 1, 1, 1, 0, 1), HV_VERDICT_WAIT);
    /* ... unless the driver was told to wait: then the other end's RECONNECT is the one */
    assert_int_equal(hv_reconnect_verdict(0, 1, 1, 1, 1, 0), HV_VERDICT_ACCEPT);
}

/* ---- the model ------------------------------------------------------------------------------
 * Each end: its device back or not, resuming or not, reconnected, awaiting, its RECONNECT out
 * (calling), and which end's RECONNECT its QP was configured by (0: none). A moving end's
 * resume is five steps: rebuild; the call (check `reconnected`, pre-modify, calling = 1, under
 * the QP lock); the peer's hv_on_reconnect (atomic under the peer's QP lock; blocked while its
 * verdict is WAIT); the reply applied (under the QP lock); the end of the swap. Every order of
 * the enabled steps is explored; a state where neither end can go on is a deadlock. */
typedef struct {
    int phys, swapping, reconnected, awaiting, calling, applied;
    int moving, step, skipped;
    HvVerdict reply;
    const uint8_t *gid;
    uint32_t vqpn;
} End;

static HvVerdict handler_verdict(const End *called, const End *caller)
{
    return hv_reconnect_verdict(called->reconnected, called->phys, called->swapping,
                                called->phys &&
                                    hv_drives(called->gid, called->vqpn, caller->gid, caller->vqpn),
                                called->awaiting, called->calling);
}

static int enabled(const End *e, const End *peer)
{
    if (!e->moving || e->step >= 5)
        return 0;
    return e->step != 2 || e->skipped || handler_verdict(peer, e) != HV_VERDICT_WAIT;
}

static void step(End *e, End *peer, int id)
{
    switch (e->step++) {
    case 0: /* rebuild: the new device and QP */
        e->phys = 1;
        break;
    case 1: /* hv_reconnect: already reconnected by the peer? else pre-modify, send */
        if (e->reconnected)
            e->skipped = 1;
        else
            e->calling = 1;
        break;
    case 2: /* the peer's hv_on_reconnect */
        if (e->skipped)
            break;
        e->reply = handler_verdict(peer, e);
        if (e->reply == HV_VERDICT_ACCEPT) {
            peer->applied = id;
            peer->reconnected = 1;
            peer->awaiting = 0;
        }
        break;
    case 3: /* the reply */
        if (e->skipped)
            break;
        e->calling = 0;
        if (e->reply == HV_VERDICT_ACCEPT) {
            e->applied = id;
            e->reconnected = 1;
        } else if (e->reply == HV_VERDICT_MOVING && !e->reconnected) {
            e->awaiting = 1;
        }
        break;
    case 4:
        e->swapping = 0;
        break;
    }
}

static int explored, deadlocks, wrong;

static void explore(End a, End b)
{
    int ea = enabled(&a, &b), eb = enabled(&b, &a);

    if (!ea && !eb) {
        if ((a.moving && a.step < 5) || (b.moving && b.step < 5)) {
            deadlocks++;
            return;
        }
        explored++;
        if (a.applied == 0 || a.applied != b.applied || a.awaiting || b.awaiting) {
            wrong++;
            print_message("end state: A applied %d awaiting %d, B applied %d awaiting %d\n",
                          a.applied, a.awaiting, b.applied, b.awaiting);
        }
        return;
    }
    if (ea) {
        End a2 = a, b2 = b;
        step(&a2, &b2, 1);
        explore(a2, b2);
    }
    if (eb) {
        End a2 = a, b2 = b;
        step(&b2, &a2, 2);
        explore(a2, b2);
    }
}

static void run_model(int a_moves, int b_moves, uint32_t a_vqpn, uint32_t b_vqpn,
                      const uint8_t *a_gid, const uint8_t *b_gid)
{
    End a = {.moving = a_moves, .gid = a_gid, .vqpn = a_vqpn};
    End b = {.moving = b_moves, .gid = b_gid, .vqpn = b_vqpn};

    a.phys = !a.moving; /* a moving end is away until its rebuild */
    a.swapping = a.moving;
    b.phys = !b.moving;
    b.swapping = b.moving;
    explored = deadlocks = wrong = 0;
    explore(a, b);
}

static void test_every_interleaving_reconnects_once(void **state)
{
    (void)state;
    /* both moving, either end the driver */
    run_model(1, 1, 20, 17, GID_LO, GID_HI);
    assert_int_equal(deadlocks, 0);
    assert_int_equal(wrong, 0);
    print_message("both moving: %d orders explored\n", explored);
    assert_true(explored > 100);
    run_model(1, 1, 20, 17, GID_HI, GID_LO);
    assert_int_equal(deadlocks, 0);
    assert_int_equal(wrong, 0);
    run_model(1, 1, 17, 18, GID_LO, GID_LO); /* two processes of one guest */
    assert_int_equal(deadlocks, 0);
    assert_int_equal(wrong, 0);
    /* one end moving: the other accepts */
    run_model(1, 0, 20, 17, GID_LO, GID_HI);
    assert_int_equal(explored, 1);
    assert_int_equal(deadlocks + wrong, 0);
    run_model(0, 1, 20, 17, GID_LO, GID_HI);
    assert_int_equal(explored, 1);
    assert_int_equal(deadlocks + wrong, 0);
}

/* DEFER: the called end's answer when it does not apply a RECONNECT (docs/protocol.md) */
static void test_defer_message(void **state)
{
    HvMsg *m = calloc(1, sizeof(*m));
    char buf[64];

    (void)state;
    assert_int_equal(hv_proto_parse("DEFER moving", 12, m), 0);
    assert_int_equal(m->type, HV_MSG_DEFER);
    assert_int_equal(m->defer, HV_DEFER_MOVING);
    assert_int_equal(hv_proto_format(m, buf, sizeof(buf)), 13);
    assert_string_equal(buf, "DEFER moving\n");
    assert_int_equal(hv_proto_parse("DEFER reconnected", 17, m), 0);
    assert_int_equal(m->defer, HV_DEFER_RECONNECTED);
    assert_int_equal(hv_proto_format(m, buf, sizeof(buf)), 18);
    assert_int_equal(hv_proto_parse("DEFER", 5, m), -EINVAL);
    assert_int_equal(hv_proto_parse("DEFER later", 11, m), -EINVAL);
    assert_int_equal(hv_proto_parse("DEFER moving x", 14, m), -EINVAL);
    assert_int_equal(hv_proto_parse("DEFER moving ", 13, m), -EINVAL);
    m->defer = 0;
    assert_int_equal(hv_proto_format(m, buf, sizeof(buf)), -EINVAL);
    free(m);
}

/* KEYMAP: a synthetic rkey registered after a swap, told to the connected peers */
static void test_keymap_message(void **state)
{
    HvMsg *m = calloc(1, sizeof(*m));
    char buf[128];
    const char *ok = "KEYMAP 18 17 2 a1b2:7 ffffffff:0";

    (void)state;
    assert_int_equal(hv_proto_parse(ok, strlen(ok), m), 0);
    assert_int_equal(m->type, HV_MSG_KEYMAP);
    assert_int_equal(m->target, 18);
    assert_int_equal(m->sender, 17);
    assert_int_equal(m->nkeys, 2);
    assert_int_equal(m->keys[1].v, 0xffffffff);
    assert_int_equal(hv_proto_format(m, buf, sizeof(buf)), (int)strlen(ok) + 1);
    assert_memory_equal(buf, ok, strlen(ok));
    assert_int_equal(hv_proto_parse("KEYMAPPED", 9, m), 0);
    assert_int_equal(m->type, HV_MSG_KEYMAPPED);
    assert_int_equal(hv_proto_parse("KEYMAP 18 17 0", 14, m), -EINVAL);     /* none */
    assert_int_equal(hv_proto_parse("KEYMAP 18 17 2 1:2", 18, m), -EINVAL); /* fewer */
    assert_int_equal(hv_proto_parse("KEYMAP 18 17 1 1:100000000", 26, m), -EINVAL);
    assert_int_equal(hv_proto_parse("KEYMAP 16777216 17 1 1:2", 24, m), -EINVAL);
    assert_int_equal(hv_proto_parse("KEYMAP 18 17 513 1:2", 20, m), -EINVAL); /* > max */
    assert_int_equal(hv_proto_parse("KEYMAPPED 1", 11, m), -EINVAL);
    m->type = HV_MSG_KEYMAP;
    m->nkeys = 0;
    assert_int_equal(hv_proto_format(m, buf, sizeof(buf)), -EINVAL);
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drives_is_antisymmetric),
        cmocka_unit_test(test_verdict_table),
        cmocka_unit_test(test_every_interleaving_reconnects_once),
        cmocka_unit_test(test_defer_message),
        cmocka_unit_test(test_keymap_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
