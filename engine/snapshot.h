/* Cluster snapshots (JSON) for offline planning (snapshot.c; plans: plan-json.h).
 * Snapshot format (docs/policies.md):
 *   {"hosts":[{"name","cpus","memory_mib","vfs"}],
 *    "vms":[{"name","host","vcpus","memory_mib","cpu_util","vfs"}]}
 * with optional host "state", "vf_model", "vfs_free" and VM "vf_model", "job", "pinned",
 * "moved_ago_s"; other members are ignored. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "engine/engine.h"
#include "policies/policies.h"

G_BEGIN_DECLS

#define ORCH_SNAPSHOT_MAX_BYTES (64 * 1024 * 1024)
#define ORCH_SNAPSHOT_MAX_DEPTH 16 /* nesting of arrays and objects */

/* Parses snapshot @data (@len bytes, need not be NUL-terminated) named @name in messages.
 * Returns the cluster (owned) or NULL with ORCH_ERROR_INVALID naming the field, e.g.
 * "snapshot 'x.json': vms[3].memory_mib: must be an integer between 0 and ...". */
PolCluster *orch_snapshot_parse(const char *data, gsize len, const char *name, GError **error);

/* Reads and parses the snapshot file @path (at most ORCH_SNAPSHOT_MAX_BYTES). */
PolCluster *orch_snapshot_load(const char *path, GError **error);

G_END_DECLS
