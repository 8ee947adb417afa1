/* The types of hotmigd's daemon object (daemon.h) that its files share with those who use it:
 * the daemon, its options, the callbacks it makes and its figures. */
#pragma once

#include <glib.h>

#include "engine/engine.h"
#include "hotmigd/inventory.h"
#include "hotmigd/recovery.h"
#include "hotmigd/run.h"

G_BEGIN_DECLS

typedef struct Hotmigd Hotmigd; /* the daemon's state (config, pool, server, cluster, schedules) */

/* Called when the evacuation of @host ended (ok or not), so alert state can follow. @ok: every
 * VM left the host. */
typedef void (*HotmigdEvacuationDone)(Hotmigd *daemon, const char *host, gboolean ok,
                                      gpointer data);

/* Called with every fresh inventory (borrowed, for the call), so that what other modules know
 * of the hosts (whose hotmigd answers) can follow. */
typedef void (*HotmigdInventoryTaken)(Hotmigd *daemon, const HotmigdInventory *inventory,
                                      gpointer data);

/* Per-result counters and phase durations for /metrics (the other engineer renders them).
 * Counts the moves of the schedules this daemon runs (plans, drains, evacuations), wherever
 * they ran (here, or on their source host's hotmigd); the phase figures come from each move's
 * report (phases with status ok, failed or undone). */
typedef struct {
    guint64 migrations_ok, migrations_failed, migrations_skipped;
    double phase_seconds_sum[ORCH_PHASE_LAST];
    guint64 phase_count[ORCH_PHASE_LAST];
} HotmigdStats;

/* What hotmigd_new() is given besides the configuration. */
typedef struct {
    /* What the daemon asks of the world; NULL: the real thing. Tests bring fakes. */
    const OrchConnector *connector; /* libvirt and hotmigd clients (engine.h); borrowed */
    HotmigdMigrateFunc migrate; /* orch_migrate */
    HotmigdRecoverFunc recover; /* orch_recover: the journals left unfinished, at the start,
                                 * and those a failed move here kept */
    guint recover_retry_ms;     /* a failed move's kept journal: tried again this often; 0: the
                                 * default (HOTMIGD_MOVE_RECOVER_RETRY_MS_DEFAULT) */
    gboolean no_https;          /* tests: no HTTPS listener ([hotmigd] listen/port unused) */
    gboolean no_pool;           /* tests: no VF pool (GET /v1/host ... are not served) */
    guint cpu_sample_ms;        /* CPU demand: cpuTime sampled this far apart; 0: the default */
    guint inventory_interval_s; /* background inventory; 0: the default, G_MAXUINT: never */
    guint remote_poll_ms;       /* GET /v1/migrations/ID of a remote move this often; 0: default */
} HotmigdOptions;

G_END_DECLS
