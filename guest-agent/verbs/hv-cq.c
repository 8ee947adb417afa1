/* libhotmig-verbs, objects layer: completion channels and CQs. */
#include "hv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

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
    if (!r && ch->sb) /* its standby twin (hv-standby.c) */
        hv_real.r_ibv_destroy_comp_channel(ch->sb);
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
    if (!r && cq->sb) /* its standby twin (hv-standby.c) */
        hv_real.r_ibv_destroy_cq(cq->sb);
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

/* The IBVERBS_1.1 defaults of the names hv-compat.c refuses at IBVERBS_1.0. */
HV_DEFAULT_VERSION(ibv_ack_cq_events);
HV_DEFAULT_VERSION(ibv_create_cq);
HV_DEFAULT_VERSION(ibv_destroy_cq);
HV_DEFAULT_VERSION(ibv_get_cq_event);
HV_DEFAULT_VERSION(ibv_resize_cq);
