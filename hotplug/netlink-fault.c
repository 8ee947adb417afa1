/* Fault injection for the netlink adapter: forwards to another adapter and fails the calls a
 * spec names. Same spec language as engine/virt-fault.c (HOTMIG_FAULT_INJECT), with the
 * operations prefixed "netlink_" so that one spec can name calls of both adapters. */
#define G_LOG_DOMAIN "hm-hotplug"

#include <string.h>

#include "hotplug/netlink-priv.h"

typedef struct {
    HotplugNetlink *inner;
    char *label;
    GPtrArray *rules; /* HmFaultRule, their operations without the prefix */
} NetlinkFault;

static const char *const fault_ops[] = {"link_info", "vf_set_guid", "vf_get_guids"};

/* TRUE when this call must fail. Every rule that matches the call counts it. */
static gboolean fault_hit(NetlinkFault *fault, const char *op, GError **error)
{
    HmFaultRule *hit = hm_fault_rules_hit(fault->rules, op, fault->label);

    if (!hit)
        return FALSE;
    g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NETLINK,
                "injected fault: " HOTPLUG_NETLINK_FAULT_PREFIX "%s on %s host (call %u)", op,
                fault->label, hit->seen);
    return TRUE;
}

static gboolean fault_link_info(gpointer ctx, const char *netdev, int *ret_ifindex,
                                guint *ret_arphrd_type, guint *ret_num_vfs, GError **error)
{
    NetlinkFault *fault = ctx;

    return !fault_hit(fault, "link_info", error) &&
           fault->inner->ops->link_info(fault->inner->ctx, netdev, ret_ifindex, ret_arphrd_type,
                                        ret_num_vfs, error);
}

static gboolean fault_vf_set_guid(gpointer ctx, const char *pf_netdev, guint vf_index,
                                  HotplugGuidKind kind, guint64 guid, GError **error)
{
    NetlinkFault *fault = ctx;

    return !fault_hit(fault, "vf_set_guid", error) &&
           fault->inner->ops->vf_set_guid(fault->inner->ctx, pf_netdev, vf_index, kind, guid,
                                          error);
}

static gboolean fault_vf_get_guids(gpointer ctx, const char *pf_netdev, guint vf_index,
                                   guint64 *ret_node_guid, guint64 *ret_port_guid, GError **error)
{
    NetlinkFault *fault = ctx;

    return !fault_hit(fault, "vf_get_guids", error) &&
           fault->inner->ops->vf_get_guids(fault->inner->ctx, pf_netdev, vf_index, ret_node_guid,
                                           ret_port_guid, error);
}

static void fault_free(gpointer ctx)
{
    NetlinkFault *fault = ctx;

    hotplug_netlink_free(fault->inner);
    g_free(fault->label);
    g_ptr_array_unref(fault->rules);
    g_free(fault);
}

static const HotplugNetlinkOps fault_ops_table = {
    .link_info = fault_link_info,
    .vf_set_guid = fault_vf_set_guid,
    .vf_get_guids = fault_vf_get_guids,
    .free = fault_free,
};

static gboolean fault_op_known(const char *op)
{
    for (gsize i = 0; i < G_N_ELEMENTS(fault_ops); i++)
        if (g_str_equal(op + strlen(HOTPLUG_NETLINK_FAULT_PREFIX), fault_ops[i]))
            return TRUE;
    return FALSE;
}

/* Parses one rule. Returns TRUE with *ret_rule NULL for a rule of another adapter. */
static gboolean fault_rule_parse(const char *text, HmFaultRule **ret_rule, GError **error)
{
    g_autofree char *rule_text = g_strstrip(g_strdup(text));
    g_autoptr(GError) local = NULL;
    HmFaultRule *rule;
    char *name;

    *ret_rule = NULL;
    if (!g_str_has_prefix(rule_text, HOTPLUG_NETLINK_FAULT_PREFIX))
        return TRUE;
    rule = hm_fault_rule_parse(rule_text, fault_op_known,
                               "netlink_link_info, netlink_vf_set_guid, netlink_vf_get_guids",
                               &local);
    if (!rule) {
        g_set_error_literal(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, local->message);
        return FALSE;
    }
    name = g_strdup(rule->op + strlen(HOTPLUG_NETLINK_FAULT_PREFIX));
    g_free(rule->op);
    rule->op = name;
    *ret_rule = rule;
    return TRUE;
}

HotplugNetlink *hotplug_netlink_fault_wrap(HotplugNetlink *inner, const char *label,
                                           const char *spec, GError **error)
{
    g_autoptr(HotplugNetlink) owned = inner;
    g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func((GDestroyNotify)hm_fault_rule_free);
    g_auto(GStrv) parts = NULL;
    NetlinkFault *fault;

    g_return_val_if_fail(inner != NULL, NULL);
    g_return_val_if_fail(label != NULL, NULL);
    g_return_val_if_fail(spec != NULL, NULL);

    parts = g_strsplit(spec, ",", -1);
    for (char **p = parts; *p; p++) {
        HmFaultRule *rule = NULL;

        if (!fault_rule_parse(*p, &rule, error))
            return NULL;
        if (rule)
            g_ptr_array_add(rules, rule);
    }
    fault = g_new0(NetlinkFault, 1);
    fault->inner = g_steal_pointer(&owned);
    fault->label = g_strdup(label);
    fault->rules = g_steal_pointer(&rules);
    return hotplug_netlink_new_with_ops(&fault_ops_table, fault);
}
