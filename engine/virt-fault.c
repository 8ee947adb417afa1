/* Fault injection: an adapter that forwards to another one and fails the calls a spec names.
 * migrate-vm enables it from HOTMIG_FAULT_INJECT; tests walk every call with it. */
#include <string.h>

#include "engine/virt.h"

typedef struct {
    OrchVirt parent;
    OrchVirt *inner;
    GPtrArray *rules; /* HmFaultRule */
} VirtFault;

typedef struct {
    OrchVirtChannel parent;
    OrchVirtChannel *inner;
} VirtFaultChannel;

static const char *const fault_ops[] = {
    "domain_state",   "domain_is_persistent", "domain_get_xml", "device_detach",
    "device_attach",  "migrate",              "channel_open",   "channel_send",
    "domain_abort_job",
    "channel_recv",   "nodedev_list_pci_xml", "domain_list_xml",
    "domain_capable", "node_get_info", "domain_list_info", "watch_migrated_in",
};

/* TRUE when this call must fail. Every rule that matches the call counts it. */
static gboolean fault_hit(VirtFault *virt, const char *op, GError **error)
{
    HmFaultRule *hit = hm_fault_rules_hit(virt->rules, op, virt->parent.label);

    if (!hit)
        return FALSE;
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_HYPERVISOR, "injected fault: %s on %s host (call %u)",
                op, virt->parent.label, hit->seen);
    return TRUE;
}

#define INNER(v) (((VirtFault *)(v))->inner)

static gboolean fault_domain_state(OrchVirt *v, const char *d, OrchVirtDomainState *s, GError **e)
{
    return !fault_hit((VirtFault *)v, "domain_state", e) &&
           INNER(v)->ops->domain_state(INNER(v), d, s, e);
}

static gboolean fault_domain_is_persistent(OrchVirt *v, const char *d, gboolean *p, GError **e)
{
    return !fault_hit((VirtFault *)v, "domain_is_persistent", e) &&
           INNER(v)->ops->domain_is_persistent(INNER(v), d, p, e);
}

static char *fault_domain_get_xml(OrchVirt *v, const char *d, GError **e)
{
    if (fault_hit((VirtFault *)v, "domain_get_xml", e))
        return NULL;
    return INNER(v)->ops->domain_get_xml(INNER(v), d, e);
}

static gboolean fault_device_detach(OrchVirt *v, const char *d, const char *alias,
                                    gboolean config, guint timeout_ms, GError **e)
{
    return !fault_hit((VirtFault *)v, "device_detach", e) &&
           INNER(v)->ops->device_detach(INNER(v), d, alias, config, timeout_ms, e);
}

static gboolean fault_device_attach(OrchVirt *v, const char *d, const char *xml, gboolean config,
                                    GError **e)
{
    return !fault_hit((VirtFault *)v, "device_attach", e) &&
           INNER(v)->ops->device_attach(INNER(v), d, xml, config, e);
}

static gboolean fault_migrate(OrchVirt *v, const char *d, const char *dest,
                              const OrchMigrateParams *p, OrchMigrateStats *s, GError **e)
{
    return !fault_hit((VirtFault *)v, "migrate", e) &&
           INNER(v)->ops->migrate(INNER(v), d, dest, p, s, e);
}

static gboolean fault_domain_abort_job(OrchVirt *v, const char *d, GError **e)
{
    return !fault_hit((VirtFault *)v, "domain_abort_job", e) &&
           INNER(v)->ops->domain_abort_job(INNER(v), d, e);
}

static OrchVirtChannel *fault_channel_open(OrchVirt *v, const char *d, const char *name,
                                           gboolean force, GError **e)
{
    VirtFaultChannel *chan;
    OrchVirtChannel *inner;

    if (fault_hit((VirtFault *)v, "channel_open", e))
        return NULL;
    inner = INNER(v)->ops->channel_open(INNER(v), d, name, force, e);
    if (!inner)
        return NULL;
    chan = g_new0(VirtFaultChannel, 1);
    chan->parent.virt = v;
    chan->inner = inner;
    return &chan->parent;
}

static gboolean fault_channel_send(OrchVirtChannel *c, const void *buf, gsize len,
                                   HmDeadline deadline, GError **e)
{
    OrchVirtChannel *inner = ((VirtFaultChannel *)c)->inner;

    return !fault_hit((VirtFault *)c->virt, "channel_send", e) &&
           inner->virt->ops->channel_send(inner, buf, len, deadline, e);
}

static gssize fault_channel_recv(OrchVirtChannel *c, void *buf, gsize len, HmDeadline deadline,
                                 GError **e)
{
    OrchVirtChannel *inner = ((VirtFaultChannel *)c)->inner;

    if (fault_hit((VirtFault *)c->virt, "channel_recv", e))
        return -1;
    return inner->virt->ops->channel_recv(inner, buf, len, deadline, e);
}

static void fault_channel_close(OrchVirtChannel *c)
{
    orch_virt_channel_close(((VirtFaultChannel *)c)->inner);
    g_free(c);
}

static GPtrArray *fault_nodedev_list_pci_xml(OrchVirt *v, GError **e)
{
    if (fault_hit((VirtFault *)v, "nodedev_list_pci_xml", e))
        return NULL;
    return INNER(v)->ops->nodedev_list_pci_xml(INNER(v), e);
}

static gboolean fault_domain_capable(OrchVirt *v, const XmlDomainNeeds *needs,
                                     gboolean *ret_capable, char **ret_detail, GError **e)
{
    if (fault_hit((VirtFault *)v, "domain_capable", e))
        return FALSE;
    return INNER(v)->ops->domain_capable(INNER(v), needs, ret_capable, ret_detail, e);
}

static GPtrArray *fault_domain_list_xml(OrchVirt *v, GError **e)
{
    if (fault_hit((VirtFault *)v, "domain_list_xml", e))
        return NULL;
    return INNER(v)->ops->domain_list_xml(INNER(v), e);
}

static gboolean fault_node_get_info(OrchVirt *v, OrchVirtNodeInfo *ret_info, GError **e)
{
    return !fault_hit((VirtFault *)v, "node_get_info", e) &&
           INNER(v)->ops->node_get_info(INNER(v), ret_info, e);
}

static GPtrArray *fault_domain_list_info(OrchVirt *v, gboolean with_xml, GError **e)
{
    if (fault_hit((VirtFault *)v, "domain_list_info", e))
        return NULL;
    return INNER(v)->ops->domain_list_info(INNER(v), with_xml, e);
}

static void fault_free(OrchVirt *v)
{
    VirtFault *virt = (VirtFault *)v;

    orch_virt_free(virt->inner);
    g_ptr_array_unref(virt->rules);
    orch_virt_clear(v);
    g_free(virt);
}

static guint fault_watch_migrated_in(OrchVirt *v, const char *d, OrchVirtMigratedInFunc fn,
                                     gpointer opaque, GDestroyNotify destroy, GError **e)
{
    if (fault_hit((VirtFault *)v, "watch_migrated_in", e))
        return 0;
    return orch_virt_watch_migrated_in(INNER(v), d, fn, opaque, destroy, e);
}

static void fault_unwatch(OrchVirt *v, guint watch)
{
    orch_virt_unwatch(INNER(v), watch);
}

static const OrchVirtOps fault_ops_table = {
    .domain_state = fault_domain_state,
    .domain_is_persistent = fault_domain_is_persistent,
    .domain_get_xml = fault_domain_get_xml,
    .device_detach = fault_device_detach,
    .device_attach = fault_device_attach,
    .migrate = fault_migrate,
    .domain_abort_job = fault_domain_abort_job,
    .watch_migrated_in = fault_watch_migrated_in,
    .unwatch = fault_unwatch,
    .channel_open = fault_channel_open,
    .channel_send = fault_channel_send,
    .channel_recv = fault_channel_recv,
    .channel_close = fault_channel_close,
    .nodedev_list_pci_xml = fault_nodedev_list_pci_xml,
    .domain_list_xml = fault_domain_list_xml,
    .domain_capable = fault_domain_capable,
    .node_get_info = fault_node_get_info,
    .domain_list_info = fault_domain_list_info,
    .free = fault_free,
};

/* An operation of this adapter's, or of the netlink and hotmigd client wrappers: one spec
 * serves every adapter. */
static gboolean fault_op_known(const char *op)
{
    for (gsize i = 0; i < G_N_ELEMENTS(fault_ops); i++)
        if (g_str_equal(op, fault_ops[i]))
            return TRUE;
    return g_str_has_prefix(op, "netlink_") || g_str_has_prefix(op, "vfd_");
}

OrchVirt *orch_virt_fault_wrap(OrchVirt *inner, const char *spec, GError **error)
{
    g_autoptr(OrchVirt) owned = inner;
    g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func((GDestroyNotify)hm_fault_rule_free);
    g_auto(GStrv) parts = g_strsplit(spec, ",", -1);
    VirtFault *virt;

    for (char **p = parts; *p; p++) {
        g_autoptr(GError) local = NULL;
        HmFaultRule *rule;

        if (!**p)
            continue;
        rule = hm_fault_rule_parse(*p, fault_op_known, NULL, &local);
        if (!rule) {
            g_set_error_literal(error, ORCH_ERROR, ORCH_ERROR_INVALID, local->message);
            return NULL;
        }
        g_ptr_array_add(rules, rule);
    }
    virt = g_new0(VirtFault, 1);
    orch_virt_init(&virt->parent, &fault_ops_table, inner->uri, inner->label);
    virt->inner = g_steal_pointer(&owned);
    virt->rules = g_steal_pointer(&rules);
    return &virt->parent;
}
