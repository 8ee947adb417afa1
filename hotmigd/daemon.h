/* hotmigd's daemon object: its configuration, VF pool and HTTPS server, the cluster it sees
 * (inventory), the schedules it runs and the migrations it runs for other hosts, its local
 * API socket. main.c's main() creates one; the alert inputs call hotmigd_evacuate().
 * Everything here runs on the thread-default main context of the thread that created the
 * daemon (migrations run in threads of their own and report back to it); call these functions
 * from that thread only. docs/hotmigd.md describes the behaviour. */
#pragma once

#include <glib.h>

#include "common/config.h"
#include "engine/engine.h"
#include "hotmigd/inventory.h"
#include "hotmigd/local-api.h"
#include "hotmigd/pool.h"
#include "hotmigd/recovery.h"
#include "hotmigd/server.h"
#include "policies/policies.h"

G_BEGIN_DECLS

typedef struct Hotmigd Hotmigd; /* the daemon's state (config, pool, server, cluster, schedules) */

/* ---- the evacuation entry point (the alert wiring calls it) ---------------------------------- */

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

/* Called when the evacuation of @host ended (ok or not), so alert state can follow. @ok: every
 * VM left the host. */
typedef void (*HotmigdEvacuationDone)(Hotmigd *daemon, const char *host, gboolean ok,
                                      gpointer data);
void hotmigd_set_evacuation_done(Hotmigd *daemon, HotmigdEvacuationDone cb, gpointer data);

/* Called with every fresh inventory (borrowed, for the call), so that what other modules know
 * of the hosts (whose hotmigd answers) can follow. */
typedef void (*HotmigdInventoryTaken)(Hotmigd *daemon, const HotmigdInventory *inventory,
                                      gpointer data);
void hotmigd_set_inventory_taken(Hotmigd *daemon, HotmigdInventoryTaken cb, gpointer data);

/* Per-result counters and phase durations for /metrics (the other engineer renders them).
 * Counts the moves of the schedules this daemon runs (plans, drains, evacuations), wherever
 * they ran (here, or on their source host's hotmigd); the phase figures come from each move's
 * report (phases with status ok, failed or undone). */
typedef struct {
    guint64 migrations_ok, migrations_failed, migrations_skipped;
    double phase_seconds_sum[ORCH_PHASE_LAST];
    guint64 phase_count[ORCH_PHASE_LAST];
} HotmigdStats;
void hotmigd_get_stats(Hotmigd *daemon, HotmigdStats *ret_stats);

/* ---- more for the alert wiring ------------------------------------------------------------ */

/* This host's name among the [host NAME] groups ([hotmigd] name, else the system's host
 * name). Borrowed. */
const char *hotmigd_get_name(Hotmigd *daemon);

/* The configuration the daemon runs with (borrowed). */
const HmConfig *hotmigd_get_config(Hotmigd *daemon);

/* Is @host one of the cluster's ([host NAME] groups)? */
gboolean hotmigd_has_host(Hotmigd *daemon, const char *host);

/* Holds @host in @state (POL_HOST_QUARANTINED: keeps its VMs, accepts none) in every plan the
 * daemon makes from now on, for @reason (shown by `status`); POL_HOST_OK lifts it. An
 * evacuation running for the host keeps it evacuating until it ends. ORCH_ERROR_NOT_FOUND for
 * an unknown host; POL_HOST_DOWN and POL_HOST_EVACUATING are not set this way (INVALID). */
gboolean hotmigd_set_host_state(Hotmigd *daemon, const char *host, PolHostState state,
                                const char *reason, GError **error);

/* The VF pool (NULL with no_pool) and the HTTPS server (NULL with no_https), borrowed: the
 * alert wiring (alerts-hook.c) has the server's worker thread count VF states for /metrics
 * (the pool is used by that thread only) and serves /v1/alerts. */
HotmigdPool *hotmigd_get_pool(Hotmigd *daemon);
HotmigdServer *hotmigd_get_server(Hotmigd *daemon);

/* ---- creating the daemon ------------------------------------------------------------------- */

/* Runs one migration: orch_migrate() or a test's fake (called in a thread of its own). */
typedef gboolean (*HotmigdMigrateFunc)(const OrchOptions *opts, OrchReport **ret_report,
                                       GError **error);

typedef struct {
    /* What the daemon asks of the world; NULL: the real thing. Tests bring fakes. */
    const OrchConnector *connector; /* libvirt and hotmigd clients (engine.h); borrowed */
    HotmigdMigrateFunc migrate; /* orch_migrate */
    HotmigdRecoverFunc recover; /* orch_recover: the journals left unfinished, at the start */
    gboolean no_https;          /* tests: no HTTPS listener ([hotmigd] listen/port unused) */
    gboolean no_pool;           /* tests: no VF pool (GET /v1/host ... are not served) */
    guint cpu_sample_ms;        /* CPU demand: cpuTime sampled this far apart; 0: the default */
    guint inventory_interval_s; /* background inventory; 0: the default, G_MAXUINT: never */
    guint remote_poll_ms;       /* GET /v1/migrations/ID of a remote move this often; 0: default */
} HotmigdOptions;

/* A daemon for @config (taken: freed with the daemon, also when this fails): opens the VF
 * pool (run-dir/leases), listens on HTTPS ([hotmigd] listen, port) and on the local socket
 * ([hotmigd] socket, mode 0600), starts taking the cluster's inventory in the background, and
 * recovers, in a thread, the migrations whose journals under [hotmigd] state-dir were left
 * unfinished (a hotmigd or migrate-vm killed in the middle: the guest waits quiesced) as
 * `migrate-vm --recover` does; a journal whose lock another process holds is left to it.
 * @opts NULL: all defaults. Fails naming the file or address (ORCH_ERROR_INVALID for a bad
 * configuration). Owned result. */
Hotmigd *hotmigd_new(HmConfig *config, const HotmigdOptions *opts, GError **error);

/* SIGHUP: @config (taken; loaded and checked by the caller) replaces [migrate] for the
 * migrations that start from now on and [scheduler] for the schedules' next moves (running ones
 * keep what they started with). Every other key is read once, at the start: each one that
 * differs is logged as waiting for a restart ([alerts] token-file: hotmigd_alerts_hook_reload()).
 * Returns how many such differences there are. */
guint hotmigd_reload(Hotmigd *daemon, HmConfig *config);

/* Stops: cancels the migrations running here (they are undone), stops polling remote ones,
 * closes the listeners. NULL-safe. */
void hotmigd_free(Hotmigd *daemon);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Hotmigd, hotmigd_free)

/* Is the recovery of unfinished journals started by hotmigd_new() still running? */
gboolean hotmigd_recovering(Hotmigd *daemon);

/* The HTTPS port listened on (0 with no_https), the local socket's path (borrowed). */
guint hotmigd_get_port(Hotmigd *daemon);
const char *hotmigd_get_socket_path(Hotmigd *daemon);

/* ---- the local API's commands (hotmigd/local-api.h binds them) --------------------------- */

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

/* Follows schedule @id: @fn gets each move's start and end ({"schedule", "vm", "from", "to",
 * "state", "detail"}), then, once, NULL when it has ended. Returns a watch id (> 0) for
 * hotmigd_unwatch(), 0 with NOT_FOUND. A schedule that has ended already gets the NULL at once
 * (from the main loop). */
guint hotmigd_watch(Hotmigd *daemon, const char *id, HotmigdWatchFunc fn, gpointer data,
                    GError **error);
void hotmigd_unwatch(Hotmigd *daemon, guint watch);

G_END_DECLS
