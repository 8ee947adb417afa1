/* libhotmig-verbs, objects layer: the ibv_wr_* API (ibv_qp_ex): work requests built into the
 * layer's own posts. */
#include "hv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- the ibv_wr_* API (ibv_qp_ex) -----------------------------------------------------------
 * The layer builds ibv_send_wr lists from the wr_* calls and posts them through its own
 * post_send at wr_complete: the same queueing during a swap and the same translation. */

void hv_wx_free(HvQp *qp)
{
    free(qp->wx);
    free(qp->wx_inl);
    qp->wx = NULL;
    qp->wx_inl = NULL;
    qp->wx_n = qp->wx_cap = 0;
}

static HvWxWr *hv_wx_new(struct ibv_qp_ex *qpx, enum ibv_wr_opcode op)
{
    HvQp *qp = (HvQp *)qpx;
    HvWxWr *w;

    if (qp->wx_err)
        return NULL;
    if (qp->wx_n == qp->wx_cap) { /* more than the send queue takes */
        qp->wx_err = ENOMEM;
        return NULL;
    }
    w = &qp->wx[qp->wx_n];
    memset(&w->wr, 0, sizeof(w->wr));
    w->wr.wr_id = qpx->wr_id;
    w->wr.send_flags = qpx->wr_flags;
    w->wr.opcode = op;
    w->wr.sg_list = w->sge;
    if (qp->wx_n)
        qp->wx[qp->wx_n - 1].wr.next = &w->wr;
    qp->wx_n++;
    return w;
}

/* the work request the wr_set_* calls complete */
static HvWxWr *hv_wx_last(struct ibv_qp_ex *qpx)
{
    HvQp *qp = (HvQp *)qpx;

    if (!qp->wx_err && !qp->wx_n)
        qp->wx_err = EINVAL; /* a wr_set_* before any wr_<opcode> */
    return qp->wx_err ? NULL : &qp->wx[qp->wx_n - 1];
}

static void hv_wx_start(struct ibv_qp_ex *qpx)
{
    HvQp *qp = (HvQp *)qpx;

    qp->wx_n = 0;
    qp->wx_err = 0;
}

static int hv_wx_complete(struct ibv_qp_ex *qpx)
{
    HvQp *qp = (HvQp *)qpx;
    struct ibv_send_wr *bad = NULL;
    int r = qp->wx_err;

    if (!r && qp->wx_n)
        r = hv_op_post_send(&qp->pub, &qp->wx[0].wr, &bad);
    qp->wx_n = 0;
    qp->wx_err = 0;
    return r;
}

static void hv_wx_abort(struct ibv_qp_ex *qpx)
{
    HvQp *qp = (HvQp *)qpx;

    qp->wx_n = 0;
    qp->wx_err = 0;
}

static void hv_wx_send(struct ibv_qp_ex *qpx)
{
    hv_wx_new(qpx, IBV_WR_SEND);
}

static void hv_wx_send_imm(struct ibv_qp_ex *qpx, __be32 imm)
{
    HvWxWr *w = hv_wx_new(qpx, IBV_WR_SEND_WITH_IMM);

    if (w)
        w->wr.imm_data = imm;
}

static void hv_wx_rdma(struct ibv_qp_ex *qpx, enum ibv_wr_opcode op, uint32_t rkey, uint64_t raddr,
                       __be32 imm)
{
    HvWxWr *w = hv_wx_new(qpx, op);

    if (!w)
        return;
    w->wr.wr.rdma.rkey = rkey;
    w->wr.wr.rdma.remote_addr = raddr;
    w->wr.imm_data = imm;
}

static void hv_wx_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr)
{
    hv_wx_rdma(qpx, IBV_WR_RDMA_WRITE, rkey, raddr, 0);
}

static void hv_wx_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr, __be32 imm)
{
    hv_wx_rdma(qpx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, raddr, imm);
}

static void hv_wx_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr)
{
    hv_wx_rdma(qpx, IBV_WR_RDMA_READ, rkey, raddr, 0);
}

static void hv_wx_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr, uint64_t cmp,
                          uint64_t swap)
{
    HvWxWr *w = hv_wx_new(qpx, IBV_WR_ATOMIC_CMP_AND_SWP);

    if (!w)
        return;
    w->wr.wr.atomic.rkey = rkey;
    w->wr.wr.atomic.remote_addr = raddr;
    w->wr.wr.atomic.compare_add = cmp;
    w->wr.wr.atomic.swap = swap;
}

static void hv_wx_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr, uint64_t add)
{
    HvWxWr *w = hv_wx_new(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD);

    if (!w)
        return;
    w->wr.wr.atomic.rkey = rkey;
    w->wr.wr.atomic.remote_addr = raddr;
    w->wr.wr.atomic.compare_add = add;
}

static void hv_wx_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
    HvWxWr *w = hv_wx_last(qpx);

    if (!w)
        return;
    w->wr.wr.ud.ah = ah;
    w->wr.wr.ud.remote_qpn = qpn;
    w->wr.wr.ud.remote_qkey = qkey;
}

static void hv_wx_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t len)
{
    HvWxWr *w = hv_wx_last(qpx);

    if (!w)
        return;
    w->sge[0] = (struct ibv_sge){.addr = addr, .length = len, .lkey = lkey};
    w->wr.num_sge = 1;
}

static void hv_wx_set_sge_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_sge *sg)
{
    HvWxWr *w = hv_wx_last(qpx);

    if (!w)
        return;
    if (n > HV_WX_SGE_MAX) {
        ((HvQp *)qpx)->wx_err = EINVAL;
        return;
    }
    if (n)
        memcpy(w->sge, sg, n * sizeof(*sg));
    w->wr.num_sge = (int)n;
}

/* inline data is the program's to reuse once the call returns: copied now */
static void hv_wx_set_inline_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_data_buf *b)
{
    HvWxWr *w = hv_wx_last(qpx);
    size_t total = 0;
    char *p;

    if (!w)
        return;
    for (size_t i = 0; i < n; i++)
        total += b[i].length;
    if (total > ((HvQp *)qpx)->wx_inl_per) { /* more than the QP's max_inline_data */
        ((HvQp *)qpx)->wx_err = EINVAL;
        return;
    }
    p = w->inl;
    for (size_t i = 0; i < n; i++) {
        memcpy(p, b[i].addr, b[i].length);
        p += b[i].length;
    }
    w->sge[0] = (struct ibv_sge){.addr = (uintptr_t)w->inl, .length = (uint32_t)total};
    w->wr.num_sge = 1;
    w->wr.send_flags |= IBV_SEND_INLINE;
}

static void hv_wx_set_inline(struct ibv_qp_ex *qpx, void *addr, size_t len)
{
    struct ibv_data_buf b = {.addr = addr, .length = len};

    hv_wx_set_inline_list(qpx, 1, &b);
}

/* not offered (create refuses their send_ops_flags): a call fails wr_complete */
static void hv_wx_refused(struct ibv_qp_ex *qpx)
{
    hv_unsupported("this ibv_wr_* operation");
    ((HvQp *)qpx)->wx_err = EOPNOTSUPP;
}
static void hv_wx_no_bind_mw(struct ibv_qp_ex *q, struct ibv_mw *mw, uint32_t k,
                             const struct ibv_mw_bind_info *b)
{
    (void)mw, (void)k, (void)b;
    hv_wx_refused(q);
}
static void hv_wx_no_inv(struct ibv_qp_ex *q, uint32_t k)
{
    (void)k;
    hv_wx_refused(q);
}
static void hv_wx_no_tso(struct ibv_qp_ex *q, void *h, uint16_t hs, uint16_t mss)
{
    (void)h, (void)hs, (void)mss;
    hv_wx_refused(q);
}
static void hv_wx_no_atomic_write(struct ibv_qp_ex *q, uint32_t k, uint64_t a, const void *w)
{
    (void)k, (void)a, (void)w;
    hv_wx_refused(q);
}

int hv_qp_ex_init(HvQp *qp)
{
    struct ibv_qp_ex *x = &qp->pubx;
    size_t cap = qp->init.cap.max_send_wr ? qp->init.cap.max_send_wr : 1;
    size_t inl_per = qp->init.cap.max_inline_data;

    qp->wx = calloc(cap, sizeof(*qp->wx));
    qp->wx_inl = inl_per ? calloc(cap, inl_per) : NULL;
    if (!qp->wx || (inl_per && !qp->wx_inl)) {
        hv_wx_free(qp);
        return ENOMEM;
    }
    for (size_t i = 0; i < cap; i++)
        qp->wx[i].inl = qp->wx_inl ? qp->wx_inl + i * inl_per : NULL;
    qp->wx_cap = cap;
    qp->wx_inl_per = inl_per;

    x->wr_atomic_cmp_swp = hv_wx_cmp_swp;
    x->wr_atomic_fetch_add = hv_wx_fetch_add;
    x->wr_bind_mw = hv_wx_no_bind_mw;
    x->wr_local_inv = hv_wx_no_inv;
    x->wr_rdma_read = hv_wx_rdma_read;
    x->wr_rdma_write = hv_wx_rdma_write;
    x->wr_rdma_write_imm = hv_wx_rdma_write_imm;
    x->wr_send = hv_wx_send;
    x->wr_send_imm = hv_wx_send_imm;
    x->wr_send_inv = hv_wx_no_inv;
    x->wr_send_tso = hv_wx_no_tso;
    x->wr_set_ud_addr = hv_wx_set_ud_addr;
    x->wr_set_xrc_srqn = hv_wx_no_inv;
    x->wr_set_inline_data = hv_wx_set_inline;
    x->wr_set_inline_data_list = hv_wx_set_inline_list;
    x->wr_set_sge = hv_wx_set_sge;
    x->wr_set_sge_list = hv_wx_set_sge_list;
    x->wr_start = hv_wx_start;
    x->wr_complete = hv_wx_complete;
    x->wr_abort = hv_wx_abort;
    x->wr_atomic_write = hv_wx_no_atomic_write;
    qp->ex = 1;
    return 0;
}
