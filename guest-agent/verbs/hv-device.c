/* libhotmig-verbs, objects layer: devices and contexts: the device list, open and close, the
 * queries, async events. */
#include "hv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* verbs.h turns these into inline wrappers; the layer defines the symbols themselves. */
#undef ibv_query_port

void (*hv_open_hook)(void);

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
    if (hv_open_hook)
        hv_open_hook(); /* the agent link: registration with the agent */
    ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_init(&ctx->lock, NULL);
    ctx->dev = dev;
    ctx->sb_lease = -1;
    ctx->vctx.sz = sizeof(struct verbs_context);
    ctx->vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
    ctx->vctx.context.device = &dev->dev;
    pthread_mutex_init(&ctx->vctx.context.mutex, NULL);
    hv_ops_install(ctx);
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
    if (ctx->sb) /* its objects went with the program's (ibv_dealloc_pd ... before) */
        hv_real.r_ibv_close_device(ctx->sb);
    if (ctx->sb_lease >= 0)
        close(ctx->sb_lease);
    pthread_mutex_unlock(&hv.lock);
    hv_evt_kick();
    close(ctx->cmd_efd);
    close(ctx->vctx.context.async_fd);
    hv_map_clear(&ctx->lkey);
    hv_map_clear(&ctx->qpn);
    hv_map_clear(&ctx->vqpn);
    hv_map_clear(&ctx->sb_lkey);
    hv_map_clear(&ctx->sb_qpn);
    hv_map_clear(&ctx->retired);
    hv_map_clear(&ctx->sb_retired);
    free(ctx->aev);
    free(ctx);
    return 0;
}

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

/* The IBVERBS_1.1 defaults of the names hv-compat.c refuses at IBVERBS_1.0. */
HV_DEFAULT_VERSION(ibv_ack_async_event);
HV_DEFAULT_VERSION(ibv_close_device);
HV_DEFAULT_VERSION(ibv_free_device_list);
HV_DEFAULT_VERSION(ibv_get_async_event);
HV_DEFAULT_VERSION(ibv_get_device_guid);
HV_DEFAULT_VERSION(ibv_get_device_list);
HV_DEFAULT_VERSION(ibv_get_device_name);
HV_DEFAULT_VERSION(ibv_open_device);
HV_DEFAULT_VERSION(ibv_query_device);
HV_DEFAULT_VERSION(ibv_query_gid);
HV_DEFAULT_VERSION(ibv_query_pkey);
HV_DEFAULT_VERSION(ibv_query_port);
