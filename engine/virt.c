/* The adapter's common part, and the calls into it: every caller goes through these functions
 * (argument checks, a debug line, "unsupported" for an operation an adapter lacks), never
 * through the table. */
#include "engine/virt.h"

void orch_virt_init(OrchVirt *virt, const OrchVirtOps *ops, const char *uri, const char *label)
{
    virt->ops = ops;
    virt->uri = g_strdup(uri);
    virt->label = g_strdup(label);
}

void orch_virt_clear(OrchVirt *virt)
{
    g_clear_pointer(&virt->uri, g_free);
    g_clear_pointer(&virt->label, g_free);
}

void orch_virt_free(OrchVirt *virt)
{
    if (virt)
        virt->ops->free(virt);
}

void orch_virt_channel_close(OrchVirtChannel *chan)
{
    if (chan)
        chan->virt->ops->channel_close(chan);
}

void orch_virt_domain_info_free(OrchVirtDomainInfo *info)
{
    if (!info)
        return;
    g_free(info->name);
    g_free(info->xml);
    g_free(info);
}

/* ---- the calls ------------------------------------------------------------------------------ */

/* Always FALSE: @virt's adapter has no @op. */
static gboolean virt_unsupported(OrchVirt *virt, const char *op, GError **error)
{
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_HYPERVISOR, "The %s host's adapter cannot %s",
                virt->label, op);
    return FALSE;
}

gboolean orch_virt_domain_state(OrchVirt *virt, const char *domain, OrchVirtDomainState *ret_state,
                                GError **error)
{
    g_return_val_if_fail(virt && domain, FALSE);
    g_debug("%s host: domain_state(%s)", virt->label, domain);
    if (!virt->ops->domain_state)
        return virt_unsupported(virt, "domain_state", error);
    return virt->ops->domain_state(virt, domain, ret_state, error);
}

gboolean orch_virt_domain_is_persistent(OrchVirt *virt, const char *domain,
                                        gboolean *ret_persistent, GError **error)
{
    g_return_val_if_fail(virt && domain, FALSE);
    g_debug("%s host: domain_is_persistent(%s)", virt->label, domain);
    if (!virt->ops->domain_is_persistent)
        return virt_unsupported(virt, "domain_is_persistent", error);
    return virt->ops->domain_is_persistent(virt, domain, ret_persistent, error);
}

char *orch_virt_domain_get_xml(OrchVirt *virt, const char *domain, GError **error)
{
    g_return_val_if_fail(virt && domain, NULL);
    g_debug("%s host: domain_get_xml(%s)", virt->label, domain);
    if (!virt->ops->domain_get_xml) {
        virt_unsupported(virt, "domain_get_xml", error);
        return NULL;
    }
    return virt->ops->domain_get_xml(virt, domain, error);
}

gboolean orch_virt_device_detach(OrchVirt *virt, const char *domain, const char *alias,
                                 gboolean config, guint timeout_ms, GError **error)
{
    g_return_val_if_fail(virt && domain, FALSE);
    g_debug("%s host: device_detach(%s)", virt->label, domain);
    if (!virt->ops->device_detach)
        return virt_unsupported(virt, "device_detach", error);
    return virt->ops->device_detach(virt, domain, alias, config, timeout_ms, error);
}

gboolean orch_virt_device_attach(OrchVirt *virt, const char *domain, const char *device_xml,
                                 gboolean config, GError **error)
{
    g_return_val_if_fail(virt && domain, FALSE);
    g_debug("%s host: device_attach(%s)", virt->label, domain);
    if (!virt->ops->device_attach)
        return virt_unsupported(virt, "device_attach", error);
    return virt->ops->device_attach(virt, domain, device_xml, config, error);
}

gboolean orch_virt_migrate(OrchVirt *virt, const char *domain, const char *dest_uri,
                           const OrchMigrateParams *params, OrchMigrateStats *ret_stats,
                           GError **error)
{
    g_return_val_if_fail(virt && domain, FALSE);
    g_debug("%s host: migrate(%s)", virt->label, domain);
    if (!virt->ops->migrate)
        return virt_unsupported(virt, "migrate", error);
    return virt->ops->migrate(virt, domain, dest_uri, params, ret_stats, error);
}

guint orch_virt_watch_migrated_in(OrchVirt *virt, const char *domain, OrchVirtMigratedInFunc fn,
                                  gpointer opaque, GDestroyNotify destroy, GError **error)
{
    g_return_val_if_fail(virt && domain && fn, 0);
    g_debug("%s host: watch_migrated_in(%s)", virt->label, domain);
    if (!virt->ops->watch_migrated_in || !virt->ops->unwatch) {
        virt_unsupported(virt, "watch_migrated_in", error);
        return 0;
    }
    return virt->ops->watch_migrated_in(virt, domain, fn, opaque, destroy, error);
}

void orch_virt_unwatch(OrchVirt *virt, guint watch)
{
    g_return_if_fail(virt);
    if (watch)
        virt->ops->unwatch(virt, watch);
}

gboolean orch_virt_domain_abort_job(OrchVirt *virt, const char *domain, GError **error)
{
    g_return_val_if_fail(virt && domain, FALSE);
    g_debug("%s host: domain_abort_job(%s)", virt->label, domain);
    if (!virt->ops->domain_abort_job)
        return virt_unsupported(virt, "domain_abort_job", error);
    return virt->ops->domain_abort_job(virt, domain, error);
}

OrchVirtChannel *orch_virt_channel_open(OrchVirt *virt, const char *domain, const char *name,
                                        gboolean force, GError **error)
{
    g_return_val_if_fail(virt && domain, NULL);
    g_debug("%s host: channel_open(%s%s)", virt->label, domain, force ? ", force" : "");
    if (!virt->ops->channel_open) {
        virt_unsupported(virt, "channel_open", error);
        return NULL;
    }
    return virt->ops->channel_open(virt, domain, name, force, error);
}

GPtrArray *orch_virt_nodedev_list_pci_xml(OrchVirt *virt, GError **error)
{
    g_return_val_if_fail(virt, NULL);
    g_debug("%s host: nodedev_list_pci_xml", virt->label);
    if (!virt->ops->nodedev_list_pci_xml) {
        virt_unsupported(virt, "nodedev_list_pci_xml", error);
        return NULL;
    }
    return virt->ops->nodedev_list_pci_xml(virt, error);
}

GPtrArray *orch_virt_domain_list_xml(OrchVirt *virt, GError **error)
{
    g_return_val_if_fail(virt, NULL);
    g_debug("%s host: domain_list_xml", virt->label);
    if (!virt->ops->domain_list_xml) {
        virt_unsupported(virt, "domain_list_xml", error);
        return NULL;
    }
    return virt->ops->domain_list_xml(virt, error);
}

gboolean orch_virt_domain_capable(OrchVirt *virt, const XmlDomainNeeds *needs,
                                  gboolean *ret_capable, char **ret_detail, GError **error)
{
    g_return_val_if_fail(virt, FALSE);
    g_debug("%s host: domain_capable", virt->label);
    if (!virt->ops->domain_capable)
        return virt_unsupported(virt, "domain_capable", error);
    return virt->ops->domain_capable(virt, needs, ret_capable, ret_detail, error);
}

gboolean orch_virt_node_get_info(OrchVirt *virt, OrchVirtNodeInfo *ret_info, GError **error)
{
    g_return_val_if_fail(virt, FALSE);
    g_debug("%s host: node_get_info", virt->label);
    if (!virt->ops->node_get_info)
        return virt_unsupported(virt, "node_get_info", error);
    return virt->ops->node_get_info(virt, ret_info, error);
}

GPtrArray *orch_virt_domain_list_info(OrchVirt *virt, gboolean with_xml, GError **error)
{
    g_return_val_if_fail(virt, NULL);
    g_debug("%s host: domain_list_info", virt->label);
    if (!virt->ops->domain_list_info) {
        virt_unsupported(virt, "domain_list_info", error);
        return NULL;
    }
    return virt->ops->domain_list_info(virt, with_xml, error);
}

gboolean orch_virt_channel_send(OrchVirtChannel *chan, const void *buf, gsize len,
                                HmDeadline deadline, GError **error)
{
    g_return_val_if_fail(chan && (buf || !len), FALSE);
    return chan->virt->ops->channel_send(chan, buf, len, deadline, error);
}

gssize orch_virt_channel_recv(OrchVirtChannel *chan, void *buf, gsize len, HmDeadline deadline,
                              GError **error)
{
    g_return_val_if_fail(chan && buf, -1);
    return chan->virt->ops->channel_recv(chan, buf, len, deadline, error);
}
