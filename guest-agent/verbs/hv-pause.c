/* libhotmig-verbs, data path layer: a paused QP: the drain fence, the queued sends flushed, the
 * pause lifted, a peer that did not reconnect in time, UD sends held while a peer moves. */
#include "hv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Posts a signaled zero-length RDMA WRITE after an unsignaled tail: its completion says every
 * earlier send completed. QP lock held. */
int hv_qp_fence(HvQp *qp)
{
    struct ibv_send_wr wr = {0}, *bad = NULL;
    int r;

    if (!qp->phys || qp->init.qp_type == IBV_QPT_UD) {
        qp->unsig_tail = 0;
        return 0;
    }
    wr.wr_id = HV_FENCE_WRID;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    r = ibv_post_send(qp->phys, &wr, &bad);
    if (r) {
        hv_log("cannot post the drain fence on QP %u: %s", qp->pub.qp_num, strerror(r));
        qp->unsig_tail = 0; /* wait for the signaled ones only */
        return r;
    }
    qp->fence_out++;
    qp->sig_out++;
    qp->unsig_tail = 0;
    return 0;
}

int hv_qp_modify(HvQp *qp, struct ibv_qp_attr *a, int mask)
{
    int r = hv_real.r_ibv_modify_qp(qp->phys, a, mask);

    if (r)
        hv_log("QP %u: modify to state %d failed: %s", qp->pub.qp_num, a->qp_state, strerror(r));
    return r;
}

int hv_qp_connect(HvQp *qp, struct ibv_qp_attr *rtr, uint32_t sq_psn)
{
    struct ibv_qp_attr a;
    int r = hv_qp_modify(qp, rtr, qp->m_rtr);

    if (!r && qp->m_rts) {
        a = qp->a_rts;
        a.sq_psn = sq_psn;
        r = hv_qp_modify(qp, &a, qp->m_rts);
    }
    if (!r)
        qp->state = qp->m_rts ? IBV_QPS_RTS : IBV_QPS_RTR;
    return r;
}

int hv_qp_await_expired(HvQp *qp)
{
    struct ibv_qp_attr a;

    int64_t now = hv_now_ms();
    int suspended = qp->suspend_until && qp->paused && now >= qp->suspend_until;

    if (!suspended && (!qp->await_peer || now < qp->await_until))
        return 0;
    if (suspended)
        hv_log("QP %u: its peer QP %u suspended it and did not reconnect within %lld s: the QP "
               "is put in the error state",
               qp->pub.qp_num, qp->peer_vqpn,
               (long long)(qp->suspend_until - qp->paused_at) / 1000);
    else
        hv_log("QP %u: its peer QP %u, moving too, did not reconnect within %d s: the QP is put "
               "in the error state",
               qp->pub.qp_num, qp->peer_vqpn, HV_AWAIT_PEER_MS / 1000);
    qp->await_peer = 0;
    qp->suspend_until = 0;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_ERR;
    if (qp->phys && hv_qp_modify(qp, &a, IBV_QP_STATE) == 0)
        qp->state = IBV_QPS_ERR;
    qp->paused = 0;
    if (qp->phys)
        hv_qp_flush_queued(qp); /* they complete with IBV_WC_WR_FLUSH_ERR */
    return 1;
}

void hv_qp_unpause(HvQp *qp)
{
    pthread_mutex_lock(&qp->lock);
    if (qp->await_peer) { /* its peer, moving too, reconnects it (hv_on_reconnect unpauses) */
        pthread_mutex_unlock(&qp->lock);
        return;
    }
    qp->paused = 0;
    qp->suspend_until = 0;
    if (qp->phys)
        hv_qp_flush_queued(qp);
    pthread_mutex_unlock(&qp->lock);
}

/* Before a QP is paused or held: its queue of paused sends exists, so that the program's
 * posts meanwhile do not allocate (hv.h). QP lock held. */
void hv_qp_sendq_ready(HvQp *qp)
{
    if (hv_sendq_reserve(qp))
        hv_log("QP %u: no memory for the sends it queues while paused (%u)", qp->pub.qp_num,
               qp->init.cap.max_send_wr);
}

/* Posts what the program posted while the QP was paused. QP lock held. */
void hv_qp_flush_queued(HvQp *qp)
{
    HvSendQueue *q = &qp->queued;

    while (q->n) {
        HvSendWr *e = &q->v[q->head];
        struct ibv_send_wr *bad = NULL;
        int r;

        q->head = (q->head + 1) % q->cap;
        q->n--;
        r = hv_qp_post_send_phys(qp, &e->wr, &bad);
        if (r)
            hv_log("a send queued during the swap could not be posted on QP %u: %s", qp->pub.qp_num,
                   strerror(r));
    }
}

int hv_ud_held(HvQp *qp)
{
    if (!qp->ud_held_until)
        return 0;
    if (hv_now_ms() < qp->ud_held_until)
        return 1;
    hv_log("UD QP %u: a moving peer did not say where it went within %d s: its held sends go to "
           "its old address",
           qp->pub.qp_num, HV_UD_HOLD_MS / 1000);
    qp->ud_held_until = 0;
    if (!qp->paused && qp->phys)
        hv_qp_flush_queued(qp);
    return 0;
}
