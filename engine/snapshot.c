/* Cluster snapshots (JSON, read with json-glib). Plans: plan.c. */
#include "engine/snapshot.h"

#include "engine/json-fields.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

/* ---- reading ----------------------------------------------------------------------------- */

/* The members each object may have: what the reader takes, and what hotmigd's snapshot export
 * (GET /v1/snapshot) adds for people (state_reason, running_vms, cpu_measured, taken, took_ms,
 * warnings). Anything else is refused: a misspelt "pined" would otherwise move a pinned VM. */
static const char *const top_members[] = {"hosts", "vms", "taken", "took_ms", "warnings", NULL};
static const char *const host_members[] = {"name",     "cpus",  "memory_mib",   "vfs",
                                           "vfs_free", "state", "vf_model",     "state_reason",
                                           "running_vms", NULL};
static const char *const vm_members[] = {"name", "host",     "vcpus",  "memory_mib",
                                         "cpu_util", "cpu_measured", "vfs", "vf_model",
                                         "job",  "pinned",   "moved_ago_s", NULL};

static gboolean parse_host(PolCluster *c, const OrchJsonItem *it, GError **error)
{
    const char *name, *state_str, *model;
    gint64 cpus, memory, vfs, vfs_free;
    int state = POL_HOST_OK;
    GError *perr = NULL;

    if (!orch_json_item_known(it, host_members, error) || !orch_json_item_string(it, "name", TRUE, &name, error) ||
        !orch_json_item_int(it, "cpus", TRUE, 0, POL_CPUS_MAX, 0, &cpus, error) ||
        !orch_json_item_int(it, "memory_mib", TRUE, 0, (gint64)POL_MEMORY_MIB_MAX, 0, &memory, error) ||
        !orch_json_item_int(it, "vfs", FALSE, 0, POL_VFS_MAX, 0, &vfs, error) ||
        !orch_json_item_int(it, "vfs_free", FALSE, 0, POL_VFS_MAX, -1, &vfs_free, error) ||
        !orch_json_item_string(it, "vf_model", FALSE, &model, error) ||
        !orch_json_item_string(it, "state", FALSE, &state_str, error))
        return FALSE;
    if (state_str && (state = pol_host_state_from_string(state_str)) < 0)
        return orch_json_item_bad(it, "state", error, "must be ok, quarantined, evacuating or down, not '%s'",
                   state_str);
    if (vfs_free > vfs)
        return orch_json_item_bad(it, "vfs_free", error, "must be at most vfs (%" G_GINT64_FORMAT "), not %" G_GINT64_FORMAT,
                   vfs, vfs_free);
    if (!pol_cluster_add_host(c, name, (guint)cpus, (guint64)memory, state, &perr) ||
        !pol_cluster_set_host_vfs(c, name, model, (guint)vfs, (gint)vfs_free, &perr))
        return orch_json_item_wrap(perr, it, error);
    return TRUE;
}

static gboolean parse_vm(PolCluster *c, const OrchJsonItem *it, GError **error)
{
    PolVmSpec spec = {0};
    gint64 vcpus, memory, vfs;
    GError *perr = NULL;

    if (!orch_json_item_known(it, vm_members, error) || !orch_json_item_string(it, "name", TRUE, &spec.name, error) ||
        !orch_json_item_string(it, "host", TRUE, &spec.host, error) ||
        !orch_json_item_int(it, "vcpus", TRUE, 1, POL_CPUS_MAX, 0, &vcpus, error) ||
        !orch_json_item_int(it, "memory_mib", TRUE, 0, (gint64)POL_MEMORY_MIB_MAX, 0, &memory, error) ||
        !orch_json_item_fraction(it, "cpu_util", 1.0, &spec.cpu_util, error) ||
        !orch_json_item_int(it, "vfs", FALSE, 0, POL_VFS_MAX, 0, &vfs, error) ||
        !orch_json_item_string(it, "vf_model", FALSE, &spec.vf_model, error) ||
        !orch_json_item_string(it, "job", FALSE, &spec.job, error) ||
        !orch_json_item_bool(it, "pinned", &spec.pinned, error) ||
        !orch_json_item_int(it, "moved_ago_s", FALSE, 0, G_MAXINT64, -1, &spec.moved_ago_s, error))
        return FALSE;
    spec.vcpus = (guint)vcpus;
    spec.memory_mib = (guint64)memory;
    spec.vfs = (guint)vfs;
    if (!pol_cluster_add_vm(c, &spec, &perr))
        return orch_json_item_wrap(perr, it, error);
    return TRUE;
}

PolCluster *orch_snapshot_parse(const char *data, gsize len, const char *name, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GError) local = NULL;
    JsonNode *root;
    JsonArray *hosts, *vms;

    g_return_val_if_fail(data != NULL || len == 0, NULL);
    if (len > ORCH_SNAPSHOT_MAX_BYTES) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "snapshot '%s': larger than %d bytes", name, ORCH_SNAPSHOT_MAX_BYTES);
        return NULL;
    }
    g_autofree char *what = g_strdup_printf("snapshot '%s'", name);

    if (!orch_json_check_depth(data, len, what, ORCH_SNAPSHOT_MAX_DEPTH, error))
        return NULL;
    if (len == 0 || !json_parser_load_from_data(parser, data, (gssize)len, &local)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "snapshot '%s': not JSON: %s", name,
                    local ? local->message : "empty");
        return NULL;
    }
    root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "snapshot '%s': the top level must be an object with \"hosts\" and \"vms\"",
                    name);
        return NULL;
    }
    {
        OrchJsonItem top = {name, "(top level)", json_node_get_object(root), NULL};

        if (!orch_json_item_known(&top, top_members, error))
            return NULL;
    }
    if (!(hosts = orch_json_objects(json_node_get_object(root), "hosts", name, error)) ||
        !(vms = orch_json_objects(json_node_get_object(root), "vms", name, error)))
        return NULL;
    for (guint i = 0; i < json_array_get_length(hosts); i++) {
        g_autofree char *where = g_strdup_printf("hosts[%u]", i);
        OrchJsonItem it = {name, where, json_array_get_object_element(hosts, i), NULL};
        if (!parse_host(c, &it, error))
            return NULL;
    }
    for (guint i = 0; i < json_array_get_length(vms); i++) {
        g_autofree char *where = g_strdup_printf("vms[%u]", i);
        OrchJsonItem it = {name, where, json_array_get_object_element(vms, i), NULL};
        if (!parse_vm(c, &it, error))
            return NULL;
    }
    return g_steal_pointer(&c);
}

PolCluster *orch_snapshot_load(const char *path, GError **error)
{
    g_autofree char *data = NULL;
    gsize len = 0;

    if (!hm_file_read_limited(path, ORCH_SNAPSHOT_MAX_BYTES, &data, &len, error)) {
        g_prefix_error(error, "snapshot '%s': ", path);
        return NULL;
    }
    return orch_snapshot_parse(data, len, path, error);
}

