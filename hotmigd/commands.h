/* The daemon's commands that the local API binds (commands.c; hotmigd/local-api.h binds them,
 * through daemon.c): a plan, a plan run, a drain and a snapshot, each on a fresh inventory, and
 * `status`. Following a schedule is schedules.h's hotmigd_watch(). */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "hotmigd/daemon-types.h"
#include "hotmigd/local-api.h"
#include "policies/policies.h"

G_BEGIN_DECLS

/* A plan on a fresh inventory: the plan's JSON (orch_plan_format_json()). NOT_FOUND for an
 * unknown host, CONFLICT when no plan exists. */
void hotmigd_plan_async(Hotmigd *daemon, const HotmigdPlanRequest *req, HotmigdDone done,
                        gpointer data);

/* Runs @plan (taken) on a fresh inventory: {"id": ID}. INVALID when it does not replay on the
 * cluster as it is now (naming the step), CONFLICT when a plan runs already. */
void hotmigd_run_async(Hotmigd *daemon, PolPlan *plan, const char *reason, HotmigdDone done,
                       gpointer data);

/* hotmigd_evacuate() on a fresh inventory: {"id", "merged", "late": [VM...]}. */
void hotmigd_drain_async(Hotmigd *daemon, const char *host, gint64 deadline, const char *reason,
                         HotmigdDone done, gpointer data);

/* The live cluster in the snapshot format, from a fresh inventory (a JSON object). */
void hotmigd_snapshot_async(Hotmigd *daemon, HotmigdDone done, gpointer data);

/* Hosts by state, schedules (running and the last finished ones) and the migrations run here
 * for other hosts; with @id, that schedule alone with each move's report. NOT_FOUND for an
 * unknown id. Owned. */
JsonNode *hotmigd_status(Hotmigd *daemon, const char *id, GError **error);

G_END_DECLS
