/* hotmigd's daemon object: its configuration, VF pool and HTTPS server, the cluster it sees
 * (inventory), the schedules it runs and the migrations it runs for other hosts, its local
 * API socket. main.c's main() creates one; the alert inputs call hotmigd_evacuate().
 * Everything here runs on the thread-default main context of the thread that created the
 * daemon (migrations run in threads of their own and report back to it); call these functions
 * from that thread only. docs/hotmigd.md describes the behaviour. The daemon's commands are
 * declared where they are made: the evacuation and following a schedule in schedules.h, the
 * local API's commands in commands.h; the types in daemon-types.h. */
#pragma once

#include <glib.h>

#include "common/config.h"
#include "hotmigd/commands.h"
#include "hotmigd/daemon-types.h"
#include "hotmigd/pool.h"
#include "hotmigd/schedules.h"
#include "hotmigd/server.h"
#include "policies/policies.h"

G_BEGIN_DECLS

/* ---- for the alert wiring (the callbacks and figures: daemon-types.h) ----------------------- */

void hotmigd_set_evacuation_done(Hotmigd *daemon, HotmigdEvacuationDone cb, gpointer data);
void hotmigd_set_inventory_taken(Hotmigd *daemon, HotmigdInventoryTaken cb, gpointer data);
void hotmigd_get_stats(Hotmigd *daemon, HotmigdStats *ret_stats);

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

/* A daemon for @config (taken: freed with the daemon, also when this fails): opens the VF
 * pool (run-dir/leases), listens on HTTPS ([hotmigd] listen, port) and on the local socket
 * ([hotmigd] socket, mode 0600), starts taking the cluster's inventory in the background, and
 * recovers, in a thread, the migrations whose journals under [hotmigd] state-dir were left
 * unfinished (a hotmigd or migrate-vm killed in the middle: the guest waits quiesced) as
 * `migrate-vm --recover` does; a journal whose lock another process holds is left to it. A
 * move it runs here whose failure keeps the journal (an undo or the resume failed) is recovered
 * the same way by the move itself, before it ends (run.h). @opts NULL: all defaults. Fails naming the file or address (ORCH_ERROR_INVALID for a bad
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

G_END_DECLS
