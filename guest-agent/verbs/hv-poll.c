/* libhotmig-verbs, data path layer: completions: a physical poll with its accounting and
 * translation, the layer's own buffer of polled completions (drain), the shadow completion
 * channels. */
#include "hv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Accounts and translates @n completions just polled from the physical CQ (@sb: the standby
 * device's); drops the layer's fences and what a QP left behind when it changed devices.
 * Returns how many are left for the program. */
static int hv_wc_fix(HvCq *cq, int n, struct ibv_wc *wc, int sb)
{
    HvContext *ctx = cq->ctx;
    const HvMap *qpns = sb ? &ctx->sb_qpn : &ctx->qpn;
    int out = 0;

    for (int i = 0; i < n; i++) {
        struct ibv_wc *w = &wc[i];
        uint64_t v;
        HvQp *qp = NULL;
        int keep = 1;

        pthread_mutex_lock(&ctx->lock);
        if (hv_map_get(qpns, w->qp_num, &v))
            qp = (HvQp *)(uintptr_t)v;
        else if (hv_map_get(sb ? &ctx->sb_retired : &ctx->retired, w->qp_num, NULL))
            keep = 0; /* a QP's old physical QP (hv-standby.c): its receives were re-posted */
        pthread_mutex_unlock(&ctx->lock);
        if (qp) {
            pthread_mutex_lock(&qp->lock);
            if (w->status == IBV_WC_SUCCESS && (w->opcode & IBV_WC_RECV)) {
                qp->recv_done++;
                if (qp->on_sb || qp->switched)
                    qp->sb_recvs++;
                if (qp->srq) {
                    pthread_mutex_lock(&qp->srq->lock);
                    hv_fifo_consume(sb ? &qp->srq->sb_recvs : &qp->srq->recvs, w->wr_id);
                    pthread_mutex_unlock(&qp->srq->lock);
                } else {
                    hv_fifo_consume(&qp->recvs, w->wr_id);
                }
            } else if (w->status == IBV_WC_SUCCESS) {
                if (w->wr_id == HV_FENCE_WRID && qp->fence_out > 0) {
                    qp->fence_out--;
                    keep = 0;
                }
                if (qp->sig_out)
                    qp->sig_out--;
            } else if (!qp->srq && qp->recvs.n && qp->recvs.v[qp->recvs.head].wr_id == w->wr_id &&
                       cq == qp->rcq) {
                hv_fifo_consume(&qp->recvs, w->wr_id); /* a flushed receive */
            } else if (qp->sig_out) {
                qp->sig_out--;
                if (w->wr_id == HV_FENCE_WRID && qp->fence_out > 0) {
                    qp->fence_out--;
                    keep = 0;
                }
            }
            if (w->status == IBV_WC_RETRY_EXC_ERR && !qp->a_rtr.ah_attr.is_global)
                hv_log("QP %u: its peer QP %u at LID %u did not answer (retries exhausted): moved "
                       "without this QP being told its new LID?",
                       qp->pub.qp_num, qp->peer_vqpn, qp->a_rtr.ah_attr.dlid);
            w->qp_num = qp->pub.qp_num;
            if (qp->init.qp_type == IBV_QPT_UD && w->status == IBV_WC_SUCCESS &&
                (w->opcode & IBV_WC_RECV))
                w->src_qp = hv_ud_recv_qpn(w->src_qp); /* a moved peer's virtual number */
            if (qp->paused || hv.swapping)
                hv_progress_signal(); /* a drain (hv_qp_drain, the UD drain) waits for this */
            pthread_mutex_unlock(&qp->lock);
        }
        if (keep) {
            if (out != i)
                wc[out] = *w;
            out++;
        }
    }
    return out;
}

int hv_poll_into(HvCq *cq, int n, struct ibv_wc *wc)
{
    int r = 0, rs;

    if (n <= 0)
        return 0;
    if (cq->phys) {
        r = ibv_poll_cq(cq->phys, n, wc);
        if (r < 0)
            return r;
        r = hv_wc_fix(cq, r, wc, 0);
    }
    /* the standby device's CQ (a QP of ours runs there while its peer moves) */
    if (cq->sb && r < n) {
        rs = ibv_poll_cq(cq->sb, n - r, wc + r);
        if (rs < 0)
            return r ? r : rs;
        r += hv_wc_fix(cq, rs, wc + r, 1);
    }
    return r;
}

void hv_qp_cqs_pull(HvQp *qp)
{
    if (qp->scq)
        hv_cq_pull(qp->scq);
    if (qp->rcq && qp->rcq != qp->scq)
        hv_cq_pull(qp->rcq);
}

/* Moves what the physical CQ holds into the shadow buffer (drain, reset). Returns how many
 * completions were moved or a negative errno. */
int hv_cq_pull(HvCq *cq)
{
    struct ibv_wc tmp[32];
    int total = 0;

    pthread_mutex_lock(&cq->lock);
    for (;;) {
        int r = hv_poll_into(cq, 32, tmp);

        if (r < 0) {
            total = -EIO;
            break;
        }
        if (r == 0)
            break;
        if (cq->n + (size_t)r > cq->cap) {
            size_t cap = cq->cap ? cq->cap * 2 : 256;
            struct ibv_wc *b;

            while (cap < cq->n + (size_t)r)
                cap *= 2;
            b = malloc(cap * sizeof(*b));
            if (!b) {
                total = -ENOMEM;
                break;
            }
            for (size_t i = 0; i < cq->n; i++)
                b[i] = cq->buf[(cq->head + i) % cq->cap];
            free(cq->buf);
            cq->buf = b;
            cq->head = 0;
            cq->cap = cap;
        }
        for (int i = 0; i < r; i++)
            cq->buf[(cq->head + cq->n++) % cq->cap] = tmp[i];
        total += r;
    }
    pthread_mutex_unlock(&cq->lock);
    return total;
}

void hv_chan_signal(HvChan *ch, HvCq *cq)
{
    uint64_t one = 1;

    pthread_mutex_lock(&ch->lock);
    if (ch->n == ch->cap) {
        size_t cap = ch->cap ? ch->cap * 2 : 16;
        HvCq **e = malloc(cap * sizeof(*e));

        if (!e) {
            pthread_mutex_unlock(&ch->lock);
            hv_log("out of memory queueing a completion event");
            return;
        }
        for (size_t i = 0; i < ch->n; i++)
            e[i] = ch->events[(ch->head + i) % ch->cap];
        free(ch->events);
        ch->events = e;
        ch->head = 0;
        ch->cap = cap;
    }
    ch->events[(ch->head + ch->n++) % ch->cap] = cq;
    pthread_mutex_unlock(&ch->lock);
    if (write(ch->pub.fd, &one, sizeof(one)) < 0)
        hv_log("cannot signal a completion channel: %s", strerror(errno));
}

/* Wakes the program's armed CQs: their completions may sit in the layer's buffer. */
void hv_wake_cqs(HvContext *ctx, int all_armed)
{
    for (HvCq *cq = ctx->cqs; cq; cq = cq->next) {
        int fire = 0;

        pthread_mutex_lock(&cq->lock);
        if (cq->armed && cq->chan && (all_armed || cq->n)) {
            fire = 1;
            cq->armed = 0;
        }
        pthread_mutex_unlock(&cq->lock);
        if (fire)
            hv_chan_signal(cq->chan, cq);
    }
}
