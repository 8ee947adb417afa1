/* hm-hotplug: the InfiniBand identity (node and port GUIDs) of a VF, set through its PF with
 * rtnetlink. The kernel is reached through the netlink adapter (netlink-priv.h). */
#define G_LOG_DOMAIN "hm-hotplug"

#include <net/if.h>
#include <net/if_arp.h>
#include <string.h>

#include "hotplug/netlink-priv.h"

HM_ENUM_IMPL(hotplug_guid_kind, HotplugGuidKind, HOTPLUG_GUID_LAST, "node", "port")

/* ---- the adapter handle -------------------------------------------------------------------- */

HotplugNetlink *hotplug_netlink_new_with_ops(const HotplugNetlinkOps *ops, gpointer ctx)
{
    HotplugNetlink *nl;

    g_return_val_if_fail(ops != NULL, NULL);
    g_return_val_if_fail(ops->link_info != NULL && ops->vf_set_guid != NULL, NULL);

    nl = g_new0(HotplugNetlink, 1);
    nl->ops = ops;
    nl->ctx = ctx;
    return nl;
}

void hotplug_netlink_free(HotplugNetlink *nl)
{
    if (!nl)
        return;
    if (nl->ops->free)
        nl->ops->free(nl->ctx);
    g_free(nl);
}

/* ---- GUID text ----------------------------------------------------------------------------- */

/* How much of a rejected input a message quotes. */
#define QUOTE_MAX 40

/* @text for an error message: at most QUOTE_MAX bytes, control and non-ASCII bytes
 * escaped, "..." when cut. Owned. */
static char *text_quote(const char *text)
{
    gsize len = strlen(text);
    g_autofree char *head = g_strndup(text, MIN(len, QUOTE_MAX));
    g_autofree char *escaped = g_strescape(head, NULL);

    return g_strconcat(escaped, len > QUOTE_MAX ? "..." : "", NULL);
}

/* Parses exactly @n hex digits at @p into *acc (shifted in). */
static gboolean hex_digits(const char *p, guint n, guint64 *acc)
{
    for (guint i = 0; i < n; i++) {
        int v = g_ascii_xdigit_value(p[i]);

        if (v < 0)
            return FALSE;
        *acc = (*acc << 4) | (guint)v;
    }
    return TRUE;
}

/* Groups of @digits hex digits separated by ':', @groups of them, 64 bits in all. */
static gboolean guid_parse_grouped(const char *text, guint groups, guint digits, guint64 *ret)
{
    guint64 acc = 0;

    if (strlen(text) != groups * digits + groups - 1)
        return FALSE;
    for (guint g = 0; g < groups; g++) {
        const char *p = text + g * (digits + 1);

        if (!hex_digits(p, digits, &acc))
            return FALSE;
        if (g + 1 < groups && p[digits] != ':')
            return FALSE;
    }
    *ret = acc;
    return TRUE;
}

gboolean hotplug_guid_parse(const char *text, guint64 *ret_guid, GError **error)
{
    guint64 guid = 0;
    gboolean ok;
    g_autofree char *quoted = NULL;

    g_return_val_if_fail(text != NULL, FALSE);
    g_return_val_if_fail(ret_guid != NULL, FALSE);

    if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        gsize n = strlen(text + 2);

        ok = n >= 1 && n <= 16 && hex_digits(text + 2, (guint)n, &guid);
    } else if (strlen(text) == 19) {
        ok = guid_parse_grouped(text, 4, 4, &guid);
    } else {
        ok = guid_parse_grouped(text, 8, 2, &guid);
    }
    if (!ok) {
        quoted = text_quote(text);
        g_set_error(
            error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
            "GUID '%s' is not of the form 0x0002c90300a1b2c3, 0002:c903:00a1:b2c3 or 00:02:c9:03:00:a1:b2:c3",
            quoted);
        return FALSE;
    }
    *ret_guid = guid;
    return TRUE;
}

char *hotplug_guid_format(guint64 guid)
{
    return g_strdup_printf("%04x:%04x:%04x:%04x", (guint)(guid >> 48) & 0xffff,
                           (guint)(guid >> 32) & 0xffff, (guint)(guid >> 16) & 0xffff,
                           (guint)guid & 0xffff);
}

/* ---- applying the identity ----------------------------------------------------------------- */

/* The kernel's rule for interface names (dev_valid_name): 1..IFNAMSIZ-1 bytes, not "." or
 * "..", no '/', ':' or white space. */
static gboolean netdev_name_valid(const char *name)
{
    gsize len = strlen(name);

    if (len == 0 || len >= IFNAMSIZ || g_str_equal(name, ".") || g_str_equal(name, ".."))
        return FALSE;
    for (const char *p = name; *p; p++) {
        if (*p == '/' || *p == ':' || g_ascii_isspace(*p) || g_ascii_iscntrl(*p))
            return FALSE;
    }
    return TRUE;
}

/* A name for a link type in messages. */
static const char *arphrd_name(guint type)
{
    switch (type) {
    case ARPHRD_ETHER:
        return "Ethernet";
    case ARPHRD_INFINIBAND:
        return "InfiniBand";
    case ARPHRD_LOOPBACK:
        return "loopback";
    case ARPHRD_NONE:
        return "none";
    default:
        return "other";
    }
}

gboolean hotplug_ib_identity_apply(HotplugNetlink *nl, const char *pf_netdev, guint vf_index,
                                   guint64 node_guid, guint64 port_guid, char **ret_note,
                                   GError **error)
{
    g_autofree char *node_text = NULL;
    g_autofree char *port_text = NULL;
    g_autoptr(GError) local_error = NULL;
    int ifindex = 0;
    guint type = 0;
    guint num_vfs = 0;

    g_return_val_if_fail(nl != NULL, FALSE);
    g_return_val_if_fail(pf_netdev != NULL, FALSE);
    g_return_val_if_fail(ret_note != NULL, FALSE);

    node_text = hotplug_guid_format(node_guid);
    port_text = hotplug_guid_format(port_guid);

    if (!netdev_name_valid(pf_netdev)) {
        g_autofree char *quoted = text_quote(pf_netdev);

        g_set_error(
            error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
            "Giving VF %u of '%s' node GUID %s and port GUID %s: '%s' is not a valid interface name (1 to %d bytes, no '/', ':' or white space)",
            vf_index, quoted, node_text, port_text, quoted, IFNAMSIZ - 1);
        return FALSE;
    }
    if (node_guid == 0 || port_guid == 0) {
        g_set_error(
            error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
            "Giving VF %u of '%s' node GUID %s and port GUID %s: the %s GUID must not be zero",
            vf_index, pf_netdev, node_text, port_text, node_guid == 0 ? "node" : "port");
        return FALSE;
    }

    if (!nl->ops->link_info(nl->ctx, pf_netdev, &ifindex, &type, &num_vfs, &local_error)) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local_error),
                                   "Giving VF %u of '%s' node GUID %s and port GUID %s: ", vf_index,
                                   pf_netdev, node_text, port_text);
        return FALSE;
    }
    if (type != ARPHRD_INFINIBAND) {
        g_debug("PF '%s' (ifindex %d) has link type %u: no InfiniBand identity to set", pf_netdev,
                ifindex, type);
        *ret_note = g_strdup_printf(
            "PF '%s' is not InfiniBand (link type %u, %s): the GUIDs of VF %u were left as they are",
            pf_netdev, type, arphrd_name(type), vf_index);
        return TRUE;
    }
    if (vf_index >= num_vfs) {
        if (num_vfs == 0)
            g_set_error(
                error, HOTPLUG_ERROR, HOTPLUG_ERROR_NO_VF,
                "Giving VF %u of '%s' node GUID %s and port GUID %s: '%s' has no VFs enabled",
                vf_index, pf_netdev, node_text, port_text, pf_netdev);
        else
            g_set_error(
                error, HOTPLUG_ERROR, HOTPLUG_ERROR_NO_VF,
                "Giving VF %u of '%s' node GUID %s and port GUID %s: '%s' has %u VFs (0 to %u)",
                vf_index, pf_netdev, node_text, port_text, pf_netdev, num_vfs, num_vfs - 1);
        return FALSE;
    }

    /* One request per GUID: the kernel sets only the first GUID attribute of a VF_INFO. */
    if (!nl->ops->vf_set_guid(nl->ctx, pf_netdev, vf_index, HOTPLUG_GUID_NODE, node_guid,
                              &local_error) ||
        !nl->ops->vf_set_guid(nl->ctx, pf_netdev, vf_index, HOTPLUG_GUID_PORT, port_guid,
                              &local_error)) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local_error),
                                   "Giving VF %u of '%s' node GUID %s and port GUID %s: ", vf_index,
                                   pf_netdev, node_text, port_text);
        return FALSE;
    }
    g_debug("VF %u of '%s' has node GUID %s and port GUID %s", vf_index, pf_netdev, node_text,
            port_text);
    *ret_note = NULL;
    return TRUE;
}

gboolean hotplug_ib_identity_read(HotplugNetlink *nl, const char *pf_netdev, guint vf_index,
                                  guint64 *ret_node_guid, guint64 *ret_port_guid, GError **error)
{
    g_autoptr(GError) local_error = NULL;
    int ifindex = 0;
    guint type = 0;
    guint num_vfs = 0;
    guint64 node = 0;
    guint64 port = 0;

    g_return_val_if_fail(nl != NULL, FALSE);
    g_return_val_if_fail(pf_netdev != NULL, FALSE);
    g_return_val_if_fail(ret_node_guid != NULL && ret_port_guid != NULL, FALSE);

    if (!netdev_name_valid(pf_netdev)) {
        g_autofree char *quoted = text_quote(pf_netdev);

        g_set_error(
            error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
            "Reading the GUIDs of VF %u of '%s': '%s' is not a valid interface name (1 to %d bytes, no '/', ':' or white space)",
            vf_index, quoted, quoted, IFNAMSIZ - 1);
        return FALSE;
    }
    if (!nl->ops->link_info(nl->ctx, pf_netdev, &ifindex, &type, &num_vfs, &local_error)) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local_error),
                                   "Reading the GUIDs of VF %u of '%s': ", vf_index, pf_netdev);
        return FALSE;
    }
    if (type != ARPHRD_INFINIBAND) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_UNKNOWN,
                    "PF '%s' is not InfiniBand (link type %u, %s): VF %u has no GUIDs to read",
                    pf_netdev, type, arphrd_name(type), vf_index);
        return FALSE;
    }
    if (vf_index >= num_vfs) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NO_VF,
                    "Reading the GUIDs of VF %u of '%s': '%s' has %u VFs", vf_index, pf_netdev,
                    pf_netdev, num_vfs);
        return FALSE;
    }
    if (!nl->ops->vf_get_guids(nl->ctx, pf_netdev, vf_index, &node, &port, error))
        return FALSE;
    if (node == 0 || port == 0) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_UNKNOWN,
                    "The kernel reports a zero GUID for VF %u of '%s': it has no identity to carry",
                    vf_index, pf_netdev);
        return FALSE;
    }
    *ret_node_guid = node;
    *ret_port_guid = port;
    return TRUE;
}
