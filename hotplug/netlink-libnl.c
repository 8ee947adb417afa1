/* The netlink adapter over libnl-route-3: the only file of hotmig that talks to libnl. */
#define G_LOG_DOMAIN "hm-hotplug"

#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/link/sriov.h>
#include <netlink/socket.h>

#include "hotplug/netlink-priv.h"

typedef struct {
    struct nl_sock *sock;
} NetlinkLibnl;

static void libnl_free(gpointer ctx)
{
    NetlinkLibnl *nl = ctx;

    if (!nl)
        return;
    nl_socket_free(nl->sock); /* closes it */
    g_free(nl);
}

/* Looks @netdev up in the kernel. Returns the link (owned, rtnl_link_put) or NULL with @error
 * set, HOTPLUG_ERROR_NOT_FOUND when there is no such device. */
static struct rtnl_link *libnl_link_get(NetlinkLibnl *nl, const char *netdev, GError **error)
{
    struct rtnl_link *link = NULL;
    int err;

    err = rtnl_link_get_kernel(nl->sock, 0, netdev, &link);
    if (err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV || (err == 0 && !link)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND, "No net device '%s'", netdev);
        return NULL;
    }
    if (err < 0) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NETLINK,
                    "Looking up net device '%s' over netlink: %s", netdev, nl_geterror(err));
        return NULL;
    }
    return link;
}

static gboolean libnl_link_info(gpointer ctx, const char *netdev, int *ret_ifindex,
                                guint *ret_arphrd_type, guint *ret_num_vfs, GError **error)
{
    struct rtnl_link *link = libnl_link_get(ctx, netdev, error);
    uint32_t num_vfs = 0;

    if (!link)
        return FALSE;
    /* IFLA_NUM_VF comes only for a device with a parent (a PCI function); none means 0. */
    if (rtnl_link_get_num_vf(link, &num_vfs) < 0)
        num_vfs = 0;
    *ret_ifindex = rtnl_link_get_ifindex(link);
    *ret_arphrd_type = rtnl_link_get_arptype(link);
    *ret_num_vfs = num_vfs;
    g_debug("Net device '%s': ifindex %d, link type %u, %u VFs", netdev, *ret_ifindex,
            *ret_arphrd_type, *ret_num_vfs);
    rtnl_link_put(link);
    return TRUE;
}

static gboolean libnl_vf_set_guid(gpointer ctx, const char *pf_netdev, guint vf_index,
                                  HotplugGuidKind kind, guint64 guid, GError **error)
{
    NetlinkLibnl *nl = ctx;
    g_autofree char *guid_text = hotplug_guid_format(guid);
    const char *what = hotplug_guid_kind_to_string(kind);
    struct rtnl_link *orig;
    struct rtnl_link *changes;
    struct rtnl_link_vf *vf;
    int err;

    g_return_val_if_fail(what != NULL, FALSE);

    orig = libnl_link_get(nl, pf_netdev, error);
    if (!orig)
        return FALSE;
    changes = rtnl_link_alloc();
    vf = rtnl_link_vf_alloc();
    if (!changes || !vf) {
        err = -NLE_NOMEM;
    } else {
        rtnl_link_vf_set_index(vf, vf_index);
        if (kind == HOTPLUG_GUID_NODE)
            rtnl_link_vf_set_ib_node_guid(vf, guid);
        else
            rtnl_link_vf_set_ib_port_guid(vf, guid);
        err = rtnl_link_vf_add(changes, vf); /* takes its own reference */
        if (err == 0)
            err = rtnl_link_change(nl->sock, orig, changes, 0);
    }
    rtnl_link_vf_put(vf);
    rtnl_link_put(changes);
    rtnl_link_put(orig);

    if (err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND,
                    "Setting the %s GUID of VF %u of '%s' to %s: no net device '%s'", what,
                    vf_index, pf_netdev, guid_text, pf_netdev);
        return FALSE;
    }
    if (err < 0) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NETLINK,
                    "Setting the %s GUID of VF %u of '%s' to %s: %s%s", what, vf_index, pf_netdev,
                    guid_text, nl_geterror(err),
                    err == -NLE_OPNOTSUPP ? " (its driver cannot set VF GUIDs)" : "");
        return FALSE;
    }
    g_debug("Set the %s GUID of VF %u of '%s' to %s", what, vf_index, pf_netdev, guid_text);
    return TRUE;
}

/* What the reply handler found for one VF. */
typedef struct {
    guint vf_index;
    guint64 node_guid;
    guint64 port_guid;
    gboolean have_node;
    gboolean have_port;
    gboolean parsed;
} GuidQuery;

/* One GUID attribute of an IFLA_VF_INFO: struct ifla_vf_guid, checked for size. */
static gboolean libnl_vf_guid_attr(struct nlattr *attr, guint *ret_vf, guint64 *ret_guid)
{
    const struct ifla_vf_guid *g;

    if (!attr || nla_len(attr) < (int)sizeof(*g))
        return FALSE;
    g = nla_data(attr);
    *ret_vf = g->vf;
    *ret_guid = g->guid;
    return TRUE;
}

static int libnl_guid_reply(struct nl_msg *msg, void *arg)
{
    GuidQuery *q = arg;
    struct nlattr *tb[IFLA_MAX + 1];
    struct nlattr *info;
    int rem;

    if (nlmsg_parse(nlmsg_hdr(msg), sizeof(struct ifinfomsg), tb, IFLA_MAX, NULL) < 0)
        return NL_SKIP;
    q->parsed = TRUE;
    if (!tb[IFLA_VFINFO_LIST])
        return NL_STOP;
    nla_for_each_nested(info, tb[IFLA_VFINFO_LIST], rem) {
        struct nlattr *vf[IFLA_VF_MAX + 1];
        guint index;
        guint64 guid;

        if (nla_type(info) != IFLA_VF_INFO || nla_parse_nested(vf, IFLA_VF_MAX, info, NULL) < 0)
            continue;
        if (libnl_vf_guid_attr(vf[IFLA_VF_IB_NODE_GUID], &index, &guid) && index == q->vf_index) {
            q->node_guid = guid;
            q->have_node = TRUE;
        }
        if (libnl_vf_guid_attr(vf[IFLA_VF_IB_PORT_GUID], &index, &guid) && index == q->vf_index) {
            q->port_guid = guid;
            q->have_port = TRUE;
        }
    }
    return NL_STOP;
}

static gboolean libnl_vf_get_guids(gpointer ctx, const char *pf_netdev, guint vf_index,
                                   guint64 *ret_node_guid, guint64 *ret_port_guid, GError **error)
{
    NetlinkLibnl *nl = ctx;
    struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
    struct rtnl_link *link = libnl_link_get(nl, pf_netdev, error);
    struct nl_msg *msg = NULL;
    struct nl_cb *cb = NULL;
    GuidQuery q = {.vf_index = vf_index};
    int err;

    if (!link)
        return FALSE;
    ifi.ifi_index = rtnl_link_get_ifindex(link);
    rtnl_link_put(link);

    msg = nlmsg_alloc_simple(RTM_GETLINK, 0);
    {
        /* nl_socket_get_cb() takes a reference: the clone is ours, the socket's is given back. */
        struct nl_cb *sock_cb = nl_socket_get_cb(nl->sock);

        cb = sock_cb ? nl_cb_clone(sock_cb) : NULL;
        nl_cb_put(sock_cb);
    }
    if (!msg || !cb) {
        err = -NLE_NOMEM;
    } else {
        err = nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO);
        if (err == 0)
            err = nla_put_u32(msg, IFLA_EXT_MASK, RTEXT_FILTER_VF);
        if (err == 0)
            err = nl_send_auto(nl->sock, msg);
        if (err >= 0) {
            nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, libnl_guid_reply, &q);
            err = nl_recvmsgs(nl->sock, cb);
        }
        /* The reply, then the kernel's ack: read it, or the next request trips over it. */
        if (err >= 0 && q.parsed)
            err = nl_wait_for_ack(nl->sock);
    }
    nl_cb_put(cb);
    nlmsg_free(msg);
    if (err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND,
                    "Reading the GUIDs of VF %u of '%s': no net device '%s'", vf_index, pf_netdev,
                    pf_netdev);
        return FALSE;
    }
    if (err < 0 || !q.parsed) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NETLINK,
                    "Reading the GUIDs of VF %u of '%s': %s", vf_index, pf_netdev,
                    err < 0 ? nl_geterror(err) : "no link in the kernel's reply");
        return FALSE;
    }
    if (!q.have_node || !q.have_port) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_UNKNOWN,
                    "The kernel does not report the GUIDs of VF %u of '%s' (its driver has no ndo_get_vf_guid)",
                    vf_index, pf_netdev);
        return FALSE;
    }
    *ret_node_guid = q.node_guid;
    *ret_port_guid = q.port_guid;
    return TRUE;
}

static const HotplugNetlinkOps libnl_ops = {
    .link_info = libnl_link_info,
    .vf_set_guid = libnl_vf_set_guid,
    .vf_get_guids = libnl_vf_get_guids,
    .free = libnl_free,
};

HotplugNetlink *hotplug_netlink_new(GError **error)
{
    NetlinkLibnl *nl = g_new0(NetlinkLibnl, 1);
    int err;

    nl->sock = nl_socket_alloc();
    if (!nl->sock) {
        g_free(nl);
        g_set_error_literal(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NETLINK,
                            "Opening a netlink socket: out of memory");
        return NULL;
    }
    /* SOCK_CLOEXEC: libnl sets it when the libc has it. */
    err = nl_connect(nl->sock, NETLINK_ROUTE);
    if (err < 0) {
        libnl_free(nl);
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NETLINK,
                    "Opening a netlink socket (NETLINK_ROUTE): %s", nl_geterror(err));
        return NULL;
    }
    return hotplug_netlink_new_with_ops(&libnl_ops, nl);
}
