/* The hotmigd client's common part: the calls through OrchHotmigdClientOps, the result types. The
 * HTTPS implementation is engine/hotmigd-client-soup.c; tests bring fakes. */
#include "engine/hotmigd-client.h"

HM_ENUM_IMPL(orch_vf_kind, OrchVfKind, ORCH_VF_KIND_LAST, "pci", "standin")
HM_ENUM_IMPL(orch_vf_state, OrchVfState, ORCH_VF_STATE_LAST, HOTPLUG_LEASE_STATE_WORDS, "in-use",
             "missing")
HM_ENUM_IMPL(orch_hotmigd_migration_state, OrchHotmigdMigrationState, ORCH_HOTMIGD_MIGRATION_LAST,
             "running", "done", "failed")

void orch_hotmigd_migration_free(OrchHotmigdMigration *mig)
{
    if (!mig)
        return;
    g_free(mig->id);
    g_free(mig->domain);
    g_free(mig->source);
    g_free(mig->destination);
    g_free(mig->reason);
    g_free(mig->plan);
    g_free(mig->error);
    g_free(mig->report);
    g_free(mig);
}

void orch_hotmigd_host_info_free(OrchHotmigdHostInfo *info)
{
    if (!info)
        return;
    g_free(info->name);
    g_free(info->version);
    g_strfreev(info->warnings);
    g_free(info);
}

void orch_hotmigd_vf_info_free(OrchHotmigdVfInfo *vf)
{
    if (!vf)
        return;
    g_free(vf->id);
    g_free(vf->pf);
    g_free(vf->driver);
    hotplug_lease_free(vf->lease);
    g_free(vf->assigned_to);
    g_free(vf->note);
    g_free(vf);
}

void orch_hotmigd_alert_reply_free(OrchHotmigdAlertReply *reply)
{
    if (!reply)
        return;
    g_free(reply->result);
    g_free(reply->actor);
    g_free(reply->reason);
    g_free(reply);
}

void orch_hotmigd_client_init(OrchHotmigdClient *vfd, const OrchHotmigdClientOps *ops,
                              const char *url)
{
    vfd->ops = ops;
    vfd->url = g_strdup(url);
}

void orch_hotmigd_client_clear(OrchHotmigdClient *vfd)
{
    g_clear_pointer(&vfd->url, g_free);
}

void orch_hotmigd_client_free(OrchHotmigdClient *vfd)
{
    if (vfd)
        vfd->ops->free(vfd);
}

OrchHotmigdHostInfo *orch_hotmigd_client_host(OrchHotmigdClient *vfd, GError **error)
{
    g_return_val_if_fail(vfd != NULL, NULL);
    return vfd->ops->host(vfd, error);
}

GPtrArray *orch_hotmigd_client_list(OrchHotmigdClient *vfd, GError **error)
{
    g_return_val_if_fail(vfd != NULL, NULL);
    return vfd->ops->list(vfd, error);
}

HotplugLease *orch_hotmigd_client_lease(OrchHotmigdClient *vfd, const OrchHotmigdLeaseRequest *req,
                                        GError **error)
{
    g_return_val_if_fail(vfd && req && req->holder && req->reason && req->domain, NULL);
    return vfd->ops->lease(vfd, req, error);
}

HotplugLease *orch_hotmigd_client_confirm(OrchHotmigdClient *vfd, const char *vf,
                                          const char *lease_id, GError **error)
{
    g_return_val_if_fail(vfd && vf && lease_id, NULL);
    return vfd->ops->confirm(vfd, vf, lease_id, error);
}

gboolean orch_hotmigd_client_release(OrchHotmigdClient *vfd, const char *vf, const char *lease_id,
                                     GError **error)
{
    g_return_val_if_fail(vfd && vf && lease_id, FALSE);
    return vfd->ops->release(vfd, vf, lease_id, error);
}

gboolean orch_hotmigd_client_ib_identity(OrchHotmigdClient *vfd, const char *vf, guint64 node_guid,
                                         guint64 port_guid, char **ret_note, GError **error)
{
    g_return_val_if_fail(vfd && vf, FALSE);
    return vfd->ops->ib_identity(vfd, vf, node_guid, port_guid, ret_note, error);
}

gboolean orch_hotmigd_client_renew(OrchHotmigdClient *vfd, const char *vf, const char *lease_id,
                                   guint ttl_s, GError **error)
{
    g_return_val_if_fail(vfd && vf && lease_id, FALSE);
    if (!vfd->ops->renew) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "hotmigd at %s cannot renew leases",
                    vfd->url);
        return FALSE;
    }
    return vfd->ops->renew(vfd, vf, lease_id, ttl_s, error);
}

gboolean orch_hotmigd_client_identity(OrchHotmigdClient *vfd, const char *vf, const char *domain,
                                      guint64 *ret_node_guid, guint64 *ret_port_guid,
                                      char **ret_source, GError **error)
{
    g_return_val_if_fail(vfd && vf && domain && ret_node_guid && ret_port_guid, FALSE);
    if (!vfd->ops->identity) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND,
                    "hotmigd at %s cannot tell the GUIDs of its VFs", vfd->url);
        return FALSE;
    }
    return vfd->ops->identity(vfd, vf, domain, ret_node_guid, ret_port_guid, ret_source, error);
}

gboolean orch_hotmigd_client_vfio(OrchHotmigdClient *vfd, const char *vf, char **ret_note,
                                  GError **error)
{
    g_return_val_if_fail(vfd && vf, FALSE);
    return vfd->ops->vfio(vfd, vf, ret_note, error);
}

GPtrArray *orch_hotmigd_client_files_missing(OrchHotmigdClient *vfd, const char *const *paths,
                                             GError **error)
{
    g_return_val_if_fail(vfd && paths, NULL);
    return vfd->ops->files_missing(vfd, paths, error);
}

gboolean orch_hotmigd_client_left(OrchHotmigdClient *vfd, const char *vf, const char *domain,
                                  GError **error)
{
    g_return_val_if_fail(vfd && vf && domain, FALSE);
    return vfd->ops->left(vfd, vf, domain, error);
}

OrchHotmigdAlertReply *orch_hotmigd_client_alert(OrchHotmigdClient *vfd, const PolAlertEvent *event,
                                                 const char *from, gboolean deputy, GError **error)
{
    g_return_val_if_fail(vfd && event && event->host && event->key && from, NULL);
    if (!vfd->ops->alert) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "the client of hotmigd at %s cannot forward alerts", vfd->url);
        return NULL;
    }
    return vfd->ops->alert(vfd, event, from, deputy, error);
}

char *orch_hotmigd_client_migration_start(OrchHotmigdClient *vfd,
                                          const OrchHotmigdMigrationRequest *req, GError **error)
{
    g_return_val_if_fail(vfd && req && req->domain && req->destination && req->reason, NULL);
    if (!vfd->ops->migration_start) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "hotmigd at %s: cannot start migrations",
                    vfd->url);
        return NULL;
    }
    return vfd->ops->migration_start(vfd, req, error);
}

OrchHotmigdMigration *orch_hotmigd_client_migration_get(OrchHotmigdClient *vfd, const char *id,
                                                        GError **error)
{
    g_return_val_if_fail(vfd && id, NULL);
    if (!vfd->ops->migration_get) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "hotmigd at %s: cannot follow migrations",
                    vfd->url);
        return NULL;
    }
    return vfd->ops->migration_get(vfd, id, error);
}
