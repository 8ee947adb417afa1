/* The daemon's state (struct Hotmigd), shared by the files that make the daemon object. Each
 * declares what it gives the ones above it in its own header. Bottom to top, each calling only
 * downward:
 *
 *   inventory-refresh.c  the cluster's latest inventory, taken in a thread (in the background,
 *                        again soon after a host could not be read, and before every plan)
 *   plan-view.c          the view plans are made on (the inventory with the hosts' held
 *                        states, the evacuations, what is under way, the VMs' last moves) and
 *                        the planner's options
 *   schedules.c          the schedules (plan runs; drains and evacuations in rounds), their
 *                        watchers and JSON; what they bring to the view; each move's end
 *                        counted in the figures for /metrics (stats.c, over HotmigdStats alone)
 *   migrations.c         the migrations run here for other hosts (POST /v1/migrations)
 *   commands.c           the local API's commands (plan, run, drain, snapshot, status)
 *   daemon.c             creating, reloading and stopping the daemon; the commands bound to the
 *                        local API and the HTTPS API's services; the accessors of daemon.h
 *
 * Everything here runs on the daemon's main context. Private to hotmigd/. */
#pragma once

#include <glib.h>

#include "common/config.h"
#include "hotmigd/api.h"
#include "hotmigd/authz.h"
#include "hotmigd/daemon-types.h"
#include "hotmigd/inventory.h"
#include "hotmigd/local-api.h"
#include "hotmigd/pool.h"
#include "hotmigd/recovery.h"
#include "hotmigd/run.h"
#include "hotmigd/server.h"

G_BEGIN_DECLS

typedef struct HotmigdSchedule HotmigdSchedule; /* a schedule (schedules.c) */

/* A host held in a state by hotmigd_set_host_state(). */
typedef struct {
    PolHostState state;
    char *reason;
} HotmigdHeld;

struct Hotmigd {
    HmConfig *config;
    HotmigdOptions opts;
    char *name;
    HotmigdPool *pool;
    HotmigdServer *server;
    HotmigdAuthz *authz; /* who may do what on the HTTPS API (docs/security.md) */
    char **file_roots;   /* [hotmigd] file-roots */
    HotmigdApiServices services;
    HotmigdLocalApi *local;
    GPtrArray *hosts;         /* HmConfigHost (owned copies), hotmigd URLs resolved */
    OrchOptions migrate_opts; /* what a migration run here starts from, until a reload */
    GPtrArray *reloaded_opts; /* OrchOptions: each reload's, the last in use (env.migrate_opts);
                                 earlier ones stay until the end, threads may read them */
    HotmigdMoveEnv env;
    PolScheduleLimits limits;
    PolScheduleShare *share; /* the running moves of all schedules, for the limits */
    guint min_stay_s;
    double bandwidth;
    guint host_value;     /* [scheduler] host-value */
    guint cpu_allocation; /* [scheduler] cpu-allocation */
    /* the inventory (inventory-refresh.c) */
    HotmigdInventory *inventory;
    GCancellable *cancel; /* the daemon stops: inventories and follow-ups end */
    gboolean inventory_running;
    GPtrArray *inventory_waiters; /* served by the inventory running (or about to) */
    GPtrArray *inventory_next;    /* asked while one ran, served by the one after */
    GSource *inventory_timer;
    guint inventory_interval_s; /* of inventory_timer; 0: no background inventory */
    GSource *inventory_retry;   /* one-shot: a host could not be read */
    guint inventory_retry_s;    /* its delay, doubled at each retry up to the interval */
    /* what the daemon adds to it */
    GHashTable *held;  /* host -> HotmigdHeld (hotmigd_set_host_state) */
    GHashTable *moved; /* VM -> gint64 *: unix seconds of its last move */
    /* schedules (schedules.c) */
    GPtrArray *scheds;         /* HotmigdSchedule, oldest first */
    GHashTable *evacuations;   /* host -> HotmigdSchedule (borrowed), while it runs */
    HotmigdSchedule *plan_run; /* the plan run running, or NULL */
    guint next_watch;
    /* migrations run here for other hosts (migrations.c) */
    GPtrArray *remotes; /* oldest first */
    HotmigdEvacuationDone evacuation_done;
    gpointer evacuation_done_data;
    HotmigdInventoryTaken inventory_taken;
    gpointer inventory_taken_data;
    HotmigdStats stats;
    HotmigdRecovery *recovery; /* while the start's recovery runs */
};

static inline gint64 hotmigd_now_s(void)
{
    return g_get_real_time() / G_USEC_PER_SEC;
}

/* "KIND-" and 8 hex digits (owned). */
static inline char *hotmigd_new_id(const char *kind)
{
    g_autofree char *uuid = g_uuid_string_random();

    return g_strdup_printf("%s-%.8s", kind, uuid);
}

G_END_DECLS
