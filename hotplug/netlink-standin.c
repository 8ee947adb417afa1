/* The netlink adapter (netlink-priv.h) for VF stand-ins, the emulated lab's network devices
 * that stand in for VFs ([pool] standins): no kernel driver keeps their GUIDs, so a directory
 * stands in for the PF driver (docs/ib-identity.md "Stand-ins"). Each stand-in that is an
 * InfiniBand VF has a subdirectory DIR/NETDEV holding its GUIDs as two files, `node` and `port`,
 * one line each in the 00:02:c9:03:00:a1:b2:c3 form (as mlx5's
 * /sys/class/infiniband/DEV/device/sriov/N/node and port). Whoever plays the VF's hardware
 * reads them when the VF is plugged (the lab's subnet manager, lab/hm-ib-sm).
 *
 * To hotplug_ib_identity_apply() a stand-in NETDEV is a PF with one VF, index 0: an
 * InfiniBand one when DIR/NETDEV exists, an Ethernet PF with no VFs otherwise (a RoCE
 * stand-in: the skip rule leaves it alone). Each GUID is written on its own, replacing the
 * file (write and rename), as the kernel takes one GUID per request. */
#define G_LOG_DOMAIN "hm-hotplug"

#include <errno.h>
#include <net/if_arp.h>
#include <string.h>

#include <glib/gstdio.h>

#include "hotplug/netlink-priv.h"

/* A GUID file holds one line: 23 characters and a newline; anything longer is not ours. */
#define STANDIN_GUID_FILE_MAX 64

typedef struct {
    char *dir;
} NetlinkStandin;

/* The file of the @kind GUID of stand-in @netdev (owned). */
static char *standin_path(const NetlinkStandin *s, const char *netdev, HotplugGuidKind kind)
{
    return g_build_filename(s->dir, netdev, hotplug_guid_kind_to_string(kind), NULL);
}

/* 00:02:c9:03:00:a1:b2:c3 (owned), the form `ip link` and mlx5's sriov files take. */
static char *standin_guid_text(guint64 guid)
{
    GString *text = g_string_sized_new(24);

    for (int shift = 56; shift >= 0; shift -= 8)
        g_string_append_printf(text, "%02x%s", (guint)(guid >> shift) & 0xff, shift ? ":" : "");
    return g_string_free(text, FALSE);
}

static gboolean standin_link_info(gpointer ctx, const char *netdev, int *ret_ifindex,
                                  guint *ret_arphrd_type, guint *ret_num_vfs, GError **error)
{
    NetlinkStandin *s = ctx;
    g_autofree char *path = g_build_filename(s->dir, netdev, NULL);
    gboolean ib = g_file_test(path, G_FILE_TEST_IS_DIR);

    *ret_ifindex = 0;
    *ret_arphrd_type = ib ? ARPHRD_INFINIBAND : ARPHRD_ETHER;
    *ret_num_vfs = ib ? 1 : 0;
    return TRUE;
}

static gboolean standin_vf_set_guid(gpointer ctx, const char *pf_netdev, guint vf_index,
                                    HotplugGuidKind kind, guint64 guid, GError **error)
{
    NetlinkStandin *s = ctx;
    g_autofree char *path = standin_path(s, pf_netdev, kind);
    g_autofree char *text = standin_guid_text(guid);
    g_autofree char *line = g_strconcat(text, "\n", NULL);
    g_autofree char *shown = hotplug_guid_format(guid);
    g_autoptr(GError) local = NULL;

    if (vf_index != 0) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NO_VF,
                    "Setting the %s GUID of VF %u of stand-in '%s' to %s: a stand-in has VF 0 only",
                    hotplug_guid_kind_to_string(kind), vf_index, pf_netdev, shown);
        return FALSE;
    }
    if (!g_file_set_contents(path, line, -1, &local)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NETLINK,
                    "Setting the %s GUID of VF 0 of stand-in '%s' to %s: %s",
                    hotplug_guid_kind_to_string(kind), pf_netdev, shown, local->message);
        return FALSE;
    }
    g_debug("Set the %s GUID of stand-in '%s' to %s ('%s')", hotplug_guid_kind_to_string(kind),
            pf_netdev, shown, path);
    return TRUE;
}

/* Reads the @kind GUID of stand-in @netdev: HOTPLUG_ERROR_UNKNOWN when none was set,
 * HOTPLUG_ERROR_SYSFS when the file is not one GUID. */
static gboolean standin_guid_read(NetlinkStandin *s, const char *netdev, HotplugGuidKind kind,
                                  guint64 *ret_guid, GError **error)
{
    g_autofree char *path = standin_path(s, netdev, kind);
    g_autofree char *text = NULL;
    g_autoptr(GError) local = NULL;
    gsize len = 0;

    if (!g_file_get_contents(path, &text, &len, &local)) {
        g_set_error(error, HOTPLUG_ERROR,
                    g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT) ? HOTPLUG_ERROR_UNKNOWN
                                                                             : HOTPLUG_ERROR_SYSFS,
                    "Stand-in '%s' has no %s GUID: %s", netdev, hotplug_guid_kind_to_string(kind),
                    local->message);
        return FALSE;
    }
    if (len > STANDIN_GUID_FILE_MAX || strlen(text) != len) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                    "The %s GUID of stand-in '%s' in '%s' is not one line of at most %d bytes",
                    hotplug_guid_kind_to_string(kind), netdev, path, STANDIN_GUID_FILE_MAX);
        return FALSE;
    }
    g_strchomp(text);
    if (!hotplug_guid_parse(text, ret_guid, &local)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS, "The %s GUID of stand-in '%s': %s",
                    hotplug_guid_kind_to_string(kind), netdev, local->message);
        return FALSE;
    }
    return TRUE;
}

static gboolean standin_vf_get_guids(gpointer ctx, const char *pf_netdev, guint vf_index,
                                     guint64 *ret_node_guid, guint64 *ret_port_guid, GError **error)
{
    NetlinkStandin *s = ctx;
    guint64 node = 0;
    guint64 port = 0;

    if (vf_index != 0) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NO_VF,
                    "Reading the GUIDs of VF %u of stand-in '%s': a stand-in has VF 0 only",
                    vf_index, pf_netdev);
        return FALSE;
    }
    if (!standin_guid_read(s, pf_netdev, HOTPLUG_GUID_NODE, &node, error) ||
        !standin_guid_read(s, pf_netdev, HOTPLUG_GUID_PORT, &port, error))
        return FALSE;
    *ret_node_guid = node;
    *ret_port_guid = port;
    return TRUE;
}

static void standin_free(gpointer ctx)
{
    NetlinkStandin *s = ctx;

    g_free(s->dir);
    g_free(s);
}

static const HotplugNetlinkOps standin_ops = {
    .link_info = standin_link_info,
    .vf_set_guid = standin_vf_set_guid,
    .vf_get_guids = standin_vf_get_guids,
    .free = standin_free,
};

HotplugNetlink *hotplug_netlink_standin_new(const char *dir)
{
    NetlinkStandin *s;

    g_return_val_if_fail(dir != NULL && *dir, NULL);

    s = g_new0(NetlinkStandin, 1);
    s->dir = g_strdup(dir);
    return hotplug_netlink_new_with_ops(&standin_ops, s);
}
