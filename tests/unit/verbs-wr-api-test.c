/* libhotmig-verbs: the ibv_wr_* API (ibv_qp_ex) the layer serves for a QP created by
 * ibv_create_qp_ex with send_ops_flags (hv-qpx.c). The wr_* calls build ibv_send_wr lists
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

/* The layer's allocations, counted: the test links with --wrap=malloc,calloc,realloc
 * (tests/unit/verbs.cmake), so the layer's sources linked in call these. */
static size_t allocs;
void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n)
{
    allocs++;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t k, size_t n)
{
    allocs++;
    return __real_calloc(k, n);
}
void *__wrap_realloc(void *p, size_t n)
{
    allocs++;
    return __real_realloc(p, n);
}

static HvQp *paused_qp(void)
{
    HvQp *qp = calloc(1, sizeof(*qp));

    assert_non_null(qp);
    pthread_mutex_init(&qp->lock, NULL);
    qp->init.qp_type = IBV_QPT_RC;
    qp->init.cap.max_send_wr = 8;
    qp->init.cap.max_send_sge = 2;
    qp->init.cap.max_inline_data = 16;
    assert_int_equal(hv_sendq_reserve(qp), 0);
    qp->paused = 1; /* posts are queued with the program's values */
    assert_int_equal(hv_qp_ex_init(qp), 0);
    return qp;
}

/* The @i-th send queued on the paused @qp */
static HvSendWr *queued(HvQp *qp, size_t i)
{
    assert_true(i < qp->queued.n);
    return &qp->queued.v[(qp->queued.head + i) % qp->queued.cap];
}

static void free_qp(HvQp *qp)
{
    hv_sendq_free(&qp->queued);
    free(qp->wx);
    free(qp->wx_inl);
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
    size_t before = allocs;

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
    assert_int_equal(allocs, before); /* the batch was built and queued without allocating */

    assert_int_equal(qp->queued.n, 4);
    q = queued(qp, 0);
    assert_int_equal(q->wr.wr_id, 11);
    assert_int_equal(q->wr.opcode, IBV_WR_RDMA_WRITE);
    assert_int_equal(q->wr.send_flags, IBV_SEND_SIGNALED);
    assert_int_equal(q->wr.wr.rdma.rkey, 0xabc);
    assert_int_equal(q->wr.wr.rdma.remote_addr, 0x7f0000001000ull);
    assert_int_equal(q->wr.num_sge, 1);
    assert_int_equal(q->wr.sg_list[0].lkey, 5);
    assert_int_equal(q->wr.sg_list[0].length, 4096);
    q = queued(qp, 1);
    assert_int_equal(q->wr.wr_id, 12);
    assert_int_equal(q->wr.opcode, IBV_WR_SEND);
    assert_true(q->wr.send_flags & IBV_SEND_INLINE);
    assert_int_equal(q->wr.sg_list[0].length, 6);
    assert_memory_equal((void *)(uintptr_t)q->wr.sg_list[0].addr, "hello", 6);
    q = queued(qp, 2);
    assert_int_equal(q->wr.opcode, IBV_WR_RDMA_READ);
    assert_int_equal(q->wr.num_sge, 2);
    assert_int_equal(q->wr.sg_list[1].lkey, 8);
    q = queued(qp, 3);
    assert_int_equal(q->wr.wr_id, 14);
    assert_int_equal(q->wr.opcode, IBV_WR_ATOMIC_FETCH_AND_ADD);
    assert_int_equal(q->wr.wr.atomic.rkey, 0x55);
    assert_int_equal(q->wr.wr.atomic.compare_add, 3);
    assert_int_equal(qp->wx_n, 0); /* the builder is empty again */
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
    assert_int_equal(qp->queued.n, 0);
    /* too many SGEs */
    memset(many, 0, sizeof(many));
    ibv_wr_start(x);
    ibv_wr_send(x);
    ibv_wr_set_sge_list(x, HV_WX_SGE_MAX + 1, many);
    assert_int_equal(ibv_wr_complete(x), EINVAL);
    assert_int_equal(qp->queued.n, 0);
    /* more requests than the send queue takes, more inline bytes than the QP does */
    ibv_wr_start(x);
    for (int i = 0; i < 9; i++) {
        ibv_wr_send(x);
        ibv_wr_set_sge(x, 1, 2, 3);
    }
    assert_int_equal(ibv_wr_complete(x), ENOMEM);
    assert_int_equal(qp->queued.n, 0);
    ibv_wr_start(x);
    ibv_wr_send(x);
    ibv_wr_set_inline_data(x, many, 17);
    assert_int_equal(ibv_wr_complete(x), EINVAL);
    assert_int_equal(qp->queued.n, 0);
    /* an operation the layer does not offer */
    ibv_wr_start(x);
    ibv_wr_local_inv(x, 1);
    assert_int_equal(ibv_wr_complete(x), EOPNOTSUPP);
    assert_int_equal(qp->queued.n, 0);
    /* abort drops what was built; the next batch is clean */
    ibv_wr_start(x);
    ibv_wr_send(x);
    ibv_wr_set_sge(x, 1, 2, 3);
    ibv_wr_abort(x);
    assert_int_equal(qp->wx_n, 0);
    ibv_wr_start(x);
    ibv_wr_send(x);
    ibv_wr_set_sge(x, 1, 2, 3);
    assert_int_equal(ibv_wr_complete(x), 0);
    assert_int_equal(qp->queued.n, 1);
    free_qp(qp);
}

/* While a QP is paused, its sends are queued like a send queue takes them: as many as it is
 * deep, each with its SGEs and inline bytes, in order; what the device would refuse is refused;
 * and the queueing allocates nothing (a program's signal handler may call malloc). */
static void test_paused_queue_is_a_send_queue(void **state)
{
    HvQp *qp = paused_qp();
    char data[32];
    struct ibv_sge sg[3] = {{.addr = (uintptr_t)data, .length = 8, .lkey = 1},
                            {.addr = (uintptr_t)data + 8, .length = 8, .lkey = 1},
                            {.addr = 0, .length = 1, .lkey = 1}};
    struct ibv_send_wr wr = {.opcode = IBV_WR_SEND, .sg_list = sg, .num_sge = 1};
    size_t before;

    (void)state;
    memset(data, 'a', sizeof(data));
    before = allocs;
    for (uint64_t i = 0; i < 8; i++) {
        wr.wr_id = i;
        wr.send_flags = i % 2 ? IBV_SEND_INLINE : 0;
        wr.num_sge = i == 3 ? 2 : 1;
        assert_int_equal(hv_sendq_push(qp, &wr), 0);
    }
    assert_int_equal(allocs, before);
    memset(data, 'b', sizeof(data)); /* inline data was copied at post time */
    assert_int_equal(qp->queued.n, 8);
    for (size_t i = 0; i < 8; i++) {
        HvSendWr *e = queued(qp, i);

        assert_int_equal(e->wr.wr_id, i);
        assert_null(e->wr.next);
        if (i % 2) {
            assert_ptr_equal((void *)(uintptr_t)e->wr.sg_list[0].addr, e->inl);
            assert_memory_equal(e->inl, "aaaaaaaa", 8);
        } else {
            assert_int_equal(e->wr.sg_list[0].addr, (uintptr_t)data);
        }
    }
    assert_int_equal(queued(qp, 3)->wr.num_sge, 2);
    assert_int_equal(queued(qp, 3)->wr.sg_list[1].length, 8);
    /* full: the ninth is refused, the queue unchanged */
    wr.send_flags = 0;
    wr.num_sge = 1;
    assert_int_equal(hv_sendq_push(qp, &wr), ENOMEM);
    assert_int_equal(qp->queued.n, 8);
    /* more SGEs or inline bytes than the QP takes */
    qp->queued.n = 0;
    wr.num_sge = 3;
    assert_int_equal(hv_sendq_push(qp, &wr), EINVAL);
    wr.num_sge = 2;
    sg[1].length = 9;
    wr.send_flags = IBV_SEND_INLINE;
    assert_int_equal(hv_sendq_push(qp, &wr), EINVAL);
    assert_int_equal(qp->queued.n, 0);
    free_qp(qp);
}

/* Receives are recorded (for re-posting on the new device) without allocating once the FIFO
 * is sized from the QP's capacities; in order, each with its own SGEs (also when an SRQ's
 * completion takes one out of the middle); a program posting past them makes it grow, losing
 * nothing. */
static void test_receive_fifo_does_not_allocate(void **state)
{
    HvRecvFifo f = {0};
    struct ibv_sge sg[2] = {{.addr = 0x1000, .length = 64}, {.addr = 0x2000, .length = 64}};
    struct ibv_recv_wr wr = {.sg_list = sg, .num_sge = 2};
    size_t before;

    (void)state;
    assert_int_equal(hv_fifo_reserve(&f, 32, 2), 0);
    before = allocs;
    for (uint64_t round = 0; round < 10; round++) { /* around the ring */
        for (uint64_t i = 0; i < 20; i++) {
            wr.wr_id = round * 100 + i;
            sg[1].lkey = (uint32_t)wr.wr_id;
            hv_fifo_push(&f, &wr);
        }
        hv_fifo_consume(&f, round * 100 + 7); /* an SRQ's completion: out of order */
        for (uint64_t i = 0; i < 19; i++) {
            const HvRecv *r = &f.v[f.head];

            assert_int_equal(r->wr_id, round * 100 + i + (i >= 7));
            assert_int_equal(r->sge[1].lkey, (uint32_t)r->wr_id);
            hv_fifo_consume(&f, r->wr_id);
        }
    }
    assert_int_equal(allocs, before);
    assert_int_equal(f.n, 0);
    /* past the depth it was given: it grows, in order */
    for (uint64_t i = 0; i < 40; i++) {
        wr.wr_id = i;
        sg[1].lkey = (uint32_t)i;
        hv_fifo_push(&f, &wr);
    }
    assert_true(allocs > before);
    assert_int_equal(f.n, 40);
    for (size_t i = 0; i < f.n; i++) {
        const HvRecv *r = &f.v[(f.head + i) % f.cap];

        assert_int_equal(r->wr_id, i);
        assert_int_equal(r->num_sge, 2);
        assert_int_equal(r->sge[1].lkey, (uint32_t)i);
    }
    free(f.v);
    free(f.sges);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builds_and_posts),
        cmocka_unit_test(test_errors_post_nothing),
        cmocka_unit_test(test_paused_queue_is_a_send_queue),
        cmocka_unit_test(test_receive_fifo_does_not_allocate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
