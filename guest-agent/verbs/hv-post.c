/* libhotmig-verbs, data path layer: posting on the physical objects: the receive FIFOs, the room
 * for translated copies (HvScratch), the sends and receives posted translated, the queue of sends
 * posted while a QP is paused. */
#include "hv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Makes room in @f for @cap receives of @sge_per SGEs each, keeping those recorded in order
 * (control path: the QP's or SRQ's creation; on the data path only when the program posts
 * past the capacity the device reported). 0 or ENOMEM, @f unchanged then. */
int hv_fifo_reserve(HvRecvFifo *f, size_t cap, int sge_per)
{
    HvRecv *v;
    struct ibv_sge *sges;

    if (cap < f->cap)
        cap = f->cap;
    if (sge_per < f->sge_per)
        sge_per = f->sge_per;
    if (cap < 16)
        cap = 16;
    if (sge_per < 1)
        sge_per = 1;
    if (cap == f->cap && sge_per == f->sge_per)
        return 0;
    v = calloc(cap, sizeof(*v));
    sges = calloc(cap * (size_t)sge_per, sizeof(*sges));
    if (!v || !sges) {
        free(v);
        free(sges);
        return ENOMEM;
    }
    for (size_t i = 0; i < cap; i++)
        v[i].sge = sges + i * (size_t)sge_per;
    for (size_t i = 0; i < f->n; i++) {
        const HvRecv *o = &f->v[(f->head + i) % f->cap];

        v[i].wr_id = o->wr_id;
        v[i].num_sge = o->num_sge;
        memcpy(v[i].sge, o->sge, sizeof(*o->sge) * (size_t)o->num_sge);
    }
    free(f->v);
    free(f->sges);
    f->v = v;
    f->sges = sges;
    f->head = 0;
    f->cap = cap;
    f->sge_per = sge_per;
    return 0;
}

void hv_fifo_push(HvRecvFifo *f, const struct ibv_recv_wr *wr)
{
    int nsge = wr->num_sge > 0 ? wr->num_sge : 0;
    HvRecv *r;

    if ((f->n == f->cap || nsge > f->sge_per) &&
        hv_fifo_reserve(f, f->n == f->cap ? f->cap * 2 : f->cap, nsge)) {
        hv_log("out of memory recording a receive: it will not survive a migration");
        return;
    }
    r = &f->v[(f->head + f->n) % f->cap];
    r->wr_id = wr->wr_id;
    r->num_sge = nsge;
    memcpy(r->sge, wr->sg_list, sizeof(*r->sge) * (size_t)nsge);
    f->n++;
}

/* Removes the receive @wr_id completed: the head for a QP's own queue, searched for an SRQ. */
void hv_fifo_consume(HvRecvFifo *f, uint64_t wr_id)
{
    size_t i;

    if (!f->n)
        return;
    if (f->v[f->head].wr_id == wr_id) {
        f->head = (f->head + 1) % f->cap;
        f->n--;
        return;
    }
    for (i = 1; i < f->n; i++)
        if (f->v[(f->head + i) % f->cap].wr_id == wr_id)
            break;
    if (i == f->n)
        return;
    for (; i + 1 < f->n; i++) {
        HvRecv tmp = f->v[(f->head + i) % f->cap];

        f->v[(f->head + i) % f->cap] = f->v[(f->head + i + 1) % f->cap];
        f->v[(f->head + i + 1) % f->cap] = tmp;
    }
    f->n--;
}

void hv_fifo_free(HvRecvFifo *f)
{
    free(f->v);
    free(f->sges);
    memset(f, 0, sizeof(*f));
}

static uint32_t hv_lkey_p(const HvMap *lkeys, uint32_t v)
{
    uint64_t p;

    return hv_map_get(lkeys, v, &p) ? (uint32_t)p : v;
}

/* The lkeys @qp's physical QP takes: the standby registrations' while it runs there. */
static const HvMap *hv_qp_lkeys(const HvQp *qp)
{
    return qp->on_sb ? &qp->pd->ctx->sb_lkey : &qp->pd->ctx->lkey;
}

/* Makes @x hold @nwr work requests of @wr_size bytes and @nsge SGEs (its owner's lock held). */
int hv_scratch_reserve(HvScratch *x, size_t nwr, size_t wr_size, size_t nsge)
{
    if (nwr > x->wr_cap) {
        void *p = realloc(x->wr, nwr * wr_size);

        if (!p)
            return ENOMEM;
        x->wr = p;
        x->wr_cap = nwr;
    }
    if (nsge > x->sge_cap) {
        void *p = realloc(x->sge, nsge * sizeof(*x->sge));

        if (!p)
            return ENOMEM;
        x->sge = p;
        x->sge_cap = nsge;
    }
    return 0;
}

void hv_scratch_free(HvScratch *x)
{
    free(x->wr);
    free(x->sge);
    memset(x, 0, sizeof(*x));
}

static int hv_send_counts(const struct ibv_send_wr *wr, size_t *nwr, size_t *nsge)
{
    *nwr = *nsge = 0;
    for (; wr; wr = wr->next) {
        if (wr->num_sge < 0)
            return EINVAL;
        (*nwr)++;
        *nsge += (size_t)wr->num_sge;
    }
    return 0;
}

static void hv_send_account(HvQp *qp, struct ibv_send_wr *wr, struct ibv_send_wr *stop)
{
    for (; wr && wr != stop; wr = wr->next) {
        if (qp->on_sb || qp->switched)
            qp->sb_sends++; /* carried by the standby path (the move's report) */
        if ((wr->send_flags & IBV_SEND_SIGNALED) || qp->init.sq_sig_all) {
            qp->sig_out++;
            qp->unsig_tail = 0;
        } else {
            qp->unsig_tail = 1;
        }
        if (wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_SEND_WITH_IMM ||
            wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM || wr->opcode == IBV_WR_SEND_WITH_INV)
            qp->sent_msgs++;
    }
}

/* Posts on the physical QP, translating what the current device numbers differently. Called
 * with the QP lock held and qp->phys set. */
int hv_qp_post_send_phys(HvQp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    HvContext *ctx = qp->pd->ctx;
    int ud = qp->init.qp_type == IBV_QPT_UD;
    struct ibv_send_wr *pbad = NULL, *w, *swr;
    struct ibv_sge *sge;
    size_t nwr, nsge, i = 0, s = 0;
    int r;

    if (!ctx->swapped && !ud && !qp->on_sb && qp->peer_rkeys.n == 0) {
        r = ibv_post_send(qp->phys, wr, bad);
        hv_send_account(qp, wr, r ? *bad : NULL);
        return r;
    }
    r = hv_send_counts(wr, &nwr, &nsge);
    if (!r)
        r = hv_scratch_reserve(&qp->xs, nwr, sizeof(*swr), nsge);
    if (r) {
        *bad = wr;
        return r;
    }
    swr = qp->xs.wr;
    sge = qp->xs.sge;
    for (w = wr; w; w = w->next, i++) {
        struct ibv_send_wr *t = &swr[i];
        uint64_t v;

        *t = *w;
        t->next = w->next ? &swr[i + 1] : NULL;
        t->sg_list = &sge[s];
        for (int k = 0; k < w->num_sge; k++) {
            sge[s] = w->sg_list[k];
            if (!(w->send_flags & IBV_SEND_INLINE))
                sge[s].lkey = hv_lkey_p(hv_qp_lkeys(qp), w->sg_list[k].lkey);
            s++;
        }
        switch (w->opcode) {
        case IBV_WR_RDMA_WRITE:
        case IBV_WR_RDMA_WRITE_WITH_IMM:
        case IBV_WR_RDMA_READ:
            if (hv_map_get(&qp->peer_rkeys, w->wr.rdma.rkey, &v))
                t->wr.rdma.rkey = (uint32_t)v;
            break;
        case IBV_WR_ATOMIC_CMP_AND_SWP:
        case IBV_WR_ATOMIC_FETCH_AND_ADD:
            if (hv_map_get(&qp->peer_rkeys, w->wr.atomic.rkey, &v))
                t->wr.atomic.rkey = (uint32_t)v;
            break;
        default:
            break;
        }
        if (ud && w->wr.ud.ah) {
            HvAh *ah = (HvAh *)w->wr.ud.ah;

            t->wr.ud.ah = ah->phys ? ah->phys : hv_ah_phys(ah);
            if (!t->wr.ud.ah) { /* the peer is still away: a clear failure, nothing posted */
                *bad = w;
                return errno;
            }
            /* the peer may have moved: its QP has a new number (UDMAP) */
            t->wr.ud.remote_qpn = hv_ud_send_qpn(ah, w->wr.ud.remote_qpn);
            hv_ud_count_send(qp, ah);
        }
    }
    r = ibv_post_send(qp->phys, swr, &pbad);
    if (r) {
        /* the same position in the program's chain */
        struct ibv_send_wr *t = swr;

        *bad = wr;
        while (pbad && t && t != pbad && *bad) {
            t = t->next;
            *bad = (*bad)->next;
        }
    }
    hv_send_account(qp, wr, r ? *bad : NULL);
    return r;
}

static int hv_recv_translate(const HvMap *lkeys, HvScratch *x, struct ibv_recv_wr *wr,
                             struct ibv_recv_wr **out)
{
    struct ibv_recv_wr *rwr;
    struct ibv_sge *sge;
    size_t nwr = 0, nsge = 0, i = 0, s = 0;
    struct ibv_recv_wr *w;
    int r;

    for (w = wr; w; w = w->next) {
        if (w->num_sge < 0)
            return EINVAL;
        nwr++;
        nsge += (size_t)w->num_sge;
    }
    r = hv_scratch_reserve(x, nwr, sizeof(*rwr), nsge);
    if (r)
        return r;
    rwr = x->wr;
    sge = x->sge;
    for (w = wr; w; w = w->next, i++) {
        struct ibv_recv_wr *t = &rwr[i];

        *t = *w;
        t->next = w->next ? &rwr[i + 1] : NULL;
        t->sg_list = &sge[s];
        for (int k = 0; k < w->num_sge; k++) {
            sge[s] = w->sg_list[k];
            sge[s].lkey = hv_lkey_p(lkeys, w->sg_list[k].lkey);
            s++;
        }
    }
    *out = rwr;
    return 0;
}

static struct ibv_recv_wr *hv_recv_bad(struct ibv_recv_wr *wr, struct ibv_recv_wr *tr,
                                       struct ibv_recv_wr *pbad)
{
    while (tr && pbad && tr != pbad && wr) {
        tr = tr->next;
        wr = wr->next;
    }
    return wr;
}

/* Posts receives on the physical QP (@pqp) or SRQ (@psrq), translated when the device was
 * swapped, and records the accepted ones in @fifo. The owner's lock is held. */
static int hv_post_recv_phys(HvContext *ctx, const HvMap *lkeys, HvRecvFifo *fifo, HvScratch *x,
                             struct ibv_qp *pqp, struct ibv_srq *psrq, struct ibv_recv_wr *wr,
                             struct ibv_recv_wr **bad)
{
    struct ibv_recv_wr *tr = wr, *pbad = NULL, *w;
    int r = 0;

    if (ctx->swapped || lkeys != &ctx->lkey)
        r = hv_recv_translate(lkeys, x, wr, &tr);
    if (r) {
        *bad = wr;
        return r;
    }
    r = pqp ? ibv_post_recv(pqp, tr, &pbad) : ibv_post_srq_recv(psrq, tr, &pbad);
    *bad = r ? (tr == wr ? pbad : hv_recv_bad(wr, tr, pbad)) : NULL;
    for (w = wr; w && w != *bad; w = w->next)
        hv_fifo_push(fifo, w);
    return r;
}

/* A receive queue's (a QP's own or an SRQ's) room, made at its creation for as many receives
 * as the device takes: recording them (@f) and translating them (@x) do not allocate (hv.h). */
int hv_recvs_reserve(HvRecvFifo *f, HvScratch *x, uint32_t max_wr, uint32_t max_sge)
{
    int r = hv_fifo_reserve(f, max_wr, (int)max_sge);

    return r ? r
             : hv_scratch_reserve(x, max_wr, sizeof(struct ibv_recv_wr), (size_t)max_wr * max_sge);
}

int hv_qp_post_recv_phys(HvQp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    return hv_post_recv_phys(qp->pd->ctx, hv_qp_lkeys(qp), &qp->recvs, &qp->xr, qp->phys, NULL, wr,
                             bad);
}

int hv_srq_post_recv_phys(HvSrq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    return hv_post_recv_phys(srq->pd->ctx, &srq->pd->ctx->lkey, &srq->recvs, &srq->xr, NULL,
                             srq->phys, wr, bad);
}

int hv_srq_post_recv_sb(HvSrq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    return hv_post_recv_phys(srq->pd->ctx, &srq->pd->ctx->sb_lkey, &srq->sb_recvs, &srq->xr, NULL,
                             srq->sb, wr, bad);
}

int hv_recvs_move(const HvMap *lkeys, HvRecvFifo *from, HvRecvFifo *to, struct ibv_srq *dst)
{
    while (from->n) {
        HvRecv *rv = &from->v[from->head];
        struct ibv_sge sge[32];
        struct ibv_recv_wr wr = {0}, *bad = NULL;
        int r;

        if (rv->num_sge > 32)
            return EINVAL;
        for (int k = 0; k < rv->num_sge; k++) {
            sge[k] = rv->sge[k];
            sge[k].lkey = hv_lkey_p(lkeys, rv->sge[k].lkey);
        }
        wr.wr_id = rv->wr_id;
        wr.sg_list = sge;
        wr.num_sge = rv->num_sge;
        r = dst ? ibv_post_srq_recv(dst, &wr, &bad) : 0;
        if (r)
            return r;
        wr.sg_list = rv->sge; /* recorded with the program's keys, as it posted them */
        hv_fifo_push(to, &wr);
        from->head = (from->head + 1) % from->cap;
        from->n--;
    }
    return 0;
}

/* Sizes @qp's queue of paused sends from its capacities (control path: quiesce, SUSPEND, a UD
 * hold). Kept once made: the next swap needs the same. */
int hv_sendq_reserve(HvQp *qp)
{
    HvSendQueue *q = &qp->queued;
    size_t cap = qp->init.cap.max_send_wr ? qp->init.cap.max_send_wr : 1;
    int sge_per = qp->init.cap.max_send_sge ? (int)qp->init.cap.max_send_sge : 1;
    size_t inl_per = qp->init.cap.max_inline_data;

    if (q->cap)
        return 0;
    q->v = calloc(cap, sizeof(*q->v));
    q->sges = calloc(cap * (size_t)sge_per, sizeof(*q->sges));
    q->inl = inl_per ? calloc(cap, inl_per) : NULL;
    if (!q->v || !q->sges || (inl_per && !q->inl)) {
        hv_sendq_free(q);
        return ENOMEM;
    }
    for (size_t i = 0; i < cap; i++) {
        q->v[i].sge = q->sges + i * (size_t)sge_per;
        q->v[i].inl = q->inl ? q->inl + i * inl_per : NULL;
    }
    q->cap = cap;
    q->sge_per = sge_per;
    q->inl_per = inl_per;
    return 0;
}

/* Queues @w (alone) with the program's values, its inline data copied now (the program may
 * reuse the buffer). What the device would refuse is refused: more SGEs or inline bytes than
 * the QP takes (EINVAL), more sends than its queue holds (ENOMEM). */
int hv_sendq_push(HvQp *qp, const struct ibv_send_wr *w)
{
    HvSendQueue *q = &qp->queued;
    HvSendWr *e;
    size_t total = 0;

    if (!q->cap && hv_sendq_reserve(qp)) /* not paused through the control path: rare */
        return ENOMEM;
    if (w->num_sge < 0 || w->num_sge > q->sge_per)
        return EINVAL;
    if (w->send_flags & IBV_SEND_INLINE) {
        for (int k = 0; k < w->num_sge; k++)
            total += w->sg_list[k].length;
        if (total > q->inl_per)
            return EINVAL;
    }
    if (q->n == q->cap)
        return ENOMEM;
    e = &q->v[(q->head + q->n) % q->cap];
    e->wr = *w;
    e->wr.next = NULL;
    e->wr.sg_list = w->num_sge ? e->sge : NULL;
    memcpy(e->sge, w->sg_list, sizeof(*e->sge) * (size_t)w->num_sge);
    if (w->send_flags & IBV_SEND_INLINE) {
        char *data = e->inl;

        for (int k = 0; k < w->num_sge; k++) {
            memcpy(data, (void *)(uintptr_t)w->sg_list[k].addr, w->sg_list[k].length);
            e->sge[k].addr = (uintptr_t)data;
            data += w->sg_list[k].length;
        }
    }
    q->n++;
    return 0;
}

void hv_sendq_free(HvSendQueue *q)
{
    free(q->v);
    free(q->sges);
    free(q->inl);
    memset(q, 0, sizeof(*q));
}
