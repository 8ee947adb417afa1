/* libhotmig-verbs, data path layer: the ops of a shadow context that libibverbs' inline calls
 * reach (post_send, post_recv, post_srq_recv, poll_cq, req_notify_cq, the memory-window ops), and
 * how a shadow context is recognised. */
#include "hv.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static int hv_op_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc);

/* Lock-free: libibverbs and the providers call some exports themselves with physical objects,
 * sometimes while the layer holds its locks (a swap opening the new device). A shadow context
 * is recognised by its poll_cq op, which is the layer's. */
HvContext *hv_ctx_of(struct ibv_context *c)
{
    if (!c || c->ops.poll_cq != hv_op_poll_cq)
        return NULL;
    return (HvContext *)((char *)c - offsetof(HvContext, vctx.context));
}

int hv_op_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    HvQp *qp = (HvQp *)ibqp;
    int r = 0;

    pthread_mutex_lock(&qp->lock);
    if (qp->await_peer || qp->suspend_until)
        hv_qp_await_expired(qp);
    if (qp->paused || !qp->phys || hv_ud_held(qp)) {
        /* Quiesced (or a UD peer moving): kept (with the program's virtual values) and posted
         * on resume. */
        for (struct ibv_send_wr *w = wr; w && !r; w = w->next) {
            r = hv_sendq_push(qp, w);
            if (r)
                *bad = w;
        }
    } else {
        r = hv_qp_post_send_phys(qp, wr, bad);
    }
    pthread_mutex_unlock(&qp->lock);
    return r;
}

static int hv_op_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    HvQp *qp = (HvQp *)ibqp;
    int r = 0;

    pthread_mutex_lock(&qp->lock);
    if (!qp->phys) {
        for (struct ibv_recv_wr *w = wr; w; w = w->next)
            hv_fifo_push(&qp->recvs, w); /* posted in order on resume */
    } else {
        r = hv_qp_post_recv_phys(qp, wr, bad);
    }
    pthread_mutex_unlock(&qp->lock);
    return r;
}

static int hv_op_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
                               struct ibv_recv_wr **bad)
{
    HvSrq *srq = (HvSrq *)ibsrq;
    int r = 0;

    pthread_mutex_lock(&srq->lock);
    if (srq->sb && (!srq->phys || srq->sb_recvs.n < srq->recvs.n)) {
        /* QPs of it run on the standby device: the side that holds fewer gets them */
        r = hv_srq_post_recv_sb(srq, wr, bad);
    } else if (!srq->phys) {
        for (struct ibv_recv_wr *w = wr; w; w = w->next)
            hv_fifo_push(&srq->recvs, w);
    } else {
        r = hv_srq_post_recv_phys(srq, wr, bad);
    }
    pthread_mutex_unlock(&srq->lock);
    return r;
}

static int hv_op_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
    HvCq *cq = (HvCq *)ibcq;
    int got = 0, r = 0;

    pthread_mutex_lock(&cq->lock);
    while (cq->n && got < n) {
        wc[got++] = cq->buf[cq->head];
        cq->head = (cq->head + 1) % cq->cap;
        cq->n--;
    }
    if (got < n)
        r = hv_poll_into(cq, n - got, wc + got);
    pthread_mutex_unlock(&cq->lock);
    if (r < 0)
        return got ? got : r;
    return got + r;
}

static int hv_op_req_notify_cq(struct ibv_cq *ibcq, int solicited)
{
    HvCq *cq = (HvCq *)ibcq;
    int r = 0, fire = 0;

    pthread_mutex_lock(&cq->lock);
    cq->armed = 1;
    cq->armed_solicited = solicited;
    if (cq->n && cq->chan) {
        /* completions the layer holds never raise a device event: raise one now */
        fire = 1;
        cq->armed = 0;
    } else {
        if (cq->phys)
            r = ibv_req_notify_cq(cq->phys, solicited);
        if (!r && cq->sb) /* either device's completion wakes the program */
            r = ibv_req_notify_cq(cq->sb, solicited);
    }
    pthread_mutex_unlock(&cq->lock);
    if (fire)
        hv_chan_signal(cq->chan, cq);
    return r;
}

static struct ibv_mw *hv_op_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
    (void)pd;
    (void)type;
    hv_unsupported("ibv_alloc_mw");
    return NULL;
}

static int hv_op_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *b)
{
    (void)qp;
    (void)mw;
    (void)b;
    return hv_unsupported("ibv_bind_mw");
}

static int hv_op_dealloc_mw(struct ibv_mw *mw)
{
    (void)mw;
    return hv_unsupported("ibv_dealloc_mw");
}

/* The data path's ops into @ctx's shadow context (ibv_open_device). */
void hv_ops_install(HvContext *ctx)
{
    struct ibv_context_ops *ops = &ctx->vctx.context.ops;

    ops->post_send = hv_op_post_send;
    ops->post_recv = hv_op_post_recv;
    ops->post_srq_recv = hv_op_post_srq_recv;
    ops->poll_cq = hv_op_poll_cq;
    ops->req_notify_cq = hv_op_req_notify_cq;
    ops->alloc_mw = hv_op_alloc_mw;
    ops->bind_mw = hv_op_bind_mw;
    ops->dealloc_mw = hv_op_dealloc_mw;
}
