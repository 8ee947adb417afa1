/* The schedules the daemon runs (schedules.c): plan runs, and drains (evacuations) in rounds.
 * The evacuation entry point and following a schedule are the daemon's API (daemon.h includes
 * this); the rest is for the daemon's files above it (daemon-state-priv.h). */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "hotmigd/daemon-types.h"
#include "hotmigd/inventory.h"
#include "hotmigd/local-api.h"
#include "hotmigd/plan-view.h"
#include "policies/policies.h"

G_BEGIN_DECLS

/* ---- the daemon's API ------------------------------------------------------------------------ */

/* Evacuates every VM of @host (drain plan, ordered by pol_evacuation_order() when @deadline > 0),
 * at most once at a time per host: a second call while one runs returns TRUE with
 * *ret_id of the running one and *ret_merged = TRUE. *ret_late (owned, NULL-terminated, may be
 * empty) lists the VMs predicted to miss the deadline. ORCH_ERROR_NOT_FOUND for an unknown host.
 * @deadline: unix seconds, 0 for none. @reason: one line for the log and `status` (NULL: none).
 * The plan is made on the daemon's latest inventory of the cluster; when the evacuation has
 * run, the host is looked at again and VMs that appeared meanwhile get another round (under
 * the same id). The host counts as evacuating (accepts no VM in any plan) until it ends. */
gboolean hotmigd_evacuate(Hotmigd *daemon, const char *host, gint64 deadline, const char *reason,
                          char **ret_id, gboolean *ret_merged, char ***ret_late, GError **error);

/* Follows schedule @id: @fn gets each move's start and end ({"schedule", "vm", "from", "to",
 * "state", "detail"}), then, once, NULL when it has ended. Returns a watch id (> 0) for
 * hotmigd_unwatch(), 0 with NOT_FOUND. A schedule that has ended already gets the NULL at once
 * (from the main loop). */
guint hotmigd_watch(Hotmigd *daemon, const char *id, HotmigdWatchFunc fn, gpointer data,
                    GError **error);
void hotmigd_unwatch(Hotmigd *daemon, guint watch);

/* ---- for the daemon's files ------------------------------------------------------------------ */

/* The view plans are made on (plan-view.h), with what the schedules under way bring to each
 * host. */
void hotmigd_schedules_view_init(Hotmigd *daemon, HotmigdPlanView *v);

/* The cluster of the (fresh) daemon->inventory as plans see it (owned), or NULL. */
PolCluster *hotmigd_schedules_cluster(Hotmigd *daemon, GError **error);

/* daemon->scheds and daemon->evacuations, made empty. */
void hotmigd_schedules_init(Hotmigd *daemon);

/* Runs @plan's migrations on the cluster of the (fresh) inventory as a new schedule: its id
 * (owned), or NULL with CONFLICT when a plan runs already, INVALID when the plan does not fit
 * the cluster as it is now. */
char *hotmigd_schedules_run_plan(Hotmigd *daemon, const PolPlan *plan, const char *reason,
                                 GError **error);

/* hotmigd_evacuate(); @fresh: daemon->inventory was just taken (no need to look again first). */
gboolean hotmigd_schedules_evacuate(Hotmigd *daemon, const char *host, gint64 deadline,
                                    const char *reason, gboolean fresh, char **ret_id,
                                    gboolean *ret_merged, char ***ret_late, GError **error);

/* The reason of the evacuation of @host running (borrowed), or NULL when none runs. */
const char *hotmigd_schedules_evacuation_reason(Hotmigd *daemon, const char *host);

/* Is @domain moving from this host in a schedule? */
gboolean hotmigd_schedules_moving(Hotmigd *daemon, const char *domain);

/* Schedule @id with each move's report (owned), or NULL with NOT_FOUND. */
JsonNode *hotmigd_schedules_get_json(Hotmigd *daemon, const char *id, GError **error);

/* Every schedule, without the reports, as elements of the array @b is in. */
void hotmigd_schedules_add_json(Hotmigd *daemon, JsonBuilder *b);

/* The daemon stops: those following a schedule hear it is over for them, and the schedules are
 * dropped (the moves running here are cancelled and undone; remote ones no longer followed). */
void hotmigd_schedules_stop(Hotmigd *daemon);

G_END_DECLS
