/* Fault injection for the netlink adapter: forwards to another adapter and fails the calls a
 * spec names. Same spec language as engine/virt-fault.c (HOTMIG_FAULT_INJECT), with the
 * operations prefixed "netlink_" so that one spec can name calls of both adapters. */
#define G_LOG_DOMAIN "hm-hotplug"

#include <string.h>

#include "hotplug/netlink-priv.h"

typedef struct {
    char *op;    /* without the prefix: "link_info", "vf_set_guid" */
    char *label; /* NULL: any host */
    guint nth;   /* 0: every matching call */
    guint seen;
} FaultRule;

typedef struct {
    HotplugNetlink *inner;
    char *label;
    GPtrArray *rules; /* FaultRule */
} NetlinkFault;

static const char *const fault_ops[] = {"link_info", "vf_set_guid", "vf_get_guids"};

static void fault_rule_free(FaultRule *rule)
{
    g_free(rule->op);
    g_free(rule->label);
    g_free(rule);
}

/* TRUE when this call must fail. Every rule that matches the call counts it. */
static gboolean fault_hit(NetlinkFault *fault, const char *op, GError **error)
{
    FaultRule *hit = NULL;

    for (guint i = 0; i < fault->rules->len; i++) {
        FaultRule *rule = g_ptr_array_index(fault->rules, i);

        if (!g_str_equal(rule->op, op))
            continue;
        if (rule->label && !g_str_equal(rule->label, fault->label))
            continue;
        rule->seen++;
        if (!hit && (rule->nth == 0 || rule->nth == rule->seen))
            hit = rule;
    }
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

/* Parses one rule. Returns TRUE with *ret_rule NULL for a rule of another adapter. */
static gboolean fault_rule_parse(const char *text, FaultRule **ret_rule, GError **error)
{
    g_autofree char *rule_text = g_strstrip(g_strdup(text));
    g_autofree char *op = g_strdup(rule_text);
    const char *name;
    FaultRule *rule;
    char *hash;
    char *at;
    guint64 nth = 0;
    gboolean known = FALSE;

    if (!g_str_has_prefix(op, HOTPLUG_NETLINK_FAULT_PREFIX)) {
        *ret_rule = NULL;
        return TRUE;
    }
    hash = strchr(op, '#');
    if (hash) {
        *hash++ = '\0';
        if (!g_ascii_string_to_unsigned(hash, 10, 1, G_MAXUINT, &nth, NULL)) {
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
                        "Fault spec '%s': call count '%s' is not a positive number", rule_text,
                        hash);
            return FALSE;
        }
    }
    at = strchr(op, '@');
    if (at)
        *at++ = '\0';
    name = op + strlen(HOTPLUG_NETLINK_FAULT_PREFIX);
    for (gsize i = 0; i < G_N_ELEMENTS(fault_ops); i++)
        known = known || g_str_equal(name, fault_ops[i]);
    if (!known) {
        g_set_error(
            error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
            "Fault spec '%s': unknown operation '%s' (netlink_link_info, netlink_vf_set_guid, netlink_vf_get_guids)",
            rule_text, op);
        return FALSE;
    }
    if (at && !g_str_equal(at, "source") && !g_str_equal(at, "destination")) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
                    "Fault spec '%s': host must be 'source' or 'destination', not '%s'", rule_text,
                    at);
        return FALSE;
    }
    rule = g_new0(FaultRule, 1);
    rule->op = g_strdup(name);
    rule->label = g_strdup(at);
    rule->nth = (guint)nth;
    *ret_rule = rule;
    return TRUE;
}

HotplugNetlink *hotplug_netlink_fault_wrap(HotplugNetlink *inner, const char *label,
                                           const char *spec, GError **error)
{
    g_autoptr(HotplugNetlink) owned = inner;
    g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func((GDestroyNotify)fault_rule_free);
    g_auto(GStrv) parts = NULL;
    NetlinkFault *fault;

    g_return_val_if_fail(inner != NULL, NULL);
    g_return_val_if_fail(label != NULL, NULL);
    g_return_val_if_fail(spec != NULL, NULL);

    parts = g_strsplit(spec, ",", -1);
    for (char **p = parts; *p; p++) {
        FaultRule *rule = NULL;

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
