/* libhotmig-verbs: loopback connections across a swap (guest-agent/verbs/hv-local.c). UCX
 * connects RC QPs to themselves and to other QPs of the same process; after a device swap the
 * layer must aim them at the peer's NEW physical QPN. A virtual QPN alone does not say the
 * peer is local: two guests hand out the same numbers, so the address must be the QP's own. */
#include "hv.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static union ibv_gid gid_of(uint8_t last)
{
    union ibv_gid g;

    memset(&g, 0, sizeof(g));
    g.raw[10] = 0xff;
    g.raw[11] = 0xff;
    g.raw[12] = 10;
    g.raw[15] = last;
    return g;
}

/* An RC QP @vqpn connected (RTR, GRH) to @peer_vqpn at @dgid. */
static void rc_qp(HvQp *qp, uint32_t vqpn, uint32_t peer_vqpn, union ibv_gid dgid)
{
    memset(qp, 0, sizeof(*qp));
    qp->init.qp_type = IBV_QPT_RC;
    qp->pub.qp_num = vqpn;
    qp->peer_vqpn = peer_vqpn;
    qp->peer_pqpn = peer_vqpn;
    qp->m_rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    qp->a_rtr.qp_state = IBV_QPS_RTR;
    qp->a_rtr.dest_qp_num = peer_vqpn;
    qp->a_rtr.rq_psn = 0x123;
    qp->a_rtr.ah_attr.is_global = 1;
    qp->a_rtr.ah_attr.grh.dgid = dgid;
    qp->a_rtr.ah_attr.grh.sgid_index = 1;
    qp->a_rtr.ah_attr.port_num = 1;
    qp->state = IBV_QPS_RTS;
}

static void test_self_loop_is_local(void **state)
{
    union ibv_gid own = gid_of(1);
    HvQp q;

    (void)state;
    rc_qp(&q, 18, 18, own); /* "RC 18 (RTS, rqpn 18)" */
    assert_true(hv_peer_is_local(&q, &q, &own, 0));
}

static void test_pair_is_local_both_ways(void **state)
{
    union ibv_gid own = gid_of(1);
    HvQp a, b;

    (void)state;
    rc_qp(&a, 20, 21, own);
    rc_qp(&b, 21, 20, own);
    assert_true(hv_peer_is_local(&a, &b, &own, 0));
    assert_true(hv_peer_is_local(&b, &a, &own, 0));
}

static void test_same_number_on_another_guest_is_not_local(void **state)
{
    union ibv_gid own = gid_of(1), other = gid_of(2);
    HvQp a, b;

    (void)state;
    /* QP 17 here talks to QP 18 of the other guest; this process has a QP 18 that talks to
     * a QP 17 elsewhere as well */
    rc_qp(&a, 17, 18, other);
    rc_qp(&b, 18, 17, other);
    assert_false(hv_peer_is_local(&a, &b, &own, 0));
    assert_false(hv_peer_is_local(&a, &b, NULL, 0));
}

static void test_peer_that_points_elsewhere_is_not_local(void **state)
{
    union ibv_gid own = gid_of(1);
    HvQp a, b;

    (void)state;
    rc_qp(&a, 20, 21, own);
    rc_qp(&b, 21, 22, own);
    assert_false(hv_peer_is_local(&a, &b, &own, 0));
    assert_false(hv_peer_is_local(&a, NULL, &own, 0));
}

static void test_ud_and_unconnected_are_not_local(void **state)
{
    union ibv_gid own = gid_of(1);
    HvQp a;

    (void)state;
    rc_qp(&a, 19, 19, own);
    a.init.qp_type = IBV_QPT_UD;
    a.m_rtr = IBV_QP_STATE;
    assert_false(hv_peer_is_local(&a, &a, &own, 0));
    rc_qp(&a, 19, 19, own);
    a.m_rtr = 0; /* never connected */
    assert_false(hv_peer_is_local(&a, &a, &own, 0));
}

static void test_lid_only_loopback(void **state)
{
    union ibv_gid own = gid_of(1);
    HvQp a;

    (void)state;
    rc_qp(&a, 30, 30, own);
    a.a_rtr.ah_attr.is_global = 0;
    a.a_rtr.ah_attr.dlid = 7;
    assert_true(hv_peer_is_local(&a, &a, NULL, 7));
    assert_false(hv_peer_is_local(&a, &a, &own, 8));
}

static void test_local_rtr_aims_at_the_new_qpn_and_gid(void **state)
{
    union ibv_gid old = gid_of(1), now = gid_of(9);
    struct ibv_qp_attr at;
    HvQp a;

    (void)state;
    rc_qp(&a, 18, 18, old);
    a.peer_pqpn = 18; /* the old physical QPN: gone with the old device */
    hv_local_rtr(&a, 23, &now, 0, &at);
    assert_int_equal(at.dest_qp_num, 23);
    assert_memory_equal(at.ah_attr.grh.dgid.raw, now.raw, 16);
    assert_int_equal(at.rq_psn, 0x123);       /* the program's PSN, replayed */
    assert_int_equal(at.qp_state, IBV_QPS_RTR);
    assert_int_equal(a.a_rtr.dest_qp_num, 18); /* the record is not changed by building */
    a.a_rtr.ah_attr.is_global = 0;
    hv_local_rtr(&a, 24, NULL, 5, &at);
    assert_int_equal(at.dest_qp_num, 24);
    assert_int_equal(at.ah_attr.dlid, 5);
    /* on IB with a GRH the LID still routes: the new one, beside the new GID */
    a.a_rtr.ah_attr.is_global = 1;
    a.a_rtr.ah_attr.dlid = 0x101;
    hv_local_rtr(&a, 25, &now, 0x201, &at);
    assert_int_equal(at.ah_attr.dlid, 0x201);
    assert_memory_equal(at.ah_attr.grh.dgid.raw, now.raw, 16);
}

/* UCX's UD endpoint to its own interface: its AH follows this port's new LID after a move
 * (the old LID is the old host's port: nothing arrives); an AH to another port is left. */
static void test_ah_to_self_follows_the_new_lid(void **state)
{
    union ibv_gid own, other;
    struct ibv_ah_attr at;

    (void)state;
    memset(&own, 0, sizeof(own));
    memset(&other, 0, sizeof(other));
    own.raw[0] = 0xfe, own.raw[1] = 0x80, own.raw[15] = 1;
    other.raw[0] = 0xfe, other.raw[1] = 0x80, other.raw[15] = 2;
    memset(&at, 0, sizeof(at));
    at.dlid = 0x101;
    assert_int_equal(hv_ah_local_fix(&at, &own, &own, 0x201), 1);
    assert_int_equal(at.dlid, 0x201);
    assert_int_equal(at.is_global, 0);
    at.dlid = 0x102;
    assert_int_equal(hv_ah_local_fix(&at, &other, &own, 0x201), 0);
    assert_int_equal(at.dlid, 0x102);
    /* RoCE: no LID, the GRH's GID is this port's */
    at.is_global = 1;
    assert_int_equal(hv_ah_local_fix(&at, &own, &own, 0), 1);
    assert_int_equal(at.dlid, 0x102);
    assert_memory_equal(at.grh.dgid.raw, own.raw, 16);
    assert_int_equal(hv_ah_local_fix(&at, NULL, &own, 0x201), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self_loop_is_local),
        cmocka_unit_test(test_pair_is_local_both_ways),
        cmocka_unit_test(test_same_number_on_another_guest_is_not_local),
        cmocka_unit_test(test_peer_that_points_elsewhere_is_not_local),
        cmocka_unit_test(test_ud_and_unconnected_are_not_local),
        cmocka_unit_test(test_lid_only_loopback),
        cmocka_unit_test(test_local_rtr_aims_at_the_new_qpn_and_gid),
        cmocka_unit_test(test_ah_to_self_follows_the_new_lid),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
