/* libhotmig-verbs: the UD drain of a quiesce (issue 30). A moving process waits until what its
 * held UD peers say they sent (UDHELD) has arrived; a datagram lost before the quiesce never
 * arrives, and the wait must not sit out its 3 s deadline for it (it did, once per move, in an
 * MPI job on the lab). What is still in flight must be waited for. The layer's sources are
 * linked in; the physical CQ the drain pulls is a fake that hands out receives on a schedule. */
#include "hv.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ---- the fake physical CQ: receives from (src_qp, at ms after t0), handed out when due ---- */
typedef struct {
    uint32_t src_qp;
    int64_t at;
} FakeRecv;

static FakeRecv fake_due[64];
static size_t fake_ndue, fake_next;
static int64_t fake_t0;
static struct ibv_context fake_phys_ctx;
static struct ibv_cq fake_phys_cq = {.context = &fake_phys_ctx};
static struct ibv_qp fake_phys_qp = {.qp_num = 700};

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    int out = 0;

    (void)cq;
    while (out < n && fake_next < fake_ndue && hv_now_ms() - fake_t0 >= fake_due[fake_next].at) {
        memset(&wc[out], 0, sizeof(wc[out]));
        wc[out].wr_id = fake_next;
        wc[out].status = IBV_WC_SUCCESS;
        wc[out].opcode = IBV_WC_RECV;
        wc[out].qp_num = fake_phys_qp.qp_num;
        wc[out].src_qp = fake_due[fake_next].src_qp;
        out++;
        fake_next++;
    }
    return out;
}

static void fake_schedule(uint32_t src_qp, int64_t at)
{
    assert_true(fake_ndue < sizeof(fake_due) / sizeof(fake_due[0]));
    fake_due[fake_ndue++] = (FakeRecv){src_qp, at};
}

/* A context with one UD QP (virtual 7, physical 700) whose receive CQ is the fake. */
static HvContext *ud_context(void)
{
    HvContext *ctx = calloc(1, sizeof(*ctx));
    HvQp *qp = calloc(1, sizeof(*qp));
    HvCq *cq = calloc(1, sizeof(*cq));

    assert_non_null(ctx);
    assert_non_null(qp);
    assert_non_null(cq);
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_mutex_init(&qp->lock, NULL);
    pthread_mutex_init(&cq->lock, NULL);
    ctx->phys = &fake_phys_ctx;
    cq->ctx = ctx;
    cq->phys = &fake_phys_cq;
    qp->phys = &fake_phys_qp;
    qp->pub.qp_num = 7;
    qp->init.qp_type = IBV_QPT_UD;
    qp->rcq = qp->scq = cq;
    qp->paused = 1;
    ctx->qps = qp;
    ctx->cqs = cq;
    assert_int_equal(hv_map_put(&ctx->qpn, fake_phys_qp.qp_num, (uintptr_t)qp), 0);
    return ctx;
}

static int setup(void **state)
{
    (void)state;
    fake_phys_ctx.ops.poll_cq = fake_poll_cq;
    fake_ndue = fake_next = 0;
    pthread_mutex_lock(&hv.lock);
    if (!hv.ctxs)
        hv.ctxs = ud_context();
    hv.swapping = 1;
    pthread_mutex_unlock(&hv.lock);
    fake_t0 = hv_now_ms();
    return 0;
}

/* Counts @n receives from @src_qp as arrived before the quiesce (as hv_wc_fix does). */
static void received_before(uint32_t src_qp, int n)
{
    for (int i = 0; i < n; i++)
        hv_ud_recv_qpn(src_qp);
}

/* The peer says it sent 3, 2 arrived before the quiesce and the third was lost: the drain
 * gives up once nothing arrived for its quiet time, not at its deadline (3 s before). */
static void test_lost_before_not_waited_out(void **state)
{
    HvKeyPair want[] = {{.v = 40, .p = 3}};
    int64_t t0, took;

    (void)state;
    received_before(40, 2);
    t0 = hv_now_ms();
    assert_int_equal(hv_ud_drain_wait(want, 1, HV_UD_QUIET_MIN_MS, t0 + HV_UD_DRAIN_MS), 1);
    took = hv_now_ms() - t0;
    assert_true(took >= HV_UD_QUIET_MIN_MS);
    assert_true(took < HV_UD_DRAIN_MS / 3);
}

/* Two held peers, one of whose datagrams was lost: the other's, still in flight, arrive (each
 * within the quiet time of the last) and are waited for; then the lost one is given up. */
static void test_in_flight_waited_for(void **state)
{
    HvKeyPair want[] = {{.v = 41, .p = 3}, {.v = 42, .p = 5}};
    int64_t t0, took;

    (void)state;
    received_before(41, 1);
    received_before(42, 4); /* one of 42's lost */
    fake_schedule(41, 60);
    fake_schedule(41, 130);
    t0 = hv_now_ms();
    assert_int_equal(hv_ud_drain_wait(want, 2, HV_UD_QUIET_MIN_MS, t0 + HV_UD_DRAIN_MS), 1);
    took = hv_now_ms() - t0;
    assert_int_equal(fake_next, 2); /* both in-flight datagrams were counted */
    assert_true(took >= 130 + HV_UD_QUIET_MIN_MS);
    assert_true(took < HV_UD_DRAIN_MS / 3);
}

/* Everything the peers sent arrives in flight: the drain ends on the last one, not later. */
static void test_all_arrive(void **state)
{
    HvKeyPair want[] = {{.v = 43, .p = 2}};
    int64_t t0, took;

    (void)state;
    fake_schedule(43, 20);
    fake_schedule(43, 50);
    t0 = hv_now_ms();
    assert_int_equal(hv_ud_drain_wait(want, 1, HV_UD_QUIET_MIN_MS, t0 + HV_UD_DRAIN_MS), 0);
    took = hv_now_ms() - t0;
    assert_true(took >= 50);
    assert_true(took < 50 + HV_UD_QUIET_MIN_MS);
}

/* A sender that keeps trickling without ever reaching its count is bounded by the deadline. */
static void test_deadline_bounds(void **state)
{
    HvKeyPair want[] = {{.v = 44, .p = 1000}};
    int64_t t0, took;

    (void)state;
    for (int i = 0; i < 20; i++)
        fake_schedule(44, 40 * (i + 1));
    t0 = hv_now_ms();
    assert_int_equal(hv_ud_drain_wait(want, 1, HV_UD_QUIET_MIN_MS, t0 + 300), 1);
    took = hv_now_ms() - t0;
    assert_true(took >= 300);
    assert_true(took < 800);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_lost_before_not_waited_out, setup),
        cmocka_unit_test_setup(test_in_flight_waited_for, setup),
        cmocka_unit_test_setup(test_all_arrive, setup),
        cmocka_unit_test_setup(test_deadline_bounds, setup),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
