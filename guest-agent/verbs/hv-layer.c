/* libhotmig-verbs: the shadow objects and the data path (docs/verbs-layer.md).
 *
 * Every exported ibv_* function of libibverbs is defined here (hv-exports.c holds the ones that
 * need no shadow logic). A call whose object is a shadow works on the shadow's physical object;
 * a call on a physical object (libibverbs and the providers call some exports themselves, e.g.
 * rxe's ibv_query_gid) goes straight to the real function. */
#include "hv.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* verbs.h turns these into inline wrappers; the layer defines the symbols themselves. */
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

HvLayer hv = {.lock = PTHREAD_MUTEX_INITIALIZER, .evt_wake = {-1, -1}};
HvReal hv_real;
static pthread_cond_t hv_cond = PTHREAD_COND_INITIALIZER; /* a swap ended */
static pthread_once_t hv_once = PTHREAD_ONCE_INIT;

void *hv_real_lib = RTLD_NEXT;

/* Where the real functions are: the next libibverbs in the global scope when there is one (the
 * program links it, or LD_PRELOAD lists it after the layer); otherwise libibverbs opened by the
 * layer itself. The second case is UCX's: libuct_ib, which needs libibverbs, is dlopen'ed
 * RTLD_LOCAL long after start-up, so RTLD_NEXT (which searches the start-up scope and what was
 * opened RTLD_GLOBAL) does not see it; its calls still reach the layer first (a preloaded
 * object precedes a local scope in every lookup). Opening the same soname gives the copy that
 * is loaded, or loads it. */
static void hv_init_once(void)
{
    if (!dlvsym(RTLD_NEXT, "ibv_get_device_list", "IBVERBS_1.1")) {
        hv_real_lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!hv_real_lib) {
            hv_log("cannot open libibverbs.so.1: %s", dlerror());
            return;
        }
    }
#define HV_REAL(ret, name, ver, args)                                                              \
    hv_real.r_##name = (ret(*) args)dlvsym(hv_real_lib, #name, ver);                               \
    if (!hv_real.r_##name)                                                                         \
        hv_real.r_##name = (ret(*) args)dlsym(hv_real_lib, #name);                                 \
    if (!hv_real.r_##name)                                                                         \
        hv_log("libibverbs has no %s@%s", #name, ver);
#include "hv-real.def"
#undef HV_REAL
}

void hv_init(void)
{
    pthread_once(&hv_once, hv_init_once);
}

/* UCX's own failure detectors must outlast a migration's blackout (docs/verbs-layer.md, "UCX"):
 * its UD endpoints declare a peer dead after UCX_UD_TIMEOUT (30 s) without an answer, and its
 * keepalive (UCX_KEEPALIVE_INTERVAL, 20 s) probes every endpoint. While a peer's guest moves,
 * the layer holds this process's sends to it and drops nothing, but the peer answers nothing
 * until it resumed: 9-10 s per move on the loaded lab, more for a drain. The layer sets both,
 * before the program's main() and so before UCX reads its configuration, unless the user did. */
static const char *const hv_ucx_env[][2] = {
    {"UCX_UD_TIMEOUT", "300s"},
    {"UCX_KEEPALIVE_INTERVAL", "300s"},
};

/* The UCX defaults first; the real functions are resolved at load only when libibverbs is
 * loaded already: a preloaded process that never uses verbs (a shell, mpirun, ssh) does not get
 * libibverbs; otherwise at the first ibv_* call. */
__attribute__((constructor)) static void hv_constructor(void)
{
    const char *off = getenv("HOTMIG_VERBS_DISABLE");
    void *h;

    if (!(off && *off && strcmp(off, "0") != 0))
        for (size_t i = 0; i < sizeof(hv_ucx_env) / sizeof(hv_ucx_env[0]); i++)
            setenv(hv_ucx_env[i][0], hv_ucx_env[i][1], 0);
    h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h) {
        hv_init();
        dlclose(h);
    }
}

/* ---- lookups ------------------------------------------------------------------------------ */

static int hv_op_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc);
static struct ibv_qp *hv_op_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a);
static void hv_wx_free(HvQp *qp);

/* Lock-free: libibverbs and the providers call some exports themselves with physical objects,
 * sometimes while the layer holds its locks (a swap opening the new device). A shadow context
 * is recognised by its poll_cq op, which is the layer's. */
HvContext *hv_ctx_of(struct ibv_context *c)
{
    if (!c || c->ops.poll_cq != hv_op_poll_cq)
        return NULL;
    return (HvContext *)((char *)c - offsetof(HvContext, vctx.context));
}

static pthread_mutex_t hv_dev_lock = PTHREAD_MUTEX_INITIALIZER; /* hv.devs */

static HvDevice *hv_dev_of(struct ibv_device *d)
{
    HvDevice *dev;

    pthread_mutex_lock(&hv_dev_lock);
    for (dev = hv.devs; dev; dev = dev->next)
        if (&dev->dev == d)
            break;
    pthread_mutex_unlock(&hv_dev_lock);
    return dev;
}

#define HV_CTX(obj) hv_ctx_of((obj) ? (obj)->context : NULL)

/* A context's lists of shadows (singly linked through ->next; hv.lock held). */
#define HV_LINK(head, obj)                                                                         \
    do {                                                                                           \
        (obj)->next = (head);                                                                      \
        (head) = (obj);                                                                            \
    } while (0)
#define HV_UNLINK(head, obj)                                                                       \
    do {                                                                                           \
        __typeof__(obj) *pp_;                                                                      \
        for (pp_ = &(head); *pp_; pp_ = &(*pp_)->next)                                             \
            if (*pp_ == (obj)) {                                                                   \
                *pp_ = (obj)->next;                                                                \
                break;                                                                             \
            }                                                                                      \
    } while (0)
/* What ibv_destroy_X / ibv_dealloc_pd share for a shadow: the physical object goes (when there
 * is one), then the shadow leaves its context's list; @r gets 0 or the real call's error. */
#define HV_DESTROY(ctx, head, obj, realfn, r)                                                      \
    do {                                                                                           \
        hv_wait_phys(ctx);                                                                         \
        pthread_mutex_lock(&hv.lock);                                                              \
        (r) = (obj)->phys ? realfn((obj)->phys) : 0;                                               \
        if (!(r))                                                                                  \
            HV_UNLINK(head, obj);                                                                  \
        pthread_mutex_unlock(&hv.lock);                                                            \
    } while (0)

/* Waits while a swap is under way: control calls need a physical object. */
static int hv_wait_phys(HvContext *ctx)
{
    pthread_mutex_lock(&hv.lock);
    while (hv.swapping || !ctx->phys)
        if (!hv.swapping && !ctx->phys)
            break;
        else
            pthread_cond_wait(&hv_cond, &hv.lock);
    pthread_mutex_unlock(&hv.lock);
    return ctx->phys ? 0 : ENODEV;
}

void hv_swap_ended(void)
{
    pthread_mutex_lock(&hv.lock);
    pthread_cond_broadcast(&hv_cond);
    pthread_mutex_unlock(&hv.lock);
}

/* ---- receive FIFO ------------------------------------------------------------------------- */

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

static void hv_fifo_free(HvRecvFifo *f)
{
    free(f->v);
    free(f->sges);
    memset(f, 0, sizeof(*f));
}

/* ---- translation -------------------------------------------------------------------------- */

static uint32_t hv_lkey_p(HvContext *ctx, uint32_t v)
{
    uint64_t p;

    return hv_map_get(&ctx->lkey, v, &p) ? (uint32_t)p : v;
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

    if (!ctx->swapped && !ud && qp->peer_rkeys.n == 0) {
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
                sge[s].lkey = hv_lkey_p(ctx, w->sg_list[k].lkey);
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
            t->wr.ud.remote_qpn = hv_ud_send_qpn(&ah->attr, w->wr.ud.remote_qpn);
            hv_ud_count_send(qp, &ah->attr);
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

static int hv_recv_translate(HvContext *ctx, HvScratch *x, struct ibv_recv_wr *wr,
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
            sge[s].lkey = hv_lkey_p(ctx, w->sg_list[k].lkey);
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
static int hv_post_recv_phys(HvContext *ctx, HvRecvFifo *fifo, HvScratch *x, struct ibv_qp *pqp,
                             struct ibv_srq *psrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    struct ibv_recv_wr *tr = wr, *pbad = NULL, *w;
    int r = 0;

    if (ctx->swapped)
        r = hv_recv_translate(ctx, x, wr, &tr);
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
static int hv_recvs_reserve(HvRecvFifo *f, HvScratch *x, uint32_t max_wr, uint32_t max_sge)
{
    int r = hv_fifo_reserve(f, max_wr, (int)max_sge);

    return r ? r
             : hv_scratch_reserve(x, max_wr, sizeof(struct ibv_recv_wr), (size_t)max_wr * max_sge);
}

int hv_qp_post_recv_phys(HvQp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    return hv_post_recv_phys(qp->pd->ctx, &qp->recvs, &qp->xr, qp->phys, NULL, wr, bad);
}

int hv_srq_post_recv_phys(HvSrq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    return hv_post_recv_phys(srq->pd->ctx, &srq->recvs, &srq->xr, NULL, srq->phys, wr, bad);
}

/* ---- sends posted while a QP is paused ---------------------------------------------------- */

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

/* ---- the ops the inline data path calls ------------------------------------------------- */

static int hv_op_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    HvQp *qp = (HvQp *)ibqp;
    int r = 0;

    pthread_mutex_lock(&qp->lock);
    if (qp->await_peer)
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
    if (!srq->phys) {
        for (struct ibv_recv_wr *w = wr; w; w = w->next)
            hv_fifo_push(&srq->recvs, w);
    } else {
        r = hv_srq_post_recv_phys(srq, wr, bad);
    }
    pthread_mutex_unlock(&srq->lock);
    return r;
}

/* Accounts and translates @n completions just polled from the physical CQ; drops the layer's
 * fences. Returns how many are left for the program. */
static int hv_wc_fix(HvCq *cq, int n, struct ibv_wc *wc)
{
    HvContext *ctx = cq->ctx;
    int out = 0;

    for (int i = 0; i < n; i++) {
        struct ibv_wc *w = &wc[i];
        uint64_t v;
        HvQp *qp = NULL;
        int keep = 1;

        pthread_mutex_lock(&ctx->lock);
        if (hv_map_get(&ctx->qpn, w->qp_num, &v))
            qp = (HvQp *)(uintptr_t)v;
        pthread_mutex_unlock(&ctx->lock);
        if (qp) {
            pthread_mutex_lock(&qp->lock);
            if (w->status == IBV_WC_SUCCESS && (w->opcode & IBV_WC_RECV)) {
                qp->recv_done++;
                if (qp->srq) {
                    pthread_mutex_lock(&qp->srq->lock);
                    hv_fifo_consume(&qp->srq->recvs, w->wr_id);
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
            w->qp_num = qp->pub.qp_num;
            if (qp->init.qp_type == IBV_QPT_UD && w->status == IBV_WC_SUCCESS &&
                (w->opcode & IBV_WC_RECV))
                w->src_qp = hv_ud_recv_qpn(w->src_qp); /* a moved peer's virtual number */
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
    int r;

    if (!cq->phys || n <= 0)
        return 0;
    r = ibv_poll_cq(cq->phys, n, wc);
    if (r <= 0)
        return r;
    return hv_wc_fix(cq, r, wc);
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
    } else if (cq->phys) {
        r = ibv_req_notify_cq(cq->phys, solicited);
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

/* ---- event thread: physical completion channels and async events -> the shadows ---------- */

void hv_evt_kick(void)
{
    char c = 1;

    if (hv.evt_wake[1] >= 0 && write(hv.evt_wake[1], &c, 1) < 0 && errno != EAGAIN)
        hv_log("cannot wake the event thread: %s", strerror(errno));
}

static void hv_async_push(HvContext *ctx, const struct ibv_async_event *ev)
{
    uint64_t one = 1;

    pthread_mutex_lock(&ctx->lock);
    if (ctx->aev_n == ctx->aev_cap) {
        size_t cap = ctx->aev_cap ? ctx->aev_cap * 2 : 16;
        struct ibv_async_event *e = malloc(cap * sizeof(*e));

        if (!e) {
            pthread_mutex_unlock(&ctx->lock);
            return;
        }
        for (size_t i = 0; i < ctx->aev_n; i++)
            e[i] = ctx->aev[(ctx->aev_head + i) % ctx->aev_cap];
        free(ctx->aev);
        ctx->aev = e;
        ctx->aev_head = 0;
        ctx->aev_cap = cap;
    }
    ctx->aev[(ctx->aev_head + ctx->aev_n++) % ctx->aev_cap] = *ev;
    pthread_mutex_unlock(&ctx->lock);
    if (write(ctx->vctx.context.async_fd, &one, sizeof(one)) < 0)
        hv_log("cannot signal the async event fd: %s", strerror(errno));
}

static void hv_evt_handle(int fd)
{
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next) {
        for (HvChan *ch = ctx->chans; ch; ch = ch->next) {
            struct ibv_cq *pcq;
            void *pctx;

            if (!ch->phys || ch->phys->fd != fd)
                continue;
            while (hv_real.r_ibv_get_cq_event(ch->phys, &pcq, &pctx) == 0) {
                HvCq *cq = pctx;

                hv_real.r_ibv_ack_cq_events(pcq, 1);
                pthread_mutex_lock(&cq->lock);
                cq->armed = 0;
                pthread_mutex_unlock(&cq->lock);
                hv_chan_signal(ch, cq);
            }
            return;
        }
        if (ctx->phys && ctx->phys->async_fd == fd) {
            struct ibv_async_event ev, out;

            while (hv_real.r_ibv_get_async_event(ctx->phys, &ev) == 0) {
                out = ev;
                switch (ev.event_type) {
                case IBV_EVENT_QP_FATAL:
                case IBV_EVENT_QP_REQ_ERR:
                case IBV_EVENT_QP_ACCESS_ERR:
                case IBV_EVENT_COMM_EST:
                case IBV_EVENT_SQ_DRAINED:
                case IBV_EVENT_PATH_MIG:
                case IBV_EVENT_PATH_MIG_ERR:
                case IBV_EVENT_QP_LAST_WQE_REACHED:
                    out.element.qp = &((HvQp *)ev.element.qp->qp_context)->pub;
                    break;
                case IBV_EVENT_CQ_ERR:
                    out.element.cq = &((HvCq *)ev.element.cq->cq_context)->pub;
                    break;
                case IBV_EVENT_SRQ_ERR:
                case IBV_EVENT_SRQ_LIMIT_REACHED:
                    out.element.srq = &((HvSrq *)ev.element.srq->srq_context)->pub;
                    break;
                default:
                    break;
                }
                hv_real.r_ibv_ack_async_event(&ev);
                hv_async_push(ctx, &out);
            }
            return;
        }
    }
}

static void *hv_evt_thread(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd pfd[64];
        nfds_t n = 1;
        int r;

        pfd[0].fd = hv.evt_wake[0];
        pfd[0].events = POLLIN;
        pthread_mutex_lock(&hv.lock);
        for (HvContext *ctx = hv.ctxs; ctx && n < 64; ctx = ctx->next) {
            if (ctx->phys) {
                pfd[n].fd = ctx->phys->async_fd;
                pfd[n++].events = POLLIN;
            }
            for (HvChan *ch = ctx->chans; ch && n < 64; ch = ch->next)
                if (ch->phys) {
                    pfd[n].fd = ch->phys->fd;
                    pfd[n++].events = POLLIN;
                }
        }
        pthread_mutex_unlock(&hv.lock);
        r = poll(pfd, n, -1);
        if (r < 0 && errno != EINTR)
            return NULL;
        if (r <= 0)
            continue;
        if (pfd[0].revents) {
            char buf[64];
            while (read(hv.evt_wake[0], buf, sizeof(buf)) > 0)
                ;
        }
        pthread_mutex_lock(&hv.lock);
        for (nfds_t i = 1; i < n; i++)
            if (pfd[i].revents & POLLIN)
                hv_evt_handle(pfd[i].fd);
        pthread_mutex_unlock(&hv.lock);
    }
    return NULL;
}

static void hv_evt_start(void)
{
    sigset_t all, old;

    if (hv.evt_started)
        return;
    if (pipe2(hv.evt_wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        hv_log("no event thread (pipe: %s): completion channels will not work", strerror(errno));
        return;
    }
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&hv.evt_thread, NULL, hv_evt_thread, NULL) == 0)
        hv.evt_started = 1;
    else
        hv_log("no event thread: completion channels will not work");
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void hv_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);

    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* ---- devices ------------------------------------------------------------------------------ */

static HvDevice *hv_dev_get(struct ibv_device *p)
{
    HvDevice *dev;

    for (dev = hv.devs; dev; dev = dev->next)
        if (strcmp(dev->dev.name, p->name) == 0)
            return dev;
    dev = calloc(1, sizeof(*dev));
    if (!dev)
        return NULL;
    dev->dev.node_type = p->node_type;
    dev->dev.transport_type = p->transport_type;
    memcpy(dev->dev.name, p->name, sizeof(dev->dev.name));
    memcpy(dev->dev.dev_name, p->dev_name, sizeof(dev->dev.dev_name));
    memcpy(dev->dev.dev_path, p->dev_path, sizeof(dev->dev.dev_path));
    memcpy(dev->dev.ibdev_path, p->ibdev_path, sizeof(dev->dev.ibdev_path));
    dev->guid = hv_real.r_ibv_get_device_guid(p);
    atomic_store(&dev->refcount, 1);
    dev->next = hv.devs;
    hv.devs = dev;
    return dev;
}

HV_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
    struct ibv_device **plist, **out;
    int n = 0;

    hv_init();
    if (!hv_real.r_ibv_get_device_list) { /* no libibverbs (logged once by hv_init) */
        errno = ENOSYS;
        return NULL;
    }
    plist = hv_real.r_ibv_get_device_list(&n);
    if (!plist)
        return NULL;
    out = calloc((size_t)n + 1, sizeof(*out));
    if (!out) {
        hv_real.r_ibv_free_device_list(plist);
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_lock(&hv_dev_lock);
    for (int i = 0; i < n; i++) {
        HvDevice *dev = hv_dev_get(plist[i]);

        out[i] = dev ? &dev->dev : NULL;
        if (!out[i]) {
            pthread_mutex_unlock(&hv_dev_lock);
            free(out);
            hv_real.r_ibv_free_device_list(plist);
            errno = ENOMEM;
            return NULL;
        }
    }
    pthread_mutex_unlock(&hv_dev_lock);
    hv_real.r_ibv_free_device_list(plist);
    if (num)
        *num = n;
    return out;
}

HV_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
    if (list && list[0] && !hv_dev_of(list[0])) {
        hv_real.r_ibv_free_device_list(list);
        return;
    }
    free(list);
}

HV_EXPORT const char *ibv_get_device_name(struct ibv_device *d)
{
    HvDevice *dev = hv_dev_of(d);

    return dev ? dev->dev.name : hv_real.r_ibv_get_device_name(d);
}

HV_EXPORT __be64 ibv_get_device_guid(struct ibv_device *d)
{
    HvDevice *dev = hv_dev_of(d);

    return dev ? dev->guid : hv_real.r_ibv_get_device_guid(d);
}

/* Runs @fn on the physical device named like @dev (a fresh device list). */
static struct ibv_device **hv_phys_list(const char *name, struct ibv_device **found)
{
    int n = 0;
    struct ibv_device **l = hv_real.r_ibv_get_device_list(&n);

    *found = NULL;
    for (int i = 0; l && i < n; i++)
        if (strcmp(l[i]->name, name) == 0)
            *found = l[i];
    return l;
}

HV_EXPORT int ibv_get_device_index(struct ibv_device *d)
{
    HvDevice *dev = hv_dev_of(d);
    struct ibv_device *p, **l;
    int r;

    if (!dev)
        return hv_real.r_ibv_get_device_index(d);
    l = hv_phys_list(dev->dev.name, &p);
    r = p ? hv_real.r_ibv_get_device_index(p) : -1;
    if (l)
        hv_real.r_ibv_free_device_list(l);
    return r;
}

static struct ibv_context *hv_open_phys(const char *name)
{
    struct ibv_device *p, **l = hv_phys_list(name, &p);
    struct ibv_context *c = p ? hv_real.r_ibv_open_device(p) : NULL;
    int e = errno;

    if (l)
        hv_real.r_ibv_free_device_list(l);
    if (!p)
        e = ENODEV;
    errno = e;
    return c;
}

/* Opens @name as @ctx's physical context. */
int hv_ctx_attach(HvContext *ctx, const char *name)
{
    struct ibv_context *c = hv_open_phys(name);

    if (!c)
        return errno ? errno : ENODEV;
    hv_nonblock(c->async_fd);
    ctx->phys = c;
    ctx->vctx.context.num_comp_vectors = c->num_comp_vectors;
    return 0;
}

HV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *d)
{
    HvDevice *dev = hv_dev_of(d);
    HvContext *ctx;
    int r;

    if (!dev)
        return hv_real.r_ibv_open_device(d);
    hv_register_start();
    ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_init(&ctx->lock, NULL);
    ctx->dev = dev;
    ctx->vctx.sz = sizeof(struct verbs_context);
    ctx->vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
    ctx->vctx.context.device = &dev->dev;
    pthread_mutex_init(&ctx->vctx.context.mutex, NULL);
    ctx->vctx.context.ops.post_send = hv_op_post_send;
    ctx->vctx.context.ops.post_recv = hv_op_post_recv;
    ctx->vctx.context.ops.post_srq_recv = hv_op_post_srq_recv;
    ctx->vctx.context.ops.poll_cq = hv_op_poll_cq;
    ctx->vctx.context.ops.req_notify_cq = hv_op_req_notify_cq;
    ctx->vctx.context.ops.alloc_mw = hv_op_alloc_mw;
    ctx->vctx.context.ops.bind_mw = hv_op_bind_mw;
    ctx->vctx.context.ops.dealloc_mw = hv_op_dealloc_mw;
    ctx->vctx.create_qp_ex = hv_op_create_qp_ex;
    ctx->cmd_efd = eventfd(0, EFD_CLOEXEC);
    ctx->vctx.context.cmd_fd = ctx->cmd_efd;
    ctx->vctx.context.async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (ctx->cmd_efd < 0 || ctx->vctx.context.async_fd < 0) {
        r = errno;
        goto fail;
    }
    r = hv_ctx_attach(ctx, dev->dev.name);
    if (r)
        goto fail;
    pthread_mutex_lock(&hv.lock);
    hv_evt_start();
    ctx->next = hv.ctxs;
    hv.ctxs = ctx;
    pthread_mutex_unlock(&hv.lock);
    hv_evt_kick();
    hv_debug("opened %s", dev->dev.name);
    return &ctx->vctx.context;

fail:
    if (ctx->cmd_efd >= 0)
        close(ctx->cmd_efd);
    if (ctx->vctx.context.async_fd >= 0)
        close(ctx->vctx.context.async_fd);
    free(ctx);
    errno = r;
    return NULL;
}

HV_EXPORT int ibv_close_device(struct ibv_context *c)
{
    HvContext *ctx = hv_ctx_of(c);

    if (!ctx)
        return hv_real.r_ibv_close_device(c);
    pthread_mutex_lock(&hv.lock);
    HV_UNLINK(hv.ctxs, ctx);
    if (ctx->phys)
        hv_real.r_ibv_close_device(ctx->phys);
    pthread_mutex_unlock(&hv.lock);
    hv_evt_kick();
    close(ctx->cmd_efd);
    close(ctx->vctx.context.async_fd);
    hv_map_clear(&ctx->lkey);
    hv_map_clear(&ctx->qpn);
    hv_map_clear(&ctx->vqpn);
    free(ctx->aev);
    free(ctx);
    return 0;
}

/* ---- queries ------------------------------------------------------------------------------ */

#define HV_PHYS_CTX(c, fallback)                                                                   \
    HvContext *ctx = hv_ctx_of(c);                                                                 \
    if (!ctx)                                                                                      \
        return fallback;                                                                           \
    if (hv_wait_phys(ctx))                                                                         \
        return ENODEV;

HV_EXPORT int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
    HV_PHYS_CTX(c, hv_real.r_ibv_query_device(c, a));
    return hv_real.r_ibv_query_device(ctx->phys, a);
}

HV_EXPORT int ibv_query_port(struct ibv_context *c, uint8_t p, struct _compat_ibv_port_attr *a)
{
    HV_PHYS_CTX(c, hv_real.r_ibv_query_port(c, p, a));
    return hv_real.r_ibv_query_port(ctx->phys, p, a);
}

HV_EXPORT int ibv_query_gid(struct ibv_context *c, uint8_t p, int i, union ibv_gid *g)
{
    HvContext *ctx = hv_ctx_of(c);

    if (!ctx)
        return hv_real.r_ibv_query_gid(c, p, i, g);
    if (hv_wait_phys(ctx))
        return -1;
    return hv_real.r_ibv_query_gid(ctx->phys, p, i, g);
}

HV_EXPORT int _ibv_query_gid_ex(struct ibv_context *c, uint32_t p, uint32_t i,
                                struct ibv_gid_entry *e, uint32_t f, size_t sz)
{
    HV_PHYS_CTX(c, hv_real.r__ibv_query_gid_ex(c, p, i, e, f, sz));
    return hv_real.r__ibv_query_gid_ex(ctx->phys, p, i, e, f, sz);
}

HV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *c, struct ibv_gid_entry *e, size_t n,
                                       uint32_t f, size_t sz)
{
    HvContext *ctx = hv_ctx_of(c);

    if (!ctx)
        return hv_real.r__ibv_query_gid_table(c, e, n, f, sz);
    if (hv_wait_phys(ctx))
        return -ENODEV;
    return hv_real.r__ibv_query_gid_table(ctx->phys, e, n, f, sz);
}

HV_EXPORT int ibv_query_pkey(struct ibv_context *c, uint8_t p, int i, __be16 *k)
{
    HvContext *ctx = hv_ctx_of(c);

    if (!ctx)
        return hv_real.r_ibv_query_pkey(c, p, i, k);
    if (hv_wait_phys(ctx))
        return -1;
    return hv_real.r_ibv_query_pkey(ctx->phys, p, i, k);
}

HV_EXPORT int ibv_get_pkey_index(struct ibv_context *c, uint8_t p, __be16 k)
{
    HvContext *ctx = hv_ctx_of(c);

    if (!ctx)
        return hv_real.r_ibv_get_pkey_index(c, p, k);
    if (hv_wait_phys(ctx))
        return -1;
    return hv_real.r_ibv_get_pkey_index(ctx->phys, p, k);
}

HV_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *c, struct ibv_ah_attr *a,
                                          uint8_t mac[6], uint16_t *vid)
{
    HV_PHYS_CTX(c, hv_real.r_ibv_resolve_eth_l2_from_gid(c, a, mac, vid));
    return hv_real.r_ibv_resolve_eth_l2_from_gid(ctx->phys, a, mac, vid);
}

/* ---- PD, MR ------------------------------------------------------------------------------- */

HV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
    HvContext *ctx = hv_ctx_of(c);
    HvPd *pd;

    if (!ctx)
        return hv_real.r_ibv_alloc_pd(c);
    if (hv_wait_phys(ctx)) {
        errno = ENODEV;
        return NULL;
    }
    pd = calloc(1, sizeof(*pd));
    if (!pd)
        return NULL;
    pd->phys = hv_real.r_ibv_alloc_pd(ctx->phys);
    if (!pd->phys) {
        free(pd);
        return NULL;
    }
    pd->ctx = ctx;
    pd->pub.context = c;
    pd->pub.handle = pd->phys->handle;
    pthread_mutex_lock(&hv.lock);
    HV_LINK(ctx->pds, pd);
    pthread_mutex_unlock(&hv.lock);
    return &pd->pub;
}

HV_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
    HvContext *ctx = HV_CTX(ibpd);
    HvPd *pd = (HvPd *)ibpd;
    int r;

    if (!ctx)
        return hv_real.r_ibv_dealloc_pd(ibpd);
    HV_DESTROY(ctx, ctx->pds, pd, hv_real.r_ibv_dealloc_pd, r);
    if (!r)
        free(pd);
    return r;
}

/* A virtual key for @phys that no live virtual key of @ctx uses. */
static uint32_t hv_key_pick(HvContext *ctx, uint32_t phys, HvMr *self)
{
    static uint32_t next_synth = 0xf0000000u;
    uint32_t v = phys;

    for (;;) {
        int clash = 0;

        for (HvMr *m = ctx->mrs; m; m = m->next)
            if (m != self && (m->pub.lkey == v || m->pub.rkey == v))
                clash = 1;
        if (!clash)
            return v;
        v = next_synth++;
    }
}

/* Gives @mr the virtual keys of its physical MR (synthetic ones on a clash), maps them. */
static void hv_mr_keys(HvContext *ctx, HvMr *mr)
{
    mr->pub.lkey = hv_key_pick(ctx, mr->phys->lkey, mr);
    mr->pub.rkey = mr->phys->rkey == mr->phys->lkey ? mr->pub.lkey
                                                     : hv_key_pick(ctx, mr->phys->rkey, mr);
    if (mr->pub.lkey != mr->phys->lkey || mr->pub.rkey != mr->phys->rkey)
        hv_log("memory region %p got synthetic keys l=0x%x r=0x%x (physical l=0x%x r=0x%x)",
               mr->pub.addr, mr->pub.lkey, mr->pub.rkey, mr->phys->lkey, mr->phys->rkey);
    hv_map_put(&ctx->lkey, mr->pub.lkey, mr->phys->lkey);
}

static struct ibv_mr *hv_reg(struct ibv_pd *ibpd, void *addr, size_t len, uint64_t iova,
                             unsigned access, int kind)
{
    HvContext *ctx = HV_CTX(ibpd);
    HvPd *pd = (HvPd *)ibpd;
    HvMr *mr;

    if (hv_wait_phys(ctx)) {
        errno = ENODEV;
        return NULL;
    }
    mr = calloc(1, sizeof(*mr));
    if (!mr)
        return NULL;
    mr->phys = kind ? hv_real.r_ibv_reg_mr_iova2(pd->phys, addr, len, iova, access)
                    : hv_real.r_ibv_reg_mr(pd->phys, addr, len, (int)access);
    if (!mr->phys) {
        free(mr);
        return NULL;
    }
    mr->pd = pd;
    mr->iova = iova;
    mr->access = (int)access;
    mr->kind = kind;
    mr->pub = *mr->phys;
    mr->pub.context = &ctx->vctx.context;
    mr->pub.pd = ibpd;
    pthread_mutex_lock(&hv.lock);
    pthread_mutex_lock(&ctx->lock);
    hv_mr_keys(ctx, mr);
    HV_LINK(ctx->mrs, mr);
    pthread_mutex_unlock(&ctx->lock);
    pthread_mutex_unlock(&hv.lock);
    if (mr->pub.rkey != mr->phys->rkey &&
        (access & (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)))
        hv_keymap_push(ctx, mr->pub.rkey, mr->phys->rkey); /* before ibv_reg_mr returns */
    return &mr->pub;
}

HV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    if (!HV_CTX(pd))
        return hv_real.r_ibv_reg_mr(pd, addr, len, access);
    return hv_reg(pd, addr, len, (uintptr_t)addr, (unsigned)access, 0);
}

HV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
                                         int access)
{
    if (!HV_CTX(pd))
        return hv_real.r_ibv_reg_mr_iova(pd, addr, len, iova, access);
    return hv_reg(pd, addr, len, iova, (unsigned)access, 1);
}

HV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len,
                                          uint64_t iova, unsigned int access)
{
    if (!HV_CTX(pd))
        return hv_real.r_ibv_reg_mr_iova2(pd, addr, len, iova, access);
    return hv_reg(pd, addr, len, iova, access, 1);
}

HV_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
    HvContext *ctx = HV_CTX(ibmr);
    HvMr *mr = (HvMr *)ibmr;
    int r = 0;

    if (!ctx)
        return hv_real.r_ibv_dereg_mr(ibmr);
    hv_wait_phys(ctx);
    pthread_mutex_lock(&hv.lock);
    if (mr->phys)
        r = hv_real.r_ibv_dereg_mr(mr->phys);
    if (!r) {
        pthread_mutex_lock(&ctx->lock);
        hv_map_del(&ctx->lkey, mr->pub.lkey);
        HV_UNLINK(ctx->mrs, mr);
        pthread_mutex_unlock(&ctx->lock);
    }
    pthread_mutex_unlock(&hv.lock);
    if (!r)
        free(mr);
    return r;
}

/* ---- completion channels and CQs ---------------------------------------------------------- */

HV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c)
{
    HvContext *ctx = hv_ctx_of(c);
    HvChan *ch;

    if (!ctx)
        return hv_real.r_ibv_create_comp_channel(c);
    if (hv_wait_phys(ctx)) {
        errno = ENODEV;
        return NULL;
    }
    ch = calloc(1, sizeof(*ch));
    if (!ch)
        return NULL;
    ch->pub.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (ch->pub.fd < 0) {
        free(ch);
        return NULL;
    }
    ch->phys = hv_real.r_ibv_create_comp_channel(ctx->phys);
    if (!ch->phys) {
        int e = errno;
        close(ch->pub.fd);
        free(ch);
        errno = e;
        return NULL;
    }
    hv_nonblock(ch->phys->fd);
    pthread_mutex_init(&ch->lock, NULL);
    ch->ctx = ctx;
    ch->pub.context = c;
    ch->pub.refcnt = 0;
    pthread_mutex_lock(&hv.lock);
    HV_LINK(ctx->chans, ch);
    pthread_mutex_unlock(&hv.lock);
    hv_evt_kick();
    return &ch->pub;
}

HV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ibch)
{
    HvContext *ctx = HV_CTX(ibch);
    HvChan *ch = (HvChan *)ibch;
    int r;

    if (!ctx)
        return hv_real.r_ibv_destroy_comp_channel(ibch);
    HV_DESTROY(ctx, ctx->chans, ch, hv_real.r_ibv_destroy_comp_channel, r);
    hv_evt_kick();
    if (r)
        return r;
    close(ch->pub.fd);
    free(ch->events);
    free(ch);
    return 0;
}

/* Creates @cq's physical CQ on the context's current device. */
int hv_cq_make(HvCq *cq)
{
    cq->phys = hv_real.r_ibv_create_cq(cq->ctx->phys, cq->cqe, cq, cq->chan ? cq->chan->phys : NULL,
                                       cq->comp_vector);
    return cq->phys ? 0 : (errno ? errno : EIO);
}

HV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *cq_ctx,
                                       struct ibv_comp_channel *channel, int vec)
{
    HvContext *ctx = hv_ctx_of(c);
    HvCq *cq;
    int r;

    if (!ctx)
        return hv_real.r_ibv_create_cq(c, cqe, cq_ctx, channel, vec);
    if (hv_wait_phys(ctx)) {
        errno = ENODEV;
        return NULL;
    }
    cq = calloc(1, sizeof(*cq));
    if (!cq)
        return NULL;
    cq->ctx = ctx;
    cq->chan = (HvChan *)channel;
    cq->cqe = cqe;
    cq->comp_vector = vec;
    r = hv_cq_make(cq);
    if (r) {
        free(cq);
        errno = r;
        return NULL;
    }
    pthread_mutex_init(&cq->lock, NULL);
    cq->pub.context = c;
    cq->pub.channel = channel;
    cq->pub.cq_context = cq_ctx;
    cq->pub.handle = cq->phys->handle;
    cq->pub.cqe = cq->phys->cqe;
    pthread_mutex_init(&cq->pub.mutex, NULL);
    pthread_cond_init(&cq->pub.cond, NULL);
    pthread_mutex_lock(&hv.lock);
    HV_LINK(ctx->cqs, cq);
    pthread_mutex_unlock(&hv.lock);
    return &cq->pub;
}

HV_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
    HvContext *ctx = HV_CTX(ibcq);
    HvCq *cq = (HvCq *)ibcq;
    int r;

    if (!ctx)
        return hv_real.r_ibv_resize_cq(ibcq, cqe);
    if (hv_wait_phys(ctx))
        return ENODEV;
    pthread_mutex_lock(&cq->lock);
    r = hv_real.r_ibv_resize_cq(cq->phys, cqe);
    if (!r) {
        cq->cqe = cqe;
        cq->pub.cqe = cq->phys->cqe;
    }
    pthread_mutex_unlock(&cq->lock);
    return r;
}

HV_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
    HvContext *ctx = HV_CTX(ibcq);
    HvCq *cq = (HvCq *)ibcq;
    int r;

    if (!ctx)
        return hv_real.r_ibv_destroy_cq(ibcq);
    HV_DESTROY(ctx, ctx->cqs, cq, hv_real.r_ibv_destroy_cq, r);
    /* events of this CQ still queued on its channel must not be returned any more */
    if (!r && cq->chan) {
        pthread_mutex_lock(&cq->chan->lock);
        for (size_t i = 0; i < cq->chan->n; i++)
            if (cq->chan->events[(cq->chan->head + i) % cq->chan->cap] == cq)
                cq->chan->events[(cq->chan->head + i) % cq->chan->cap] = NULL;
        pthread_mutex_unlock(&cq->chan->lock);
    }
    if (r)
        return r;
    free(cq->buf);
    free(cq);
    return 0;
}

HV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ibch, struct ibv_cq **cq, void **cq_ctx)
{
    HvChan *ch = (HvChan *)ibch;

    if (!hv_ctx_of(ibch->context))
        return hv_real.r_ibv_get_cq_event(ibch, cq, cq_ctx);
    for (;;) {
        uint64_t v;
        HvCq *c = NULL;
        int got = 0;

        if (read(ch->pub.fd, &v, sizeof(v)) != sizeof(v))
            return -1;
        pthread_mutex_lock(&ch->lock);
        if (ch->n) {
            c = ch->events[ch->head];
            ch->head = (ch->head + 1) % ch->cap;
            ch->n--;
            got = 1;
        }
        pthread_mutex_unlock(&ch->lock);
        if (got && c) {
            *cq = &c->pub;
            *cq_ctx = c->pub.cq_context;
            return 0;
        }
    }
}

HV_EXPORT void ibv_ack_cq_events(struct ibv_cq *ibcq, unsigned int n)
{
    if (!hv_ctx_of(ibcq->context)) {
        hv_real.r_ibv_ack_cq_events(ibcq, n);
        return;
    }
    pthread_mutex_lock(&ibcq->mutex);
    ibcq->comp_events_completed += n;
    pthread_cond_broadcast(&ibcq->cond);
    pthread_mutex_unlock(&ibcq->mutex);
}

/* ---- SRQ ---------------------------------------------------------------------------------- */

int hv_srq_make(HvSrq *srq)
{
    struct ibv_srq_init_attr a = srq->init;

    a.srq_context = srq;
    srq->phys = hv_real.r_ibv_create_srq(srq->pd->phys, &a);
    return srq->phys ? 0 : (errno ? errno : EIO);
}

HV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *ibpd, struct ibv_srq_init_attr *attr)
{
    HvContext *ctx = HV_CTX(ibpd);
    HvSrq *srq;
    int r;

    if (!ctx)
        return hv_real.r_ibv_create_srq(ibpd, attr);
    if (hv_wait_phys(ctx)) {
        errno = ENODEV;
        return NULL;
    }
    srq = calloc(1, sizeof(*srq));
    if (!srq)
        return NULL;
    srq->pd = (HvPd *)ibpd;
    srq->init = *attr;
    r = hv_srq_make(srq);
    if (r) {
        free(srq);
        errno = r;
        return NULL;
    }
    /* the device's actual sizes, as the real call reports them */
    hv_real.r_ibv_query_srq(srq->phys, &attr->attr);
    if (hv_recvs_reserve(&srq->recvs, &srq->xr, attr->attr.max_wr, attr->attr.max_sge))
        hv_log("SRQ: no memory to record and translate its receives ahead: its posts allocate");
    pthread_mutex_init(&srq->lock, NULL);
    srq->pub.context = &ctx->vctx.context;
    srq->pub.srq_context = attr->srq_context;
    srq->pub.pd = ibpd;
    srq->pub.handle = srq->phys->handle;
    pthread_mutex_init(&srq->pub.mutex, NULL);
    pthread_cond_init(&srq->pub.cond, NULL);
    pthread_mutex_lock(&hv.lock);
    HV_LINK(ctx->srqs, srq);
    pthread_mutex_unlock(&hv.lock);
    return &srq->pub;
}

HV_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *a, int mask)
{
    HvContext *ctx = HV_CTX(ibsrq);
    HvSrq *srq = (HvSrq *)ibsrq;
    int r;

    if (!ctx)
        return hv_real.r_ibv_modify_srq(ibsrq, a, mask);
    if (hv_wait_phys(ctx))
        return ENODEV;
    r = hv_real.r_ibv_modify_srq(srq->phys, a, mask);
    if (!r && (mask & IBV_SRQ_LIMIT))
        srq->init.attr.srq_limit = a->srq_limit;
    if (!r && (mask & IBV_SRQ_MAX_WR))
        srq->init.attr.max_wr = a->max_wr;
    return r;
}

HV_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *a)
{
    HvContext *ctx = HV_CTX(ibsrq);

    if (!ctx)
        return hv_real.r_ibv_query_srq(ibsrq, a);
    if (hv_wait_phys(ctx))
        return ENODEV;
    return hv_real.r_ibv_query_srq(((HvSrq *)ibsrq)->phys, a);
}

HV_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
    HvContext *ctx = HV_CTX(ibsrq);
    HvSrq *srq = (HvSrq *)ibsrq;
    int r;

    if (!ctx)
        return hv_real.r_ibv_destroy_srq(ibsrq);
    HV_DESTROY(ctx, ctx->srqs, srq, hv_real.r_ibv_destroy_srq, r);
    if (r)
        return r;
    hv_fifo_free(&srq->recvs);
    hv_scratch_free(&srq->xr);
    free(srq);
    return 0;
}

/* ---- QP ----------------------------------------------------------------------------------- */

/* Creates @qp's physical QP from its recorded attributes. */
int hv_qp_make(HvQp *qp, struct ibv_qp_init_attr *report)
{
    struct ibv_qp_init_attr a = qp->init;

    a.qp_context = qp;
    a.send_cq = qp->scq ? qp->scq->phys : NULL;
    a.recv_cq = qp->rcq ? qp->rcq->phys : NULL;
    a.srq = qp->srq ? qp->srq->phys : NULL;
    qp->phys = hv_real.r_ibv_create_qp(qp->pd->phys, &a);
    if (!qp->phys)
        return errno ? errno : EIO;
    if (report)
        report->cap = a.cap;
    return 0;
}

/* A virtual QPN for @phys: the same number unless another live QP of the process has it. */
uint32_t hv_qpn_pick(HvContext *ctx, uint32_t phys)
{
    (void)ctx;
    static uint32_t next_synth = 0xff0000u;
    uint32_t v = phys;

    for (;;) {
        int clash = 0;

        for (HvContext *c = hv.ctxs; c; c = c->next)
            if (hv_map_get(&c->vqpn, v, NULL))
                clash = 1;
        if (!clash && hv_route_taken(v))
            clash = 1;
        if (!clash)
            return v;
        v = next_synth++ & 0xffffff;
    }
}

HV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *ibpd, struct ibv_qp_init_attr *attr)
{
    HvContext *ctx = HV_CTX(ibpd);
    HvQp *qp;
    int r;

    if (!ctx)
        return hv_real.r_ibv_create_qp(ibpd, attr);
    if (hv_wait_phys(ctx)) {
        errno = ENODEV;
        return NULL;
    }
    if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC &&
        attr->qp_type != IBV_QPT_UD) {
        hv_unsupported("ibv_create_qp of this QP type");
        errno = EOPNOTSUPP;
        return NULL;
    }
    qp = calloc(1, sizeof(*qp));
    if (!qp)
        return NULL;
    qp->pd = (HvPd *)ibpd;
    qp->scq = (HvCq *)attr->send_cq;
    qp->rcq = (HvCq *)attr->recv_cq;
    qp->srq = (HvSrq *)attr->srq;
    qp->init = *attr;
    r = hv_qp_make(qp, attr);
    if (r) {
        free(qp);
        errno = r;
        return NULL;
    }
    qp->init.cap = attr->cap;
    if ((!qp->srq &&
         hv_recvs_reserve(&qp->recvs, &qp->xr, attr->cap.max_recv_wr, attr->cap.max_recv_sge)) ||
        hv_scratch_reserve(&qp->xs, attr->cap.max_send_wr, sizeof(struct ibv_send_wr),
                           (size_t)attr->cap.max_send_wr * attr->cap.max_send_sge))
        hv_log("QP: no memory to record and translate its work requests ahead: its posts allocate");
    pthread_mutex_init(&qp->lock, NULL);
    qp->pub.context = &ctx->vctx.context;
    qp->pub.qp_context = attr->qp_context;
    qp->pub.pd = ibpd;
    qp->pub.send_cq = attr->send_cq;
    qp->pub.recv_cq = attr->recv_cq;
    qp->pub.srq = attr->srq;
    qp->pub.handle = qp->phys->handle;
    qp->pub.state = IBV_QPS_RESET;
    qp->pub.qp_type = attr->qp_type;
    pthread_mutex_init(&qp->pub.mutex, NULL);
    pthread_cond_init(&qp->pub.cond, NULL);
    pthread_mutex_lock(&hv.lock);
    pthread_mutex_lock(&ctx->lock);
    qp->pub.qp_num = hv_qpn_pick(ctx, qp->phys->qp_num);
    hv_map_put(&ctx->qpn, qp->phys->qp_num, (uintptr_t)qp);
    hv_map_put(&ctx->vqpn, qp->pub.qp_num, (uintptr_t)qp);
    HV_LINK(ctx->qps, qp);
    pthread_mutex_unlock(&ctx->lock);
    pthread_mutex_unlock(&hv.lock);
    if (qp->pub.qp_num != qp->phys->qp_num)
        hv_log("QP got the synthetic number %u (physical %u)", qp->pub.qp_num, qp->phys->qp_num);
    hv_qp_route_add(qp);
    return &qp->pub;
}

HV_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
    HvContext *ctx = HV_CTX(ibqp);
    HvQp *qp = (HvQp *)ibqp;
    struct ibv_qp_attr a;
    HvMap keys = {0};
    uint32_t pqpn = 0;
    int looked = 0, r;

    if (!ctx)
        return hv_real.r_ibv_modify_qp(ibqp, attr, mask);
    if (hv_wait_phys(ctx))
        return ENODEV;
    a = *attr;
    /* a new peer of a connected QP: its physical numbers (either end may have swapped since
     * the program learnt them), asked before the QP lock is taken: it is a network call */
    if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RTR && (mask & IBV_QP_DEST_QPN) &&
        (mask & IBV_QP_AV) && attr->ah_attr.is_global && qp->init.qp_type != IBV_QPT_UD &&
        qp->peer_vqpn != attr->dest_qp_num) {
        pqpn = hv_lookup_peer(qp, attr, &keys);
        looked = 1;
    }
    pthread_mutex_lock(&qp->lock);
    if (mask & IBV_QP_DEST_QPN) {
        if (qp->peer_vqpn != attr->dest_qp_num) {
            /* a new peer: what the lookup found, else no translation */
            qp->peer_vqpn = attr->dest_qp_num;
            qp->peer_pqpn = looked ? pqpn : attr->dest_qp_num;
            hv_map_clear(&qp->peer_rkeys);
            if (looked) {
                qp->peer_rkeys = keys;
                memset(&keys, 0, sizeof(keys));
            }
        }
        a.dest_qp_num = qp->peer_pqpn;
    }
    r = hv_real.r_ibv_modify_qp(qp->phys, &a, mask);
    if (!r && (mask & IBV_QP_STATE)) {
        qp->state = attr->qp_state;
        qp->pub.state = attr->qp_state;
        switch (attr->qp_state) {
        case IBV_QPS_INIT:
            qp->a_init = *attr;
            qp->m_init = mask;
            break;
        case IBV_QPS_RTR:
            qp->a_rtr = *attr;
            qp->m_rtr = mask;
            /* jobs (issue 18): the agent's inventory lists whom this process talks to; not a
             * loopback connection to its own GID (UCX connects RC QPs to themselves): that
             * pauses no other guest (--dry-run listed it as a peer). */
            if ((mask & IBV_QP_AV) && (mask & IBV_QP_DEST_QPN) && attr->ah_attr.is_global) {
                union ibv_gid own;

                if (hv_real.r_ibv_query_gid(qp->pd->ctx->phys, attr->ah_attr.port_num,
                                            attr->ah_attr.grh.sgid_index, &own) != 0 ||
                    memcmp(own.raw, attr->ah_attr.grh.dgid.raw, sizeof(own.raw)) != 0)
                    hv_report_peer(attr->ah_attr.grh.dgid.raw, attr->dest_qp_num);
            }
            break;
        case IBV_QPS_RTS:
            qp->a_rts = *attr;
            qp->m_rts = mask;
            if (qp->init.qp_type != IBV_QPT_UD)
                hv_debug("QP %u connected to QP %u", qp->pub.qp_num, qp->peer_vqpn);
            break;
        case IBV_QPS_RESET:
            qp->m_init = qp->m_rtr = qp->m_rts = 0;
            break;
        default:
            break;
        }
    }
    pthread_mutex_unlock(&qp->lock);
    hv_map_clear(&keys);
    return r;
}

HV_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask,
                           struct ibv_qp_init_attr *init)
{
    HvContext *ctx = HV_CTX(ibqp);
    HvQp *qp = (HvQp *)ibqp;
    int r;

    if (!ctx)
        return hv_real.r_ibv_query_qp(ibqp, a, mask, init);
    if (hv_wait_phys(ctx))
        return ENODEV;
    r = hv_real.r_ibv_query_qp(qp->phys, a, mask, init);
    if (r)
        return r;
    a->dest_qp_num = qp->peer_vqpn;
    init->qp_context = qp->pub.qp_context;
    init->send_cq = qp->pub.send_cq;
    init->recv_cq = qp->pub.recv_cq;
    init->srq = qp->pub.srq;
    return 0;
}

HV_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
    HvContext *ctx = HV_CTX(ibqp);
    HvQp *qp = (HvQp *)ibqp;
    int r = 0;

    if (!ctx)
        return hv_real.r_ibv_destroy_qp(ibqp);
    hv_wait_phys(ctx);
    hv_qp_route_del(qp);
    pthread_mutex_lock(&hv.lock);
    if (qp->phys) {
        uint32_t pqpn = qp->phys->qp_num;

        r = hv_real.r_ibv_destroy_qp(qp->phys);
        if (!r) {
            pthread_mutex_lock(&ctx->lock);
            hv_map_del(&ctx->qpn, pqpn);
            pthread_mutex_unlock(&ctx->lock);
        }
    }
    if (!r) {
        pthread_mutex_lock(&ctx->lock);
        hv_map_del(&ctx->vqpn, qp->pub.qp_num);
        HV_UNLINK(ctx->qps, qp);
        pthread_mutex_unlock(&ctx->lock);
    }
    pthread_mutex_unlock(&hv.lock);
    if (r)
        return r;
    hv_sendq_free(&qp->queued);
    hv_scratch_free(&qp->xs);
    hv_scratch_free(&qp->xr);
    hv_fifo_free(&qp->recvs);
    hv_map_clear(&qp->peer_rkeys);
    hv_wx_free(qp);
    free(qp);
    return 0;
}

HV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *ibqp, enum ibv_wr_opcode op, uint32_t f)
{
    HvContext *ctx = HV_CTX(ibqp);

    if (!ctx)
        return hv_real.r_ibv_query_qp_data_in_order(ibqp, op, f);
    if (hv_wait_phys(ctx))
        return 0;
    return hv_real.r_ibv_query_qp_data_in_order(((HvQp *)ibqp)->phys, op, f);
}

HV_EXPORT int ibv_query_ece(struct ibv_qp *ibqp, struct ibv_ece *ece)
{
    HvContext *ctx = HV_CTX(ibqp);

    if (!ctx)
        return hv_real.r_ibv_query_ece(ibqp, ece);
    if (hv_wait_phys(ctx))
        return ENODEV;
    return hv_real.r_ibv_query_ece(((HvQp *)ibqp)->phys, ece);
}

HV_EXPORT int ibv_set_ece(struct ibv_qp *ibqp, struct ibv_ece *ece)
{
    HvContext *ctx = HV_CTX(ibqp);

    if (!ctx)
        return hv_real.r_ibv_set_ece(ibqp, ece);
    if (hv_wait_phys(ctx))
        return ENODEV;
    return hv_real.r_ibv_set_ece(((HvQp *)ibqp)->phys, ece);
}

HV_EXPORT int ibv_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *g, uint16_t lid)
{
    if (!HV_CTX(ibqp))
        return hv_real.r_ibv_attach_mcast(ibqp, g, lid);
    return hv_unsupported("ibv_attach_mcast");
}

HV_EXPORT int ibv_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *g, uint16_t lid)
{
    if (!HV_CTX(ibqp))
        return hv_real.r_ibv_detach_mcast(ibqp, g, lid);
    return hv_unsupported("ibv_detach_mcast");
}

HV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *ibqp)
{
    struct ibv_qp_ex *(*real)(struct ibv_qp *) = (struct ibv_qp_ex * (*)(struct ibv_qp *))
        dlvsym(hv_real_lib, "ibv_qp_to_qp_ex", "IBVERBS_1.6");

    if (!HV_CTX(ibqp))
        return real ? real(ibqp) : NULL;
    /* as rdma-core: only a QP created by ibv_create_qp_ex with send_ops_flags has one */
    return ((HvQp *)ibqp)->ex ? &((HvQp *)ibqp)->pubx : NULL;
}

/* ---- the ibv_wr_* API (ibv_qp_ex) -----------------------------------------------------------
 * The layer builds ibv_send_wr lists from the wr_* calls and posts them through its own
 * post_send at wr_complete: the same queueing during a swap and the same translation. */

#define HV_WX_OPS                                                                                  \
    (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE |              \
     IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |                               \
     IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

static void hv_wx_free(HvQp *qp)
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

/* verbs_context.create_qp_ex: rdma-core's ibv_create_qp_ex calls it for any comp_mask other
 * than the PD alone. The PD with send_ops_flags the layer implements is served; anything else
 * is refused with EOPNOTSUPP, as without the op. */
static struct ibv_qp *hv_op_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a)
{
    struct ibv_qp *ibqp;

    (void)c;
    if ((a->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) ||
        !(a->comp_mask & IBV_QP_INIT_ATTR_PD) ||
        ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (a->send_ops_flags & ~HV_WX_OPS))) {
        hv_unsupported("ibv_create_qp_ex with these attributes");
        errno = EOPNOTSUPP;
        return NULL;
    }
    ibqp = ibv_create_qp(a->pd, (struct ibv_qp_init_attr *)a);
    if (ibqp && (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && hv_qp_ex_init((HvQp *)ibqp)) {
        ibv_destroy_qp(ibqp);
        errno = ENOMEM;
        return NULL;
    }
    return ibqp;
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

/* ---- AH ----------------------------------------------------------------------------------- */

HV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *ibpd, struct ibv_ah_attr *attr)
{
    HvContext *ctx = HV_CTX(ibpd);
    HvAh *ah;

    if (!ctx)
        return hv_real.r_ibv_create_ah(ibpd, attr);
    if (hv_wait_phys(ctx)) {
        errno = ENODEV;
        return NULL;
    }
    ah = calloc(1, sizeof(*ah));
    if (!ah)
        return NULL;
    ah->pd = (HvPd *)ibpd;
    ah->attr = *attr;
    ah->phys = hv_real.r_ibv_create_ah(ah->pd->phys, attr);
    if (!ah->phys) {
        int e = errno;
        free(ah);
        errno = e;
        return NULL;
    }
    ah->pub.context = &ctx->vctx.context;
    ah->pub.pd = ibpd;
    ah->pub.handle = ah->phys->handle;
    pthread_mutex_lock(&hv.lock);
    HV_LINK(ctx->ahs, ah);
    pthread_mutex_unlock(&hv.lock);
    return &ah->pub;
}

HV_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
    HvContext *ctx = HV_CTX(ibah);
    HvAh *ah = (HvAh *)ibah;
    int r;

    if (!ctx)
        return hv_real.r_ibv_destroy_ah(ibah);
    if (ah->stale)
        hv_real.r_ibv_destroy_ah(ah->stale);
    ah->stale = NULL;
    HV_DESTROY(ctx, ctx->ahs, ah, hv_real.r_ibv_destroy_ah, r);
    if (!r)
        free(ah);
    return r;
}

HV_EXPORT int ibv_init_ah_from_wc(struct ibv_context *c, uint8_t port, struct ibv_wc *wc,
                                  struct ibv_grh *grh, struct ibv_ah_attr *a)
{
    HV_PHYS_CTX(c, hv_real.r_ibv_init_ah_from_wc(c, port, wc, grh, a));
    return hv_real.r_ibv_init_ah_from_wc(ctx->phys, port, wc, grh, a);
}

HV_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
                                               struct ibv_grh *grh, uint8_t port)
{
    struct ibv_ah_attr a;

    if (ibv_init_ah_from_wc(pd->context, port, wc, grh, &a))
        return NULL;
    return ibv_create_ah(pd, &a);
}

/* ---- async events ------------------------------------------------------------------------- */

HV_EXPORT int ibv_get_async_event(struct ibv_context *c, struct ibv_async_event *ev)
{
    HvContext *ctx = hv_ctx_of(c);

    if (!ctx)
        return hv_real.r_ibv_get_async_event(c, ev);
    for (;;) {
        uint64_t v;
        int got = 0;

        if (read(c->async_fd, &v, sizeof(v)) != sizeof(v))
            return -1;
        pthread_mutex_lock(&ctx->lock);
        if (ctx->aev_n) {
            *ev = ctx->aev[ctx->aev_head];
            ctx->aev_head = (ctx->aev_head + 1) % ctx->aev_cap;
            ctx->aev_n--;
            got = 1;
        }
        pthread_mutex_unlock(&ctx->lock);
        if (got)
            return 0;
    }
}

HV_EXPORT void ibv_ack_async_event(struct ibv_async_event *ev)
{
    struct ibv_context *c = NULL;

    switch (ev->event_type) {
    case IBV_EVENT_CQ_ERR:
        c = ev->element.cq->context;
        break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
        c = ev->element.srq->context;
        break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
        c = ev->element.qp->context;
        break;
    default:
        /* device and port events carry no object: under the layer every context the program
         * holds is a shadow, whose events the layer acked on the physical context already */
        pthread_mutex_lock(&hv.lock);
        c = hv.ctxs ? &hv.ctxs->vctx.context : NULL;
        pthread_mutex_unlock(&hv.lock);
        if (!c)
            hv_real.r_ibv_ack_async_event(ev);
        return;
    }
    if (hv_ctx_of(c))
        return;
    hv_real.r_ibv_ack_async_event(ev);
}

/* ---- IBVERBS_1.0 compat symbols: refused (they take the pre-1.1 structures). Here, beside
 * the 1.1 definitions, because .symver names the default version of those too. ---------- */
#define HV_COMPAT(name)                                                                            \
    void *hv_compat_##name(void);                                                                  \
    HV_EXPORT void *hv_compat_##name(void)                                                         \
    {                                                                                              \
        hv_unsupported(#name "@IBVERBS_1.0");                                                      \
        return NULL;                                                                               \
    }                                                                                              \
    __asm__(".symver hv_compat_" #name "," #name "@IBVERBS_1.0");                                 \
    __asm__(".symver " #name "," #name "@@IBVERBS_1.1, remove");
#include "hv-compat.def"
#undef HV_COMPAT
