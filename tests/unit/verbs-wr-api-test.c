/* libhotmig-verbs: the ibv_wr_* API (ibv_qp_ex) the layer serves for a QP created by
 * ibv_create_qp_ex with send_ops_flags (hv-layer.c). The wr_* calls build ibv_send_wr lists
 * that wr_complete hands to the layer's post_send; here the QP is paused (as during a swap),
 * so the posts are queued and can be read back without a device. */
#include "hv.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static HvQp *paused_qp(void)
{
    HvQp *qp = calloc(1, sizeof(*qp));

    assert_non_null(qp);
    pthread_mutex_init(&qp->lock, NULL);
    qp->init.qp_type = IBV_QPT_RC;
    qp->paused = 1; /* posts are queued with the program's values */
    hv_qp_ex_init(qp);
    return qp;
}

static void free_qp(HvQp *qp)
{
    while (qp->queued_head) {
        HvSendWr *q = qp->queued_head;

        qp->queued_head = q->next;
        free(q->sge);
        free(q);
    }
    free(qp);
}

static void test_builds_and_posts(void **state)
{
    HvQp *qp = paused_qp();
    struct ibv_qp_ex *x = &qp->pubx;
    char msg[8] = "hello";
    struct ibv_sge sl[2] = {{.addr = 0x1000, .length = 64, .lkey = 7},
                            {.addr = 0x2000, .length = 32, .lkey = 8}};
    HvSendWr *q;

    (void)state;
    assert_int_equal(qp->ex, 1);
    ibv_wr_start(x);
    x->wr_id = 11;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(x, 0xabc, 0x7f0000001000ull);
    ibv_wr_set_sge(x, 5, 0x5000, 4096);
    x->wr_id = 12;
    x->wr_flags = 0;
    ibv_wr_send(x);
    ibv_wr_set_inline_data(x, msg, 6);
    memcpy(msg, "XXXXX", 6); /* the program may reuse it once the call returned */
    x->wr_id = 13;
    ibv_wr_rdma_read(x, 0xdef, 0x9000);
    ibv_wr_set_sge_list(x, 2, sl);
    x->wr_id = 14;
    ibv_wr_atomic_fetch_add(x, 0x55, 0xa000, 3);
    ibv_wr_set_sge(x, 9, 0xb000, 8);
    assert_int_equal(ibv_wr_complete(x), 0);

    q = qp->queued_head;
    assert_non_null(q);
    assert_int_equal(q->wr.wr_id, 11);
    assert_int_equal(q->wr.opcode, IBV_WR_RDMA_WRITE);
    assert_int_equal(q->wr.send_flags, IBV_SEND_SIGNALED);
    assert_int_equal(q->wr.wr.rdma.rkey, 0xabc);
    assert_int_equal(q->wr.wr.rdma.remote_addr, 0x7f0000001000ull);
    assert_int_equal(q->wr.num_sge, 1);
    assert_int_equal(q->wr.sg_list[0].lkey, 5);
    assert_int_equal(q->wr.sg_list[0].length, 4096);
    q = q->next;
    assert_non_null(q);
    assert_int_equal(q->wr.wr_id, 12);
    assert_int_equal(q->wr.opcode, IBV_WR_SEND);
    assert_true(q->wr.send_flags & IBV_SEND_INLINE);
    assert_int_equal(q->wr.sg_list[0].length, 6);
    assert_memory_equal((void *)(uintptr_t)q->wr.sg_list[0].addr, "hello", 6);
    q = q->next;
    assert_non_null(q);
    assert_int_equal(q->wr.opcode, IBV_WR_RDMA_READ);
    assert_int_equal(q->wr.num_sge, 2);
    assert_int_equal(q->wr.sg_list[1].lkey, 8);
    q = q->next;
    assert_non_null(q);
    assert_int_equal(q->wr.wr_id, 14);
    assert_int_equal(q->wr.opcode, IBV_WR_ATOMIC_FETCH_AND_ADD);
    assert_int_equal(q->wr.wr.atomic.rkey, 0x55);
    assert_int_equal(q->wr.wr.atomic.compare_add, 3);
    assert_null(q->next);
    assert_null(qp->wx_head); /* the builder is empty again */
    free_qp(qp);
}

static void test_errors_post_nothing(void **state)
{
    HvQp *qp = paused_qp();
    struct ibv_qp_ex *x = &qp->pubx;
    struct ibv_sge many[HV_WX_SGE_MAX + 1];

    (void)state;
    /* a wr_set_* before any operation */
    ibv_wr_start(x);
    ibv_wr_set_sge(x, 1, 2, 3);
    ibv_wr_send(x);
    assert_int_equal(ibv_wr_complete(x), EINVAL);
    assert_null(qp->queued_head);
    /* too many SGEs */
    memset(many, 0, sizeof(many));
    ibv_wr_start(x);
    ibv_wr_send(x);
    ibv_wr_set_sge_list(x, HV_WX_SGE_MAX + 1, many);
    assert_int_equal(ibv_wr_complete(x), EINVAL);
    assert_null(qp->queued_head);
    /* an operation the layer does not offer */
    ibv_wr_start(x);
    ibv_wr_local_inv(x, 1);
    assert_int_equal(ibv_wr_complete(x), EOPNOTSUPP);
    assert_null(qp->queued_head);
    /* abort drops what was built; the next batch is clean */
    ibv_wr_start(x);
    ibv_wr_send(x);
    ibv_wr_set_sge(x, 1, 2, 3);
    ibv_wr_abort(x);
    assert_null(qp->wx_head);
    ibv_wr_start(x);
    ibv_wr_send(x);
    ibv_wr_set_sge(x, 1, 2, 3);
    assert_int_equal(ibv_wr_complete(x), 0);
    assert_non_null(qp->queued_head);
    assert_null(qp->queued_head->next);
    free_qp(qp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builds_and_posts),
        cmocka_unit_test(test_errors_post_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
