/* libhotmig-verbs, swap layer: a peer's loopback connections on the standby path. A QP that
 * switches for its moving peer may share its SRQ with loopback QPs, both ends in this process
 * (UCX's rc_verbs endpoint of a rank to itself): both ends follow it onto the standby device,
 * so that the SRQ and its receives can (hv_srq_gather), and come back once the moving peer's
 * last QP of that context is back (docs/design.md "Standby path"). */
#include "hv.h"

#include <errno.h>
#include <string.h>

#define HV_SBL_MAX 64         /* QPs that follow one switch */
#define HV_SBL_DRAIN_MS 5000  /* a loopback pair's drain: both ends are ours, it is quick */

typedef struct {
    HvQp *qp[HV_SBL_MAX];
    size_t peer[HV_SBL_MAX]; /* the index of each one's other end */
    uint32_t psn[HV_SBL_MAX]; /* each one's send PSN on the device it goes to */
    size_t n;
} HvSbLoop;

static size_t hv_sbl_index(const HvSbLoop *l, const HvQp *qp)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->qp[i] == qp)
            return i;
    return l->n;
}

/* @qp into @l, held (ibv_destroy_qp waits): its index, or l->n when full. hv.lock held. */
static size_t hv_sbl_add(HvSbLoop *l, HvContext *ctx, HvQp *qp)
{
    size_t i = hv_sbl_index(l, qp);

    if (i < l->n || l->n == HV_SBL_MAX)
        return i;
    pthread_mutex_lock(&ctx->lock);
    atomic_fetch_add(&qp->refs, 1); /* under ctx->lock, as hv_qp_hold */
    pthread_mutex_unlock(&ctx->lock);
    l->qp[l->n] = qp;
    l->psn[l->n] = hv_psn();
    return l->n++;
}

/* @o's other end when it is a QP of @ctx connected back to it (a loopback connection on this
 * device), else NULL. hv.lock held. */
static HvQp *hv_sbl_partner(HvContext *ctx, HvQp *o)
{
    union ibv_gid gid;
    uint16_t lid = 0;

    if (!o->phys || (o->state != IBV_QPS_RTR && o->state != IBV_QPS_RTS) ||
        hv_own_addr(o, &gid, &lid) < 0)
        return NULL;
    for (HvQp *p = ctx->qps; p; p = p->next)
        if (p->pub.qp_num == o->peer_vqpn && p->phys && hv_peer_is_local(o, p, &gid, lid))
            return p;
    return NULL;
}

/* Collects into @l the loopback QPs (both ends) that share @qp's SRQ and must follow it onto
 * the standby device; NULL, or a QP of the SRQ that stays and cannot (its peer is elsewhere,
 * or it is not connected), which refuses the switch. hv.lock held. */
static const HvQp *hv_sbl_collect(HvContext *ctx, const HvQp *qp, const uint8_t from[16], HvSbLoop *l)
{
    l->n = 0;
    if (!qp->srq)
        return NULL;
    for (HvQp *o = ctx->qps; o; o = o->next) {
        HvQp *p;
        size_t i, j;

        if (o == qp || o->srq != qp->srq || o->on_sb || hv_qp_from(o, from))
            continue;
        p = hv_sbl_partner(ctx, o);
        if (!p || p->on_sb)
            return o;
        i = hv_sbl_add(l, ctx, o);
        j = hv_sbl_add(l, ctx, p);
        if (i == l->n || j == l->n)
            return o; /* more than HV_SBL_MAX */
        l->peer[i] = j;
        l->peer[j] = i;
    }
    return NULL;
}

static void hv_sbl_release(HvSbLoop *l)
{
    for (size_t i = 0; i < l->n; i++)
        hv_qp_release(l->qp[i]);
    l->n = 0;
}

/* Every QP of @l paused, then drained: its sends completed and its other end's sends received.
 * 0 or -ETIMEDOUT (then unpaused again). */
static int hv_sbl_drain(HvSbLoop *l)
{
    int64_t deadline = hv_now_ms() + HV_SBL_DRAIN_MS;
    int r = 0;

    for (size_t i = 0; i < l->n; i++) {
        HvQp *qp = l->qp[i];

        pthread_mutex_lock(&qp->lock);
        hv_qp_sendq_ready(qp);
        qp->paused = 1;
        qp->paused_at = hv_now_ms();
        pthread_mutex_unlock(&qp->lock);
    }
    for (size_t i = 0; i < l->n && !r; i++) {
        HvQp *other = l->qp[l->peer[i]];
        uint64_t sent;

        pthread_mutex_lock(&other->lock);
        sent = other->sent_msgs;
        pthread_mutex_unlock(&other->lock);
        r = hv_qp_drain(l->qp[i], sent, deadline);
    }
    if (r)
        for (size_t i = 0; i < l->n; i++)
            hv_qp_unpause(l->qp[i]);
    return r;
}

/* @qp (drained) onto the standby device (@to_sb) or back: a new physical QP there in INIT, its
 * own recorded receives re-posted (an SRQ's follow with hv_srq_gather). 0 or an errno. */
static int hv_sbl_move(HvQp *qp, int to_sb)
{
    int r = 0;

    hv_qp_cqs_pull(qp);
    if (to_sb) {
        pthread_mutex_lock(&hv.lock);
        r = hv_sb_prepare(qp);
        pthread_mutex_unlock(&hv.lock);
    }
    pthread_mutex_lock(&qp->lock);
    if (!r)
        r = hv_sb_qp_move(qp, to_sb);
    if (!r && !qp->srq)
        r = -hv_repost(&qp->recvs, qp, NULL);
    pthread_mutex_unlock(&qp->lock);
    return r < 0 ? -r : r;
}

/* @l's QP @i (moved) connected to its other end's new QP: RTR with its PSN, RTS with its own,
 * the other end's rkeys on that device. 0 or an errno. */
static int hv_sbl_connect(HvSbLoop *l, size_t i, int to_sb, const union ibv_gid *sgid,
                          uint8_t sidx)
{
    HvQp *qp = l->qp[i], *other = l->qp[l->peer[i]];
    HvContext *ctx = qp->pd->ctx;
    struct ibv_qp_attr a;
    union ibv_gid gid;
    uint16_t lid = 0;
    int r = 0;

    if (to_sb)
        hv_sb_rtr_attr(ctx->sb, &qp->a_rtr, sgid->raw, sidx, other->phys->qp_num,
                       l->psn[l->peer[i]], &a);
    else if (!(r = -hv_own_addr(qp, &gid, &lid))) {
        hv_local_rtr(qp, other->phys->qp_num, &gid, lid, &a);
        a.rq_psn = l->psn[l->peer[i]];
    }
    pthread_mutex_lock(&qp->lock);
    if (!r)
        r = hv_qp_connect(qp, &a, l->psn[i]);
    if (!r) {
        qp->peer_pqpn = other->phys->qp_num;
        qp->sb_loop = to_sb;
        hv_local_rkeys(qp, ctx, to_sb);
    }
    pthread_mutex_unlock(&qp->lock);
    return r;
}

/* @l's QPs (drained) onto the standby device or back, reconnected to each other there, and
 * unpaused. 0 or the first errno (those it could not move stay paused, logged). */
static int hv_sbl_run(HvContext *ctx, HvSbLoop *l, int to_sb)
{
    union ibv_gid sgid;
    uint8_t sidx = 0;
    int r = to_sb ? hv_sb_gid(ctx->sb, &sgid, &sidx) : 0;

    for (size_t i = 0; i < l->n && !r; i++)
        r = hv_sbl_move(l->qp[i], to_sb);
    for (size_t i = 0; i < l->n && !r; i++)
        r = hv_sbl_connect(l, i, to_sb, &sgid, sidx);
    if (r) {
        hv_log("the loopback QPs sharing an SRQ with a moving peer's QP could not move %s: %s "
               "(they stay paused)",
               to_sb ? "to the standby device" : "back to their own device", strerror(r));
        return r;
    }
    for (size_t i = 0; i < l->n; i++)
        hv_qp_unpause(l->qp[i]);
    hv_log("%zu loopback QPs %s in %lld ms", l->n,
           to_sb ? "followed onto the standby device" : "came back to their own device",
           (long long)(hv_now_ms() - l->qp[0]->paused_at));
    return 0;
}

const HvQp *hv_sb_loop_keeps(HvContext *ctx, const HvQp *qp, const uint8_t from[16])
{
    HvSbLoop l;
    const HvQp *keeps;

    pthread_mutex_lock(&hv.lock);
    keeps = hv_sbl_collect(ctx, qp, from, &l);
    pthread_mutex_unlock(&hv.lock);
    hv_sbl_release(&l);
    return keeps;
}

int hv_sb_loop_follow(HvContext *ctx, const HvQp *qp, const uint8_t from[16], const HvQp **keeps)
{
    HvSbLoop l;
    int r;

    pthread_mutex_lock(&hv.lock);
    *keeps = hv_sbl_collect(ctx, qp, from, &l);
    pthread_mutex_unlock(&hv.lock);
    if (*keeps || !l.n) {
        hv_sbl_release(&l);
        return *keeps ? EOPNOTSUPP : 0;
    }
    r = -hv_sbl_drain(&l);
    if (!r)
        r = hv_sbl_run(ctx, &l, 1);
    hv_sbl_release(&l);
    return r;
}

void hv_sb_loop_back(HvContext *ctx)
{
    HvSbLoop l = {.n = 0};

    pthread_mutex_lock(&hv.lock);
    for (HvQp *o = ctx->qps; o; o = o->next)
        if (o->on_sb && !o->sb_loop) { /* a moving peer's QP is still there */
            pthread_mutex_unlock(&hv.lock);
            return;
        }
    for (HvQp *o = ctx->qps; o; o = o->next) {
        HvQp *p = NULL;
        size_t i, j;

        if (!o->sb_loop || !o->on_sb)
            continue;
        for (HvQp *c = ctx->qps; c && !p; c = c->next)
            if (c->sb_loop && c->on_sb && c->pub.qp_num == o->peer_vqpn)
                p = c;
        if (!p)
            continue;
        i = hv_sbl_add(&l, ctx, o);
        j = hv_sbl_add(&l, ctx, p);
        if (i == l.n || j == l.n)
            break; /* more than HV_SBL_MAX: those stay (cannot happen: at most as followed) */
        l.peer[i] = j;
        l.peer[j] = i;
    }
    pthread_mutex_unlock(&hv.lock);
    if (l.n && !hv_sbl_drain(&l))
        hv_sbl_run(ctx, &l, 0);
    else if (l.n)
        hv_log("%zu loopback QPs stay on the standby device: they did not drain", l.n);
    hv_sbl_release(&l);
}
