/* The netlink adapter: what hm-hotplug asks of the kernel's rtnetlink, as a table of
 * operations. netlink-libnl.c is the only file that talks to libnl; tests bring a fake;
 * netlink-fault.c wraps any adapter to fail chosen calls (fault injection).
 *
 * Every operation follows the house error rules: it returns FALSE and sets @error (domain
 * HOTPLUG_ERROR) exactly when it fails, and leaves its ret_ outputs untouched then. Net devices
 * are named by their interface name in the network namespace the adapter was opened in. */
#pragma once

#include <glib.h>

#include "hotplug/hotplug.h"

G_BEGIN_DECLS

/* Which GUID of a VF's InfiniBand port (IFLA_VF_IB_NODE_GUID, IFLA_VF_IB_PORT_GUID). */
typedef enum {
    HOTPLUG_GUID_NODE,
    HOTPLUG_GUID_PORT,
    HOTPLUG_GUID_LAST,
} HotplugGuidKind;

HM_ENUM_DECL(hotplug_guid_kind, HotplugGuidKind)

typedef struct {
    /* Looks up net device @netdev: its interface index, its link type (ARPHRD_*: 1 Ethernet,
     * 32 InfiniBand, 772 loopback) and how many VFs its PCI device has enabled (0 when it has
     * none or is no PCI device). HOTPLUG_ERROR_NOT_FOUND when there is no such device,
     * HOTPLUG_ERROR_NETLINK for any other failure. */
    gboolean (*link_info)(gpointer ctx, const char *netdev, int *ret_ifindex,
                          guint *ret_arphrd_type, guint *ret_num_vfs, GError **error);
    /* Sets the @kind GUID of VF @vf_index through its PF @pf_netdev: one RTM_NEWLINK request
     * whose IFLA_VFINFO_LIST holds one IFLA_VF_INFO with one GUID attribute (the kernel acts on
     * the first GUID attribute of a VF_INFO only). HOTPLUG_ERROR_NOT_FOUND when @pf_netdev does
     * not exist, HOTPLUG_ERROR_NETLINK when the kernel refuses (a driver without VF GUID
     * support answers EOPNOTSUPP). */
    gboolean (*vf_set_guid)(gpointer ctx, const char *pf_netdev, guint vf_index,
                            HotplugGuidKind kind, guint64 guid, GError **error);
    /* Reads the node and port GUIDs of VF @vf_index of @pf_netdev: one RTM_GETLINK with
     * RTEXT_FILTER_VF, IFLA_VF_IB_NODE_GUID and IFLA_VF_IB_PORT_GUID of the VF's
     * IFLA_VF_INFO (parsed from the raw message: libnl, 3.7 up to 3.12 at least, does not
     * expose them). The kernel reports them only for drivers with ndo_get_vf_guid (IPoIB, since
     * early 2020): HOTPLUG_ERROR_UNKNOWN when the reply carries none for that VF,
     * HOTPLUG_ERROR_NOT_FOUND when @pf_netdev does not exist, HOTPLUG_ERROR_NETLINK otherwise. */
    gboolean (*vf_get_guids)(gpointer ctx, const char *pf_netdev, guint vf_index,
                             guint64 *ret_node_guid, guint64 *ret_port_guid, GError **error);
    /* Frees @ctx; NULL when the adapter does not own it. */
    void (*free)(gpointer ctx);
} HotplugNetlinkOps;

struct HotplugNetlink {
    const HotplugNetlinkOps *ops; /* borrowed, static */
    gpointer ctx;                 /* passed to every op; freed by ops->free */
};

/* A handle over @ops (borrowed, must outlive the handle) and @ctx (owned when ops->free is
 * set). For tests and wrappers; hotplug_netlink_new() is the libnl one. Owned result. */
HotplugNetlink *hotplug_netlink_new_with_ops(const HotplugNetlinkOps *ops, gpointer ctx);

/* The fault spec operation names of the two calls ("netlink_" + the op). */
#define HOTPLUG_NETLINK_FAULT_PREFIX "netlink_"

G_END_DECLS
