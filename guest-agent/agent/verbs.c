/* The verbs adapter: the only file of the agent that talks to libibverbs. */
#include "guest-agent/agent/agent-priv.h"

#include <errno.h>
#include <infiniband/verbs.h>

/* ibv_get_device_list() rescans sysfs on each call, so a hot-plugged device shows up. */
static char *agent_ibverbs_find_active_device(gpointer data, GError **error)
{
    g_autofree char *found = NULL;
    struct ibv_device **list;
    int n = 0;

    errno = 0;
    list = ibv_get_device_list(&n);
    if (!list) {
        hm_set_error_errno(error, errno ? errno : ENOSYS, "No RDMA support");
        return NULL;
    }
    for (int i = 0; i < n && !found; i++) {
        struct ibv_context *ctx = ibv_open_device(list[i]);
        struct ibv_device_attr attr;

        if (!ctx)
            continue;
        if (ibv_query_device(ctx, &attr) == 0) {
            for (guint8 port = 1; port <= attr.phys_port_cnt && !found; port++) {
                struct ibv_port_attr port_attr;

                if (ibv_query_port(ctx, port, &port_attr) == 0 &&
                    port_attr.state == IBV_PORT_ACTIVE)
                    found = g_strdup(ibv_get_device_name(list[i]));
            }
        }
        ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
    if (!found) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_FAILED,
                    "No RDMA device with an active port among %d device(s)", n);
        return NULL;
    }
    return g_steal_pointer(&found);
}

const AgentVerbsOps agent_verbs_ibverbs = {
    .find_active_device = agent_ibverbs_find_active_device,
};
