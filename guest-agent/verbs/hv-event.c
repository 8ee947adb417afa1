/* libhotmig-verbs, data path layer: the event thread: physical completion channels and async
 * events handed to the shadows. */
#include "hv.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

            struct ibv_comp_channel *pch = ch->phys && ch->phys->fd == fd ? ch->phys
                                           : ch->sb && ch->sb->fd == fd   ? ch->sb
                                                                          : NULL;

            if (!pch)
                continue;
            while (hv_real.r_ibv_get_cq_event(pch, &pcq, &pctx) == 0) {
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
            for (HvChan *ch = ctx->chans; ch && n < 63; ch = ch->next) {
                if (ch->phys) {
                    pfd[n].fd = ch->phys->fd;
                    pfd[n++].events = POLLIN;
                }
                if (ch->sb) { /* the standby device's (hv-standby.c) */
                    pfd[n].fd = ch->sb->fd;
                    pfd[n++].events = POLLIN;
                }
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

void hv_evt_start(void)
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

void hv_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);

    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}
