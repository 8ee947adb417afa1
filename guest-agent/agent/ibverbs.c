/* The verbs adapter: the only file of the agent that talks to libibverbs. */
#include "guest-agent/agent/agent-priv.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/epoll.h>
#include <unistd.h>

#define AGENT_GIDS_MAX 16 /* per port, reported by inventory */

static const char *agent_ibverbs_link_layer(guint8 link_layer)
{
    switch (link_layer) {
    case IBV_LINK_LAYER_INFINIBAND:
        return "InfiniBand";
    case IBV_LINK_LAYER_ETHERNET:
        return "Ethernet";
    default:
        return "unspecified";
    }
}

/* ibv_get_device_list() rescans sysfs on each call, so a hot-plugged device shows up. */
static struct ibv_device **agent_ibverbs_devices(int *n, GError **error)
{
    struct ibv_device **list;

    errno = 0;
    list = ibv_get_device_list(n);
    if (!list)
        hm_set_error_errno(error, errno ? errno : ENOSYS, "No RDMA support");
    return list;
}

static gboolean agent_ibverbs_has_active_port(struct ibv_context *ctx)
{
    struct ibv_device_attr attr;

    if (ibv_query_device(ctx, &attr) != 0)
        return FALSE;
    for (guint8 port = 1; port <= attr.phys_port_cnt; port++) {
        struct ibv_port_attr port_attr;

        if (ibv_query_port(ctx, port, &port_attr) == 0 && port_attr.state == IBV_PORT_ACTIVE)
            return TRUE;
    }
    return FALSE;
}

static char *agent_ibverbs_find_active_device(gpointer data, const char *prefer, const char *except,
                                              GError **error)
{
    g_autofree char *found = NULL;
    struct ibv_device **list;
    int n = 0;

    list = agent_ibverbs_devices(&n, error);
    if (!list)
        return NULL;
    for (int i = 0; i < n; i++) {
        const char *name = ibv_get_device_name(list[i]);
        struct ibv_context *ctx;

        if ((found && (!prefer || !g_str_equal(name, prefer))) || g_strcmp0(name, except) == 0)
            continue;
        ctx = ibv_open_device(list[i]);
        if (!ctx)
            continue;
        if (agent_ibverbs_has_active_port(ctx)) {
            g_free(found);
            found = g_strdup(name);
        }
        ibv_close_device(ctx);
        if (found && (!prefer || g_str_equal(found, prefer)))
            break;
    }
    ibv_free_device_list(list);
    if (!found) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_FAILED,
                    "No RDMA device with an active port among %d device(s)", n);
        return NULL;
    }
    return g_steal_pointer(&found);
}

static void agent_ibverbs_add_gid(AgentRdmaPort *p, const union ibv_gid *gid)
{
    static const guint8 zero[16];
    char text[INET6_ADDRSTRLEN];

    if (p->gids->len < AGENT_GIDS_MAX && memcmp(gid->raw, zero, 16) != 0 &&
        inet_ntop(AF_INET6, gid->raw, text, sizeof(text)))
        g_ptr_array_add(p->gids, g_strdup(text));
}

static int agent_ibverbs_gid_entry_cmp(const void *pa, const void *pb)
{
    const struct ibv_gid_entry *a = pa, *b = pb;

    if (a->port_num != b->port_num)
        return a->port_num < b->port_num ? -1 : 1;
    return a->gid_index < b->gid_index ? -1 : a->gid_index > b->gid_index;
}

/* The valid GIDs of every port in one call (ibv_query_gid_table(): one ioctl, where querying
 * index by index reads a sysfs file per entry: 1024 of them per soft-RoCE port, ~0.2 s under
 * TCG); index by index when the kernel or provider cannot. In index order, as before. */
static void agent_ibverbs_add_gids(struct ibv_context *ctx, AgentRdmaPort **ports,
                                   const struct ibv_port_attr *attrs, guint8 n_ports)
{
    gsize max = 0;
    g_autofree struct ibv_gid_entry *entries = NULL;
    ssize_t n;

    for (guint8 i = 0; i < n_ports; i++)
        max += ports[i] ? (gsize)attrs[i].gid_tbl_len : 0;
    if (!max)
        return;
    entries = g_new0(struct ibv_gid_entry, max);
    n = ibv_query_gid_table(ctx, entries, max, 0);
    if (n >= 0) {
        qsort(entries, (gsize)n, sizeof(*entries), agent_ibverbs_gid_entry_cmp);
        for (ssize_t k = 0; k < n; k++) {
            guint32 port = entries[k].port_num;

            if (port >= 1 && port <= n_ports && ports[port - 1])
                agent_ibverbs_add_gid(ports[port - 1], &entries[k].gid);
        }
        return;
    }
    for (guint8 i = 0; i < n_ports; i++) {
        for (int idx = 0; ports[i] && idx < attrs[i].gid_tbl_len &&
                          ports[i]->gids->len < AGENT_GIDS_MAX;
             idx++) {
            union ibv_gid gid;

            if (ibv_query_gid(ctx, i + 1, idx, &gid) == 0)
                agent_ibverbs_add_gid(ports[i], &gid);
        }
    }
}

static void agent_ibverbs_add_ports(AgentRdmaDevice *dev, struct ibv_context *ctx,
                                    const struct ibv_device_attr *attr)
{
    guint8 n_ports = attr->phys_port_cnt;
    g_autofree AgentRdmaPort **ports = g_new0(AgentRdmaPort *, n_ports + 1);
    g_autofree struct ibv_port_attr *attrs = g_new0(struct ibv_port_attr, n_ports + 1);

    for (guint8 port = 1; port <= n_ports; port++) {
        struct ibv_port_attr *pa = &attrs[port - 1];

        if (ibv_query_port(ctx, port, pa) != 0)
            continue;
        /* "ACTIVE", as the IB spec names the states (ibv_port_state_str() says "active") */
        ports[port - 1] =
            agent_rdma_device_add_port(dev, port, agent_rdma_port_state_name(pa->state),
                                       agent_ibverbs_link_layer(pa->link_layer), pa->lid);
    }
    agent_ibverbs_add_gids(ctx, ports, attrs, n_ports);
}

static GPtrArray *agent_ibverbs_list_devices(gpointer data, GError **error)
{
    g_autoptr(GPtrArray) devices =
        g_ptr_array_new_with_free_func((GDestroyNotify)agent_rdma_device_free);
    struct ibv_device **list;
    int n = 0;

    list = agent_ibverbs_devices(&n, error);
    if (!list)
        return NULL;
    for (int i = 0; i < n; i++) {
        guint64 guid = be64toh(ibv_get_device_guid(list[i]));
        g_autofree char *guid_text = g_strdup_printf(
            "%04x:%04x:%04x:%04x", (guint)(guid >> 48) & 0xffff, (guint)(guid >> 32) & 0xffff,
            (guint)(guid >> 16) & 0xffff, (guint)guid & 0xffff);
        g_autoptr(AgentRdmaDevice) dev =
            agent_rdma_device_new(ibv_get_device_name(list[i]), guid_text);
        struct ibv_context *ctx = ibv_open_device(list[i]);
        struct ibv_device_attr attr;

        if (ctx && ibv_query_device(ctx, &attr) == 0)
            agent_ibverbs_add_ports(dev, ctx, &attr);
        if (ctx)
            ibv_close_device(ctx);
        g_ptr_array_add(devices, g_steal_pointer(&dev));
    }
    ibv_free_device_list(list);
    return g_steal_pointer(&devices);
}

/* The async event fds of the devices present, gathered in one epoll set. */
struct AgentPortWatch {
    int epfd;
    GPtrArray *ctxs; /* struct ibv_context *, open */
};

static void agent_ibverbs_port_watch_free(AgentPortWatch *watch)
{
    if (!watch)
        return;
    for (guint i = 0; i < watch->ctxs->len; i++)
        ibv_close_device(watch->ctxs->pdata[i]);
    g_ptr_array_unref(watch->ctxs);
    if (watch->epfd >= 0)
        close(watch->epfd);
    g_free(watch);
}

static AgentPortWatch *agent_ibverbs_port_watch_new(gpointer data, int *ret_fd, GError **error)
{
    AgentPortWatch *watch;
    struct ibv_device **list;
    int n = 0;

    list = agent_ibverbs_devices(&n, error);
    if (!list)
        return NULL;
    watch = g_new0(AgentPortWatch, 1);
    watch->ctxs = g_ptr_array_new();
    watch->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (watch->epfd < 0) {
        hm_set_error_errno(error, errno, "Cannot create an epoll set");
        ibv_free_device_list(list);
        agent_ibverbs_port_watch_free(watch);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        struct ibv_context *ctx = ibv_open_device(list[i]);
        struct epoll_event ev = {.events = EPOLLIN};
        int fl;

        if (!ctx)
            continue;
        ev.data.ptr = ctx;
        fl = fcntl(ctx->async_fd, F_GETFL);
        if (fl < 0 || fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
            epoll_ctl(watch->epfd, EPOLL_CTL_ADD, ctx->async_fd, &ev) < 0) {
            g_debug("cannot watch the events of RDMA device '%s': %s", ibv_get_device_name(list[i]),
                    g_strerror(errno));
            ibv_close_device(ctx);
            continue;
        }
        g_ptr_array_add(watch->ctxs, ctx);
    }
    ibv_free_device_list(list);
    *ret_fd = watch->epfd;
    return watch;
}

static guint agent_ibverbs_port_watch_drain(AgentPortWatch *watch)
{
    struct epoll_event evs[16];
    guint count = 0;
    int n = epoll_wait(watch->epfd, evs, G_N_ELEMENTS(evs), 0);

    for (int i = 0; i < n; i++) {
        struct ibv_context *ctx = evs[i].data.ptr;
        struct ibv_async_event event;

        /* The fd is non-blocking: this ends when no event waits. */
        while (count < 1024 && ibv_get_async_event(ctx, &event) == 0) {
            g_debug("RDMA async event: %s", ibv_event_type_str(event.event_type));
            ibv_ack_async_event(&event);
            count++;
        }
    }
    return count;
}

const AgentVerbsOps agent_ibverbs_ops = {
    .find_active_device = agent_ibverbs_find_active_device,
    .list_devices = agent_ibverbs_list_devices,
    .port_watch_new = agent_ibverbs_port_watch_new,
    .port_watch_drain = agent_ibverbs_port_watch_drain,
    .port_watch_free = agent_ibverbs_port_watch_free,
};
