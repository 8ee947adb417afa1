/* libhotmig-verbs, swap layer: the peer's side of a swap: the handlers of peer requests (SUSPEND,
 * RECONNECT, KEYMAP, LOOKUP, UDHOLD, UDMAP). */
#include "hv.h"
#include "hv-proto.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HV_PEER_RKEYS_MAX 4096      /* a connected peer's translated rkeys (KEYMAP adds) */
#define HV_SUSPEND_MAX_MS 300000    /* a QP a peer suspended: its RECONNECT due within */

/* A refused request: answered ERROR with the reason, which the layer's log names too. */
static int hv_refuse(HvMsg *rep, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int hv_refuse(HvMsg *rep, int err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(rep->text, sizeof(rep->text), fmt, ap);
    va_end(ap);
    rep->type = HV_MSG_ERROR;
    hv_log("a peer's request refused: %s", rep->text);
    return -err;
}

static void hv_gid_hex(const uint8_t gid[16], char out[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", gid[i]);
}


/* A UD peer of this process: a GID one of its UD QPs sent to (hv.lock not held). */
static int hv_ud_peer_known(const uint8_t gid[16])
{
    int found = 0;

    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx && !found; ctx = ctx->next)
        for (HvQp *qp = ctx->qps; qp && !found; qp = qp->next) {
            if (qp->init.qp_type != IBV_QPT_UD)
                continue;
            pthread_mutex_lock(&qp->lock);
            found = hv_ud_set_find(&qp->ud_sent, gid, 0) != NULL;
            pthread_mutex_unlock(&qp->lock);
        }
    pthread_mutex_unlock(&hv.lock);
    return found;
}

/* Ends the holds a UD peer at @gid asked for (its UDMAP came): the held sends go, translated. */
static void hv_ud_release(const uint8_t gid[16]) /* hv.lock held */
{
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next)
        for (HvQp *qp = ctx->qps; qp; qp = qp->next) {
            pthread_mutex_lock(&qp->lock);
            if (qp->ud_held_until && !memcmp(qp->ud_held_gid, gid, 16)) {
                qp->ud_held_until = 0;
                if (!qp->paused && qp->phys)
                    hv_qp_flush_queued(qp);
            }
            pthread_mutex_unlock(&qp->lock);
        }
}

/* The peer's side of UDHOLD: every UD QP of this process that sent to the mover's GID (and the
 * QP named) queues its sends until the mover's UDMAP (or HV_UD_HOLD_MS); the reply counts what
 * each sent to that GID so far, which the mover waits to have received before it goes. */
static int hv_on_udhold(const HvMsg *m, const uint8_t from[16], HvQp *target, HvMsg *rep)
{
    int64_t now = hv_now_ms(), until = now + HV_UD_HOLD_MS;
    char g[33];

    if (!target || target->init.qp_type != IBV_QPT_UD)
        return hv_refuse(rep, ENOENT, "QP %u is not a UD QP", m->target);
    hv_gid_hex(m->gid, g);
    /* a mover holds only what is sent to itself, and only a peer this process sends to */
    if (memcmp(m->gid, from, 16) || !hv_ud_peer_known(m->gid))
        return hv_refuse(rep, EPERM, "UDHOLD %u for GID %s: not from a UD peer of this process",
                         m->target, g);
    rep->type = HV_MSG_UDHELD;
    rep->nkeys = 0;
    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next)
        for (HvQp *qp = ctx->qps; qp; qp = qp->next) {
            HvUdEntry *sent;

            if (qp->init.qp_type != IBV_QPT_UD)
                continue;
            pthread_mutex_lock(&qp->lock);
            sent = hv_ud_set_find(&qp->ud_sent, m->gid, 0);
            /* a hold in force is not extended: a mover sends one UDHOLD per move */
            if ((qp == target || sent) &&
                !(qp->ud_held_until > now && !memcmp(qp->ud_held_gid, m->gid, 16))) {
                hv_qp_sendq_ready(qp);
                qp->ud_held_until = until;
                memcpy(qp->ud_held_gid, m->gid, 16);
            }
            if (sent && qp->phys && rep->nkeys < HV_PROTO_UDQPS_MAX)
                rep->keys[rep->nkeys++] = (HvKeyPair){qp->phys->qp_num, sent->n};
            pthread_mutex_unlock(&qp->lock);
        }
    pthread_mutex_unlock(&hv.lock);
    hv_debug("UD: a peer moves: sends to it held, %u of our UD QPs sent to it", rep->nkeys);
    return 0;
}

static int hv_on_udmap(const HvMsg *m, const uint8_t from[16], HvQp *qp, HvMsg *rep)
{
    uint32_t v[HV_PROTO_UDQPS_MAX], p[HV_PROTO_UDQPS_MAX];
    int r, refreshed = 0;
    char g[33];

    if (!qp || qp->init.qp_type != IBV_QPT_UD || m->nkeys > HV_PROTO_UDQPS_MAX)
        return hv_refuse(rep, ENOENT, "QP %u is not a UD QP", m->target);
    hv_gid_hex(m->gid, g);
    /* a mover maps only its own GID, and only for a peer this process sends to */
    if (memcmp(m->gid, from, 16) || !hv_ud_peer_known(m->gid))
        return hv_refuse(rep, EPERM, "UDMAP %u for GID %s: not from a UD peer of this process",
                         m->target, g);
    for (uint32_t i = 0; i < m->nkeys; i++) {
        v[i] = m->keys[i].v;
        p[i] = m->keys[i].p;
    }
    r = hv_ud_peer_moved(m->gid, v, p, m->nkeys);
    if (r) {
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "cannot keep the UD QPNs: %s", strerror(-r));
        return r;
    }
    /* the AHs to the mover: created with its old link-layer address (RoCE: the MAC of the
     * VF it left); a new AH resolves the new one */
    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next)
        for (HvAh *ah = ctx->ahs; ah; ah = ah->next) {
            if (!ah->pd->phys || !ah->peer_known || memcmp(ah->peer.raw, m->gid, 16))
                continue;
            if (m->lid)
                ah->attr.dlid = m->lid; /* IB: the mover's LID routes them, GRH or not */
            if (hv_ah_renew(ah) == 0)
                refreshed++;
            else
                hv_log("UD: cannot re-create the address handle to a moved peer: %s",
                       strerror(errno));
        }
    hv_ud_release(m->gid);
    pthread_mutex_unlock(&hv.lock);
    rep->type = HV_MSG_UDMAPPED;
    hv_debug("UD: a peer's %u UD QPs moved (QP %u now %u...), %d address handles re-created",
             m->nkeys, v[0], p[0], refreshed);
    return 0;
}

static int hv_on_suspend(const HvMsg *m, const uint8_t from[16], HvQp *qp, HvMsg *rep)
{
    char g[33];
    int r;

    hv_gid_hex(from, g);
    if (!qp || !hv_qp_connected(qp) || qp->peer_vqpn != m->sender || !hv_qp_from(qp, from))
        return hv_refuse(rep, ENOENT, "SUSPEND: QP %u is not connected to QP %u at GID %s",
                         m->target, m->sender, g);
    pthread_mutex_lock(&qp->lock);
    hv_qp_sendq_ready(qp);
    qp->paused = 1;
    qp->paused_at = hv_now_ms();
    qp->suspend_until = qp->paused_at + HV_SUSPEND_MAX_MS; /* then it fails (hv_qp_await_expired) */
    qp->reconnected = 0; /* a new event: the peer's next RECONNECT counts */
    pthread_mutex_unlock(&qp->lock);
    r = hv_qp_drain(qp, 0, hv_now_ms() + HV_DRAIN_MS);
    if (r) {
        hv_qp_unpause(qp);
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "QP %u did not drain: %s", m->target, strerror(-r));
        return r;
    }
    pthread_mutex_lock(&qp->lock);
    rep->type = HV_MSG_SUSPENDED;
    rep->sent = qp->sent_msgs;
    pthread_mutex_unlock(&qp->lock);
    hv_debug("QP %u suspended for its peer QP %u (sent %llu)", m->target, m->sender,
             (unsigned long long)rep->sent);
    return 0;
}

/* Takes @qp's lock and decides what a peer's RECONNECT does (hv_reconnect_verdict): while
 * both ends resume and ours is out, its answer (from the peer, which never waits) decides, so
 * this waits for it, bounded. 0 with the lock held, or -ETIMEDOUT without it. */
static int hv_reconnect_verdict_locked(HvQp *qp, int swapping, int drives, HvVerdict *verdict)
{
    int64_t until = hv_now_ms() + HV_DRAIN_MS;

    for (;;) {
        uint64_t seen = hv_progress_gen();

        pthread_mutex_lock(&qp->lock);
        *verdict = hv_reconnect_verdict(qp->reconnected, qp->phys != NULL, swapping, drives,
                                        qp->await_peer, qp->calling);
        if (*verdict != HV_VERDICT_WAIT)
            return 0;
        pthread_mutex_unlock(&qp->lock);
        /* our RECONNECT's answer clears qp->calling and signals (hv_reconnect_answer) */
        if (hv_progress_wait(seen, until) == ETIMEDOUT)
            return -ETIMEDOUT;
        pthread_mutex_lock(&hv.lock);
        swapping = hv.swapping;
        pthread_mutex_unlock(&hv.lock);
    }
}

/* @qp (its lock held) to the mover's new QP: RESET, INIT with the program's attributes, the
 * unconsumed receives re-posted, RTR to the mover's new QPN, PSN, GID and (IB) LID, RTS with
 * the PSN it gave. 0 or an errno (negative from the repost). */
static int hv_reconnect_apply(HvQp *qp, const HvMsg *m)
{
    struct ibv_qp_attr a;
    int r;

    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RESET;
    r = hv_qp_modify(qp, &a, IBV_QP_STATE);
    if (!r)
        r = hv_qp_modify(qp, &qp->a_init, qp->m_init);
    if (!r)
        r = -hv_repost(&qp->recvs, qp, NULL);
    if (!r) {
        a = qp->a_rtr;
        a.dest_qp_num = m->sender_pqpn;
        a.rq_psn = m->sender_psn;
        /* the mover's address now: its GID (the same on IB, where it is the port GUID hotmig
         * carried) and, on IB, its LID, which routes every packet, GRH or not */
        memcpy(a.ah_attr.grh.dgid.raw, m->gid, 16);
        if (m->lid)
            a.ah_attr.dlid = m->lid;
        r = hv_qp_modify(qp, &a, qp->m_rtr);
        if (!r) {
            if (m->lid && m->lid != qp->a_rtr.ah_attr.dlid)
                hv_log("QP %u: its peer QP %u moved from LID %u to LID %u", m->target,
                       m->sender, qp->a_rtr.ah_attr.dlid, m->lid);
            qp->a_rtr.ah_attr = a.ah_attr; /* the next swap replays where the peer is now */
        }
    }
    if (!r && qp->m_rts) {
        a = qp->a_rts;
        a.sq_psn = m->target_psn;
        r = hv_qp_modify(qp, &a, qp->m_rts);
    }
    return r;
}

/* @qp (its lock held) to the mover's new QP, from the standby device first when it ran there
 * (the mover is back on a VF: this end leaves the standby device too). 0 or an errno. */
static int hv_reconnect_back(HvQp *qp, const HvMsg *m)
{
    uint64_t sends = qp->sb_sends, recvs = qp->sb_recvs;
    int was_sb = qp->on_sb;
    int r = qp->on_sb ? hv_sb_qp_move(qp, 0) : 0;

    if (!r)
        r = hv_reconnect_apply(qp, m);
    if (!r && was_sb) {
        hv_log("QP %u back on its own device; the standby path carried %llu sends and %llu "
               "receives",
               m->target, (unsigned long long)sends, (unsigned long long)recvs);
        qp->sb_sends = qp->sb_recvs = 0;
    }
    return r;
}

/* @qp (its lock held) connected to the mover's QP of @m (RECONNECT, SWITCH): the mover's
 * physical QPN and rkeys, unpaused, its queue flushed. */
static void hv_qp_follow(HvQp *qp, const HvMsg *m)
{
    qp->peer_pqpn = m->sender_pqpn;
    hv_map_clear(&qp->peer_rkeys);
    for (uint32_t i = 0; i < m->nkeys; i++)
        hv_map_put(&qp->peer_rkeys, m->keys[i].v, m->keys[i].p);
    qp->paused = 0;
    qp->suspend_until = 0;
    hv_qp_flush_queued(qp);
}

/* @qp (its lock held) reconnected to the mover's QP of @m: its own accounting restarts. */
static void hv_reconnect_done(HvQp *qp, const HvMsg *m)
{
    qp->sig_out = 0;
    qp->fence_out = 0;
    qp->unsig_tail = 0;
    qp->state = qp->m_rts ? IBV_QPS_RTS : IBV_QPS_RTR;
    qp->reconnected = 1;
    qp->await_peer = 0;
    hv_qp_follow(qp, m);
}

static int hv_on_reconnect(const HvMsg *m, const uint8_t from[16], HvQp *qp, HvContext *ctx,
                           HvMsg *rep)
{
    union ibv_gid own;
    uint16_t own_lid = 0;
    int r, swapping, drives;
    HvVerdict verdict;

    char g[33];

    hv_gid_hex(from, g);
    /* only the peer it is connected to, to its own (authenticated) address */
    if (!qp || !qp->m_rtr || !qp->m_init || qp->peer_vqpn != m->sender || !hv_qp_from(qp, from) ||
        memcmp(m->gid, from, 16)) {
        return hv_refuse(rep, ENOENT, "RECONNECT: QP %u is not connected to QP %u at GID %s",
                         m->target, m->sender, g);
    }
    /* both ends may be moving: who drives (hv_reconnect_verdict) */
    pthread_mutex_lock(&hv.lock);
    swapping = hv.swapping;
    pthread_mutex_unlock(&hv.lock);
    drives = qp->phys && hv_own_addr(qp, &own, &own_lid) == 0 &&
             hv_drives(own.raw, qp->pub.qp_num, m->gid, m->sender);
    /* completions still in the CQs account for their receives before the queue is reset */
    hv_qp_cqs_pull(qp);
    r = hv_reconnect_verdict_locked(qp, swapping, drives, &verdict);
    if (r) {
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "QP %u: our own RECONNECT got no answer", m->target);
        return r;
    }
    if (verdict != HV_VERDICT_ACCEPT) {
        pthread_mutex_unlock(&qp->lock);
        rep->type = HV_MSG_DEFER;
        rep->defer = verdict == HV_VERDICT_MOVING ? HV_DEFER_MOVING : HV_DEFER_RECONNECTED;
        hv_debug("QP %u: RECONNECT from its peer QP %u deferred (%s): both ends are moving",
                 m->target, m->sender, verdict == HV_VERDICT_MOVING ? "we reconnect it" : "done");
        return 0;
    }
    r = hv_reconnect_back(qp, m);
    if (!r) {
        hv_reconnect_done(qp, m);
        rep->type = HV_MSG_RECONNECTED;
        rep->target = qp->phys->qp_num;
        rep->lid = own_lid;
    } else {
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "QP %u: reconnecting failed: %s", m->target,
                 strerror(r < 0 ? -r : r));
    }
    pthread_mutex_unlock(&qp->lock);
    if (ctx && !r)
        hv_sb_loop_back(ctx); /* the moving peer's last QP back: the loopback QPs come too */
    if (ctx) {
        pthread_mutex_lock(&hv.lock);
        hv_srq_gather(ctx);      /* an SRQ's last QP back: its receives follow */
        hv_sb_close_unused(ctx); /* the last QP back: the standby device and its lease go */
        hv_wake_cqs(ctx, 0);
        pthread_mutex_unlock(&hv.lock);
    }
    /* One line per reconnected QP (a rank that stayed logs its pause as the mover does). */
    hv_log("QP %u reconnected to its peer's new QP %u; its sends were paused for %lld ms",
           m->target, m->sender_pqpn, (long long)(hv_now_ms() - qp->paused_at));
    return r;
}

/* @qp's end of the connection onto this process's standby device, to the mover's standby QP
 * (@m: SWITCH). qp lock held. 0 or an errno; @rep filled on success. */
static int hv_switch_apply(HvQp *qp, HvContext *ctx, const HvMsg *m, HvMsg *rep)
{
    struct ibv_qp_attr a;
    union ibv_gid sgid;
    uint8_t sgid_index = 0;
    int r;

    r = hv_sb_gid(ctx->sb, &sgid, &sgid_index);
    if (!r)
        r = hv_sb_qp_move(qp, 1);
    if (!r)
        r = -hv_repost(&qp->recvs, qp, NULL);
    if (!r) {
        hv_sb_rtr_attr(ctx->sb, &qp->a_rtr, m->gid, sgid_index, m->sender_pqpn, m->sender_psn, &a);
        r = hv_qp_connect(qp, &a, m->target_psn);
    }
    if (r)
        return r < 0 ? -r : r;
    hv_qp_follow(qp, m);
    rep->type = HV_MSG_SWITCHED;
    rep->target = qp->phys->qp_num;
    memcpy(rep->gid, sgid.raw, 16);
    rep->lid = 0;
    rep->nkeys = 0;
    pthread_mutex_lock(&ctx->lock);
    for (HvMr *mr = ctx->mrs; mr && rep->nkeys < HV_PROTO_KEYS_MAX; mr = mr->next)
        if (mr->sb && mr->pd == qp->pd && mr->pub.rkey != mr->sb->rkey)
            rep->keys[rep->nkeys++] = (HvKeyPair){mr->pub.rkey, mr->sb->rkey};
    pthread_mutex_unlock(&ctx->lock);
    return 0;
}

/* SWITCH: the connected peer moves and runs the connection over its standby device until it
 * is back; this end follows it onto ours (a soft-RoCE device on the control NIC, the agent's
 * lease), the process's other connections staying where they are (an SRQ gets a twin there,
 * hv-standby.c; the loopback QPs that share its SRQ follow it, hv-sbloop.c). A QP that cannot
 * (a UD QP, one whose SRQ serves a connection to elsewhere that stays here, this process
 * moving too, no standby device here) is refused: the mover keeps it paused, as without the
 * standby path. */
static int hv_on_switch(const HvMsg *m, const uint8_t from[16], HvQp *qp, HvContext *ctx,
                        HvMsg *rep)
{
    int64_t t0 = hv_now_ms(), t_twins, t_loop;
    const HvQp *keeps;
    int r, swapping;
    char g[33];

    hv_gid_hex(from, g);
    if (!qp || !ctx || !qp->m_rtr || !qp->m_init || qp->peer_vqpn != m->sender ||
        !hv_qp_from(qp, from))
        return hv_refuse(rep, ENOENT, "SWITCH: QP %u is not connected to QP %u at GID %s",
                         m->target, m->sender, g);
    if (qp->init.qp_type != IBV_QPT_RC && qp->init.qp_type != IBV_QPT_UC)
        return hv_refuse(rep, EOPNOTSUPP,
                         "SWITCH: QP %u is not RC or UC: it stays paused while its peer moves",
                         m->target);
    keeps = hv_sb_loop_keeps(ctx, qp, from);
    if (keeps)
        return hv_refuse(rep, EOPNOTSUPP,
                         "SWITCH: QP %u shares its receive queue with QP %u, which stays on this "
                         "device: it stays paused while its peer moves",
                         m->target, keeps->pub.qp_num);
    pthread_mutex_lock(&hv.lock);
    swapping = hv.swapping;
    r = swapping ? EBUSY : hv_sb_open(ctx);
    if (!r)
        r = hv_sb_prepare(qp);
    pthread_mutex_unlock(&hv.lock);
    t_twins = hv_now_ms();
    if (r) {
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "SWITCH: QP %u: %s", m->target,
                 swapping ? "this process moves too" : strerror(r));
        hv_log("QP %u stays paused while its peer moves: %s", m->target, rep->text);
        return -r;
    }
    /* its SRQ's loopback QPs first (both ends ours): then no QP of it stays here */
    r = hv_sb_loop_follow(ctx, qp, from, &keeps);
    if (r) {
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text),
                 "SWITCH: QP %u: the loopback QPs sharing its receive queue cannot follow: %s",
                 m->target, keeps ? "one of them changed" : strerror(r));
        hv_log("QP %u stays paused while its peer moves: %s", m->target, rep->text);
        return -r;
    }
    t_loop = hv_now_ms();
    /* what the CQs hold accounts for its receives before they are re-posted there */
    hv_qp_cqs_pull(qp);
    pthread_mutex_lock(&qp->lock);
    r = hv_switch_apply(qp, ctx, m, rep);
    pthread_mutex_unlock(&qp->lock);
    if (r) {
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "SWITCH: QP %u: %s", m->target, strerror(r));
        hv_log("QP %u: switching to the standby device failed: %s", m->target, strerror(r));
        return -r;
    }
    pthread_mutex_lock(&hv.lock);
    hv_srq_gather(ctx); /* the last QP of an SRQ there: its receives follow */
    hv_wake_cqs(ctx, 0);
    pthread_mutex_unlock(&hv.lock);
    hv_log("QP %u switched to the standby device for its moving peer QP %u in %lld ms (device and "
           "twins %lld ms, loopback QPs %lld ms); its sends were paused for %lld ms",
           m->target, m->sender, (long long)(hv_now_ms() - t0), (long long)(t_twins - t0),
           (long long)(t_loop - t_twins), (long long)(hv_now_ms() - qp->paused_at));
    return 0;
}

static int hv_on_keymap(const HvMsg *m, const uint8_t from[16], HvQp *qp, HvMsg *rep)
{
    char g[33];

    hv_gid_hex(from, g);
    if (!qp || !hv_qp_connected(qp) || qp->peer_vqpn != m->sender || !hv_qp_from(qp, from) ||
        m->nkeys > HV_PROTO_KEYS_MAX)
        return hv_refuse(rep, ENOENT, "KEYMAP: QP %u is not connected to QP %u at GID %s",
                         m->target, m->sender, g);
    pthread_mutex_lock(&qp->lock);
    if (qp->peer_rkeys.n + m->nkeys > HV_PEER_RKEYS_MAX) {
        pthread_mutex_unlock(&qp->lock);
        return hv_refuse(rep, ENOSPC, "KEYMAP: QP %u translates %d rkeys of its peer already",
                         m->target, HV_PEER_RKEYS_MAX);
    }
    for (uint32_t i = 0; i < m->nkeys; i++)
        hv_map_put(&qp->peer_rkeys, m->keys[i].v, m->keys[i].p);
    pthread_mutex_unlock(&qp->lock);
    rep->type = HV_MSG_KEYMAPPED;
    hv_debug("QP %u: its peer QP %u registered %u keys after its swap", m->target, m->sender,
             m->nkeys);
    return 0;
}

/* LOOKUP from a peer connecting to our QP @target: its physical number and our changed rkeys;
 * DEFER moving while our device is away (the peer asks again). */
static int hv_on_lookup(const HvMsg *m, const uint8_t from[16], HvQp *qp, HvContext *ctx,
                        HvMsg *rep)
{
    char g[33];
    int swapping;

    if (!qp || qp->init.qp_type == IBV_QPT_UD)
        return hv_refuse(rep, ENOENT, "LOOKUP: no connected-mode QP %u here", m->target);
    /* a QP not connected yet answers any layer of the job (its wire-up); a connected one only
     * the peer it is connected to */
    hv_gid_hex(from, g);
    if (hv_qp_connected(qp) &&
        (qp->peer_vqpn != m->sender || !hv_qp_from(qp, from) || memcmp(m->gid, from, 16)))
        return hv_refuse(rep, EPERM, "LOOKUP: QP %u is connected, not to QP %u at GID %s",
                         m->target, m->sender, g);
    pthread_mutex_lock(&hv.lock);
    swapping = hv.swapping;
    pthread_mutex_unlock(&hv.lock);
    pthread_mutex_lock(&qp->lock);
    if (swapping || !qp->phys) {
        pthread_mutex_unlock(&qp->lock);
        rep->type = HV_MSG_DEFER;
        rep->defer = HV_DEFER_MOVING;
        return 0;
    }
    rep->target = qp->phys->qp_num;
    rep->lid = hv_port_lid(ctx, qp->a_init.port_num); /* where it is now (IB; 0 on RoCE) */
    pthread_mutex_unlock(&qp->lock);
    rep->type = HV_MSG_LOOKEDUP;
    hv_ctx_keys(ctx, rep);
    hv_debug("QP %u (physical %u): looked up by QP %u connecting to it (%u keys)", m->target,
             rep->target, m->sender, rep->nkeys);
    return 0;
}

/* Each handler works on the QP its request names, held (hv_qp_hold) until it returns: the
 * program's ibv_destroy_qp waits for it instead of freeing the QP under it (issue 28,
 * finding 4). */
int hv_peer_handle(const HvMsg *m, const uint8_t from[16], HvMsg *rep)
{
    HvContext *ctx = NULL;
    HvQp *qp = NULL;
    int r;

    if (m->type == HV_MSG_SUSPEND || m->type == HV_MSG_RECONNECT || m->type == HV_MSG_SWITCH ||
        m->type == HV_MSG_UDMAP ||
        m->type == HV_MSG_UDHOLD || m->type == HV_MSG_KEYMAP || m->type == HV_MSG_LOOKUP)
        qp = hv_qp_hold(m->target, &ctx);
    switch (m->type) {
    case HV_MSG_SUSPEND:
        r = hv_on_suspend(m, from, qp, rep);
        break;
    case HV_MSG_RECONNECT:
        r = hv_on_reconnect(m, from, qp, ctx, rep);
        break;
    case HV_MSG_SWITCH:
        r = hv_on_switch(m, from, qp, ctx, rep);
        break;
    case HV_MSG_UDMAP:
        r = hv_on_udmap(m, from, qp, rep);
        break;
    case HV_MSG_UDHOLD:
        r = hv_on_udhold(m, from, qp, rep);
        break;
    case HV_MSG_KEYMAP:
        r = hv_on_keymap(m, from, qp, rep);
        break;
    case HV_MSG_LOOKUP:
        r = hv_on_lookup(m, from, qp, ctx, rep);
        break;
    default:
        r = hv_refuse(rep, EPROTO, "unexpected message");
        break;
    }
    hv_qp_release(qp);
    return r;
}
