/* The adapter's common part. */
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
