/* hotmigd's daemon object (hotmigd/daemon.h): the VF pool and its HTTPS server, and the cluster
 * work: the inventory (refreshed in a thread, in the background and before every plan), the
 * schedules it runs (plans, drains, evacuations; each move driven from its source host), the
 * migrations it runs for other hosts (POST /v1/migrations), and the local API's calls
 * (engine/local-protocol.h). Everything here runs on the daemon's main context. */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/daemon.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "engine/journal.h"
#include "engine/json.h"
#include "engine/local-protocol.h"
#include "engine/plan-json.h"
#include "engine/snapshot.h"
#include "engine/virt.h"
#include "hotmigd/inventory.h"
#include "hotmigd/pool.h"
#include "hotmigd/run.h"

/* How long binding a VF to vfio-pci may take (the kernel probes it synchronously). */
#define HOTMIGD_VFIO_TIMEOUT_MS 10000
/* How long libvirtd has to list its domains (which domain uses which VF) before a request that
 * needs it gets 503: the daemon serves one request at a time. */
#define HOTMIGD_LIBVIRT_TIMEOUT_MS 10000
/* The background inventory: how often (plans take a fresh one anyway). */
#define HOTMIGD_INVENTORY_INTERVAL_S 60
/* Finished schedules and migrations kept for `status` and GET /v1/migrations/ID. */
#define HOTMIGD_KEEP_FINISHED 32
#define HOTMIGD_KEEP_MIGRATIONS 256

typedef struct Sched Sched;

typedef struct {
    PolHostState state;
    char *reason;
} Held;

typedef void (*InvWaiterFunc)(Hotmigd *daemon, const GError *error, gpointer data);

typedef struct {
    InvWaiterFunc fn;
    gpointer data;
} InvWaiter;

typedef struct {
    guint id;
    HotmigdWatchFunc fn;
    gpointer data;
} Watcher;

/* A schedule: a plan run, or the drain (evacuation) of a host in rounds. */
struct Sched {
    Hotmigd *daemon;
    char *id;
    char *kind;   /* "plan", "drain" */
    char *policy; /* the plan's policy */
    char *host;   /* drain: the host */
    char *reason;
    gint64 deadline;   /* drain: unix seconds, 0: none */
    gint64 created;    /* unix seconds */
    gint64 ended;      /* unix seconds, 0 while it runs */
    GPtrArray *rounds; /* HotmigdRun: a plan has one; a drain one per round */
    GPtrArray *late;   /* char *: VMs predicted to miss the deadline */
    GHashTable *tried; /* drain: VMs a round had (never tried twice) */
    gboolean ok;
    char *error;         /* why it ended without running (a round could not be planned) */
    guint waiting;       /* inventories it waits for: not pruned meanwhile */
    GPtrArray *watchers; /* Watcher */
};

/* A migration run here for another host's schedule (POST /v1/migrations). */
typedef struct {
    Hotmigd *daemon;
    OrchHotmigdMigration info;
    HotmigdMove *job; /* while it runs */
} Remote;

struct Hotmigd {
    HmConfig *config;
    HotmigdOptions opts;
    char *name;
    HotmigdPool *pool;
    HotmigdServer *server;
    HotmigdAuthz *authz; /* who may do what on the HTTPS API (docs/security.md) */
    char **file_roots; /* [hotmigd] file-roots */
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
    /* the inventory */
    HotmigdInventory *inventory;
    GCancellable *cancel; /* the daemon stops: inventories and follow-ups end */
    gboolean inventory_running;
    GPtrArray *inventory_waiters; /* InvWaiter: served by the inventory running (or about to) */
    GPtrArray *inventory_next;    /* InvWaiter: asked while one ran, served by the one after */
    GSource *inventory_timer;
    guint inventory_interval_s; /* of inventory_timer; 0: no background inventory */
    GSource *inventory_retry;   /* one-shot: a host could not be read */
    guint inventory_retry_s;    /* its delay, doubled at each retry up to the interval */
    /* what the daemon adds to it */
    GHashTable *held;  /* host -> Held (hotmigd_set_host_state) */
    GHashTable *moved; /* VM -> gint64 *: unix seconds of its last move */
    /* schedules */
    GPtrArray *scheds;       /* Sched, oldest first */
    GHashTable *evacuations; /* host -> Sched (borrowed), while it runs */
    Sched *plan_run;         /* the plan run running, or NULL */
    guint next_watch;
    /* migrations run here for other hosts */
    GPtrArray *remotes; /* Remote, oldest first */
    HotmigdEvacuationDone evacuation_done;
    gpointer evacuation_done_data;
    HotmigdInventoryTaken inventory_taken;
    gpointer inventory_taken_data;
    HotmigdStats stats;
    HotmigdRecovery *recovery; /* while the start's recovery runs */
};

static gint64 now_s(void)
{
    return g_get_real_time() / G_USEC_PER_SEC;
}

static char *new_id(const char *kind)
{
    g_autofree char *uuid = g_uuid_string_random();

    return g_strdup_printf("%s-%.8s", kind, uuid);
}

/* ---- simple things ----------------------------------------------------------------------------
 */

const char *hotmigd_get_name(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, NULL);
    return daemon->name;
}

const HmConfig *hotmigd_get_config(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, NULL);
    return daemon->config;
}

gboolean hotmigd_has_host(Hotmigd *daemon, const char *host)
{
    g_return_val_if_fail(daemon != NULL, FALSE);
    return hotmigd_run_move_env_find_host(&daemon->env, host) != NULL;
}

static gboolean check_host(Hotmigd *daemon, const char *host, GError **error)
{
    g_autoptr(GString) known = g_string_new(NULL);

    if (hotmigd_has_host(daemon, host))
        return TRUE;
    for (guint i = 0; i < daemon->hosts->len; i++)
        g_string_append_printf(known, "%s%s", i ? ", " : "",
                               ((HmConfigHost *)g_ptr_array_index(daemon->hosts, i))->name);
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND,
                "unknown host '%.64s' (the [host NAME] groups of the configuration: %s)",
                host ? host : "", known->len ? known->str : "none");
    return FALSE;
}

void hotmigd_set_evacuation_done(Hotmigd *daemon, HotmigdEvacuationDone cb, gpointer data)
{
    g_return_if_fail(daemon != NULL);
    daemon->evacuation_done = cb;
    daemon->evacuation_done_data = data;
}

void hotmigd_set_inventory_taken(Hotmigd *daemon, HotmigdInventoryTaken cb, gpointer data)
{
    g_return_if_fail(daemon != NULL);
    daemon->inventory_taken = cb;
    daemon->inventory_taken_data = data;
}

void hotmigd_get_stats(Hotmigd *daemon, HotmigdStats *ret_stats)
{
    g_return_if_fail(daemon && ret_stats);
    *ret_stats = daemon->stats;
}

guint hotmigd_get_port(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, 0);
    return daemon->server ? hotmigd_server_get_port(daemon->server) : 0;
}

/* For the alert wiring (hotmigd/alerts-hook.c). */
HotmigdPool *hotmigd_get_pool(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, NULL);
    return daemon->pool;
}

HotmigdServer *hotmigd_get_server(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, NULL);
    return daemon->server;
}

const char *hotmigd_get_socket_path(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, NULL);
    return hm_config_get_string(daemon->config, HM_CONFIG_HOTMIGD_SOCKET);
}

static void held_free(Held *held)
{
    g_free(held->reason);
    g_free(held);
}

gboolean hotmigd_set_host_state(Hotmigd *daemon, const char *host, PolHostState state,
                                const char *reason, GError **error)
{
    Held *held;

    g_return_val_if_fail(daemon != NULL, FALSE);
    if (!check_host(daemon, host, error))
        return FALSE;
    if (state != POL_HOST_OK && state != POL_HOST_QUARANTINED) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "host '%s': only ok and quarantined can be set, not '%s'", host,
                    pol_host_state_to_string(state));
        return FALSE;
    }
    if (state == POL_HOST_OK) {
        if (g_hash_table_remove(daemon->held, host))
            g_message("Host '%s' is no longer held (%s)", host, reason ? reason : "lifted");
        return TRUE;
    }
    held = g_new0(Held, 1);
    held->state = state;
    held->reason = g_strdup(reason);
    g_hash_table_insert(daemon->held, g_strdup(host), held);
    g_message("Host '%s' held %s: it takes no VM in the plans (%s)", host,
              pol_host_state_to_string(state), reason ? reason : "no reason given");
    return TRUE;
}

/* ---- the view: the inventory with what the daemon adds --------------------------------------- */

typedef struct {
    HotmigdInventoryView view;
    GHashTable *states; /* owned */
    GArray *arriving;   /* HotmigdInvArrival (strings borrowed from the schedules), owned */
} View;

static void view_clear(View *v)
{
    g_clear_pointer(&v->states, g_hash_table_unref);
    g_clear_pointer(&v->arriving, g_array_unref);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(View, view_clear)

static void view_init(Hotmigd *daemon, View *v)
{
    GHashTableIter it;
    gpointer key, value;

    v->states = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_iter_init(&it, daemon->held);
    while (g_hash_table_iter_next(&it, &key, &value))
        g_hash_table_insert(v->states, key, GINT_TO_POINTER(((Held *)value)->state));
    g_hash_table_iter_init(&it, daemon->evacuations);
    while (g_hash_table_iter_next(&it, &key, NULL))
        g_hash_table_insert(v->states, key, GINT_TO_POINTER(POL_HOST_EVACUATING));
    /* What the schedules under way bring to each host: no new plan takes that room. */
    v->arriving = g_array_new(FALSE, FALSE, sizeof(HotmigdInvArrival));
    for (guint i = 0; i < daemon->scheds->len; i++) {
        const Sched *s = g_ptr_array_index(daemon->scheds, i);

        for (guint k = 0; !s->ended && k < s->rounds->len; k++) {
            const GPtrArray *moves = hotmigd_run_get_moves(g_ptr_array_index(s->rounds, k));

            for (guint j = 0; j < moves->len; j++) {
                const PolScheduleMove *pm =
                    ((const HotmigdRunMove *)g_ptr_array_index(moves, j))->move;
                HotmigdInvArrival a = {.vm = pm->vm, .host = pm->to};

                if (pm->state == POL_MOVE_PENDING || pm->state == POL_MOVE_RUNNING)
                    g_array_append_val(v->arriving, a);
            }
        }
    }
    v->view.states = v->states;
    v->view.moved = daemon->moved;
    v->view.arriving = v->arriving;
    v->view.now = now_s();
}

static void options_for(Hotmigd *daemon, PolOptions *opts)
{
    pol_options_init(opts);
    opts->min_stay_s = daemon->min_stay_s;
    opts->bandwidth_mib_s = daemon->bandwidth;
    opts->host_value = daemon->host_value;
    opts->cpu_allocation = daemon->cpu_allocation;
}

/* ---- the inventory ------------------------------------------------------------------------- */

static void inventory_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancel)
{
    Hotmigd *daemon = data;
    HotmigdInventoryOptions opts = {
        .migrate_opts = daemon->env.migrate_opts,
        .cpu_sample_ms = daemon->opts.cpu_sample_ms,
        .cancellable = cancel,
    };
    GError *error = NULL;
    HotmigdInventory *inv = hotmigd_inventory_collect(daemon->hosts, &opts, &error);

    if (inv)
        g_task_return_pointer(task, inv, (GDestroyNotify)hotmigd_inventory_free);
    else
        g_task_return_error(task, error);
}

static void inventory_start(Hotmigd *daemon);

/* Logs each host whose state as read (libvirt, hotmigd) differs from @old's (NULL: the first
 * inventory, where only a host not ok is logged), with the reason: a plan that finds no room
 * on a host can be traced to it. */
static void inventory_log_changes(const HotmigdInventory *old, const HotmigdInventory *inv)
{
    for (guint i = 0; i < inv->hosts->len; i++) {
        const HotmigdInvHost *host = g_ptr_array_index(inv->hosts, i);
        const HotmigdInvHost *before = NULL;

        for (guint j = 0; old && j < old->hosts->len && !before; j++) {
            const HotmigdInvHost *o = g_ptr_array_index(old->hosts, j);

            if (g_str_equal(o->name, host->name))
                before = o;
        }
        if (before ? before->state == host->state &&
                         g_strcmp0(before->state_reason, host->state_reason) == 0
                   : host->state == POL_HOST_OK)
            continue;
        if (host->state == POL_HOST_OK)
            g_message("Inventory: host '%s' is ok again", host->name);
        else
            g_message("Inventory: host '%s' is %s: %s", host->name,
                      pol_host_state_to_string(host->state),
                      host->state_reason ? host->state_reason : "no reason given");
    }
}

static void inventory_refresh(Hotmigd *daemon, InvWaiterFunc fn, gpointer data);
static void inventory_background_done(Hotmigd *daemon, const GError *error, gpointer data);

static gboolean inventory_retry_fire(gpointer data)
{
    Hotmigd *daemon = data;

    g_clear_pointer(&daemon->inventory_retry, g_source_unref);
    if (!daemon->inventory_running)
        inventory_refresh(daemon, inventory_background_done, NULL);
    return G_SOURCE_REMOVE;
}

/* A host that could not be read (its libvirt or its hotmigd did not answer: at a cluster's
 * start, the peers' daemons come up in any order) is read again after 1 s, then 2, 4... up to
 * the background interval, so that a peer that comes up is seen in seconds rather than at the
 * next background inventory. */
static void inventory_schedule_retry(Hotmigd *daemon, const HotmigdInventory *inv)
{
    gboolean unread = FALSE;

    for (guint i = 0; i < inv->hosts->len && !unread; i++)
        unread = ((const HotmigdInvHost *)g_ptr_array_index(inv->hosts, i))->state != POL_HOST_OK;
    if (!unread) {
        daemon->inventory_retry_s = 0;
        return;
    }
    if (!daemon->inventory_interval_s || daemon->inventory_retry ||
        g_cancellable_is_cancelled(daemon->cancel))
        return;
    daemon->inventory_retry_s = daemon->inventory_retry_s
                                    ? MIN(daemon->inventory_retry_s * 2, daemon->inventory_interval_s)
                                    : 1;
    if (daemon->inventory_retry_s >= daemon->inventory_interval_s)
        return; /* the background inventory comes as soon */
    daemon->inventory_retry = g_timeout_source_new_seconds(daemon->inventory_retry_s);
    g_source_set_callback(daemon->inventory_retry, inventory_retry_fire, daemon, NULL);
    g_source_attach(daemon->inventory_retry, g_main_context_get_thread_default());
}

static void inventory_done(GObject *source, GAsyncResult *result, gpointer data)
{
    Hotmigd *daemon = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) waiters = daemon->inventory_waiters;
    HotmigdInventory *inv = g_task_propagate_pointer(G_TASK(result), &error);

    daemon->inventory_running = FALSE;
    /* Those who asked while this one ran wait for the next one. */
    daemon->inventory_waiters = g_steal_pointer(&daemon->inventory_next);
    daemon->inventory_next = g_ptr_array_new_with_free_func(g_free);
    if (inv) {
        inventory_log_changes(daemon->inventory, inv);
        inventory_schedule_retry(daemon, inv);
        hotmigd_inventory_free(daemon->inventory);
        daemon->inventory = inv;
        g_debug("Inventory: %u hosts, %u VMs in %.0f ms", inv->hosts->len, inv->vms->len,
                inv->took_ms);
        if (daemon->inventory_taken)
            daemon->inventory_taken(daemon, inv, daemon->inventory_taken_data);
    }
    for (guint i = 0; i < waiters->len; i++) {
        InvWaiter *w = g_ptr_array_index(waiters, i);

        w->fn(daemon, error, w->data);
    }
    /* Asked for while this one ran (or by a waiter just served, which started it already). */
    if (daemon->inventory_waiters->len && !daemon->inventory_running &&
        !g_cancellable_is_cancelled(daemon->cancel))
        inventory_start(daemon);
}

static void inventory_start(Hotmigd *daemon)
{
    g_autoptr(GTask) task = NULL;

    daemon->inventory_running = TRUE;
    task = g_task_new(NULL, daemon->cancel, inventory_done, daemon);
    g_task_set_task_data(task, daemon, NULL);
    g_task_set_return_on_cancel(task, FALSE);
    g_task_run_in_thread(task, inventory_thread);
}

/* Calls @fn once a fresh inventory is in (one started after this call), with the error when
 * it could not be taken (the daemon stops). */
static void inventory_refresh(Hotmigd *daemon, InvWaiterFunc fn, gpointer data)
{
    InvWaiter *w = g_new0(InvWaiter, 1);

    w->fn = fn;
    w->data = data;
    if (daemon->inventory_running) {
        /* The one running may have read a host before we were asked: take the next one. */
        g_ptr_array_add(daemon->inventory_next, w);
        return;
    }
    g_ptr_array_add(daemon->inventory_waiters, w);
    inventory_start(daemon);
}

static void inventory_background_done(Hotmigd *daemon, const GError *error, gpointer data)
{
    if (error && !g_error_matches(error, ORCH_ERROR, ORCH_ERROR_CANCELLED))
        g_warning("The background inventory failed: %s", error->message);
}

static gboolean inventory_tick(gpointer data)
{
    Hotmigd *daemon = data;

    if (!daemon->inventory_running)
        inventory_refresh(daemon, inventory_background_done, NULL);
    return G_SOURCE_CONTINUE;
}

/* ---- stats ------------------------------------------------------------------------------------
 */

static void stats_add_report(Hotmigd *daemon, const char *report)
{
    g_autoptr(JsonNode) root = report ? json_from_string(report, NULL) : NULL;
    JsonNode *phases;

    if (!root || !JSON_NODE_HOLDS_OBJECT(root))
        return;
    phases = json_object_get_member(json_node_get_object(root), "phases");
    if (!phases || !JSON_NODE_HOLDS_ARRAY(phases))
        return;
    for (guint i = 0; i < json_array_get_length(json_node_get_array(phases)); i++) {
        JsonNode *el = json_array_get_element(json_node_get_array(phases), i);
        JsonObject *o = JSON_NODE_HOLDS_OBJECT(el) ? json_node_get_object(el) : NULL;
        const char *name = o ? json_object_get_string_member_with_default(o, "name", "") : "";
        const char *status = o ? json_object_get_string_member_with_default(o, "status", "") : "";
        int phase = orch_phase_from_string(name);
        double ms = o ? json_object_get_double_member_with_default(o, "ms", -1) : -1;

        if (phase < 0 || !isfinite(ms) || ms < 0 ||
            !(g_str_equal(status, "ok") || g_str_equal(status, "failed") ||
              g_str_equal(status, "undone")))
            continue;
        daemon->stats.phase_seconds_sum[phase] += ms / 1000.0;
        daemon->stats.phase_count[phase]++;
    }
}

static void note_moved(Hotmigd *daemon, const char *vm)
{
    gint64 *when = g_new(gint64, 1);

    *when = now_s();
    g_hash_table_insert(daemon->moved, g_strdup(vm), when);
}

/* ---- schedules: JSON ----------------------------------------------------------------------------
 */

static void member_report(JsonBuilder *b, const char *report)
{
    g_autoptr(JsonNode) node = report ? json_from_string(report, NULL) : NULL;

    json_builder_set_member_name(b, "report");
    if (node && JSON_NODE_HOLDS_OBJECT(node))
        json_builder_add_value(b, g_steal_pointer(&node));
    else
        json_builder_add_null_value(b);
}

static void move_json(JsonBuilder *b, const Sched *s, const HotmigdRunMove *m, gboolean report)
{
    const PolScheduleMove *pm = m->move;

    json_builder_begin_object(b);
    orch_json_member_string(b, "schedule", s->id);
    orch_json_member_string(b, "vm", pm->vm);
    orch_json_member_string(b, "from", pm->from);
    orch_json_member_string(b, "to", pm->to);
    orch_json_member_string(b, "job", pm->job);
    orch_json_member_string(b, "state", pol_move_state_to_string(pm->state));
    orch_json_member_string(b, "detail", pm->detail);
    orch_json_member_bool(b, "extra", pm->extra);
    orch_json_member_int(b, "priority", pm->priority);
    orch_json_member_int(b, "predicted_ms", (gint64)llround(pm->duration_s * 1000.0));
    orch_json_member_time(b, "started", pm->started);
    orch_json_member_time(b, "finished", pm->finished);
    orch_json_member_string(b, "driven_by", m->driven_by);
    orch_json_member_string(b, "migration", m->remote_id);
    if (report)
        member_report(b, m->report);
    json_builder_end_object(b);
}

static void sched_progress(const Sched *s, PolScheduleProgress *p)
{
    memset(p, 0, sizeof(*p));
    for (guint i = 0; i < s->rounds->len; i++) {
        PolScheduleProgress r;

        hotmigd_run_get_progress(g_ptr_array_index(s->rounds, i), &r);
        p->total += r.total;
        p->pending += r.pending;
        p->running += r.running;
        p->done += r.done;
        p->failed += r.failed;
        p->skipped += r.skipped;
    }
}

static void sched_json(JsonBuilder *b, const Sched *s, gboolean reports)
{
    PolScheduleProgress p;

    sched_progress(s, &p);
    json_builder_begin_object(b);
    orch_json_member_string(b, "id", s->id);
    orch_json_member_string(b, "kind", s->kind);
    orch_json_member_string(b, "policy", s->policy);
    orch_json_member_string(b, "host", s->host);
    orch_json_member_string(b, "reason", s->reason);
    orch_json_member_string(b, "state", s->ended ? "finished" : "running");
    if (s->ended)
        orch_json_member_bool(b, "ok", s->ok);
    else
        orch_json_member_string(b, "ok", NULL);
    orch_json_member_string(b, "error", s->error);
    orch_json_member_time(b, "created", s->created);
    orch_json_member_time(b, "ended", s->ended);
    orch_json_member_time(b, "deadline", s->deadline);
    json_builder_set_member_name(b, "late");
    json_builder_begin_array(b);
    for (guint i = 0; s->late && i < s->late->len; i++)
        json_builder_add_string_value(b, g_ptr_array_index(s->late, i));
    json_builder_end_array(b);
    orch_json_member_int(b, "rounds", s->rounds->len);
    json_builder_set_member_name(b, "progress");
    json_builder_begin_object(b);
    orch_json_member_int(b, "total", p.total);
    orch_json_member_int(b, "pending", p.pending);
    orch_json_member_int(b, "running", p.running);
    orch_json_member_int(b, "done", p.done);
    orch_json_member_int(b, "failed", p.failed);
    orch_json_member_int(b, "skipped", p.skipped);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "moves");
    json_builder_begin_array(b);
    for (guint r = 0; r < s->rounds->len; r++) {
        const GPtrArray *moves = hotmigd_run_get_moves(g_ptr_array_index(s->rounds, r));

        for (guint i = 0; i < moves->len; i++)
            move_json(b, s, g_ptr_array_index(moves, i), reports);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
}

static JsonNode *sched_node(const Sched *s, gboolean reports)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    sched_json(b, s, reports);
    return json_builder_get_root(b);
}

/* ---- schedules: running ------------------------------------------------------------------------
 */

static void sched_free(Sched *s)
{
    if (!s)
        return;
    g_ptr_array_unref(s->rounds);
    g_ptr_array_unref(s->watchers);
    if (s->late)
        g_ptr_array_unref(s->late);
    if (s->tried)
        g_hash_table_unref(s->tried);
    g_free(s->id);
    g_free(s->kind);
    g_free(s->policy);
    g_free(s->host);
    g_free(s->reason);
    g_free(s->error);
    g_free(s);
}

/* Drops the oldest finished schedules beyond HOTMIGD_KEEP_FINISHED. */
static void sched_prune(Hotmigd *daemon)
{
    guint finished = 0;

    for (guint i = 0; i < daemon->scheds->len; i++)
        finished += ((Sched *)g_ptr_array_index(daemon->scheds, i))->ended != 0;
    for (guint i = 0; i < daemon->scheds->len && finished > HOTMIGD_KEEP_FINISHED;) {
        Sched *s = g_ptr_array_index(daemon->scheds, i);

        if (s->ended && !s->waiting && !s->watchers->len) {
            g_ptr_array_remove_index(daemon->scheds, i);
            finished--;
        } else {
            i++;
        }
    }
}

static Sched *sched_new(Hotmigd *daemon, const char *kind, const char *policy, const char *host,
                        const char *reason, gint64 deadline)
{
    Sched *s = g_new0(Sched, 1);

    s->daemon = daemon;
    s->id = new_id(kind);
    s->kind = g_strdup(kind);
    s->policy = g_strdup(policy);
    s->host = g_strdup(host);
    s->reason = g_strdup(reason ? reason : kind);
    s->deadline = deadline;
    s->created = now_s();
    s->rounds = g_ptr_array_new_with_free_func((GDestroyNotify)hotmigd_run_free);
    s->late = g_ptr_array_new_with_free_func(g_free);
    s->watchers = g_ptr_array_new_with_free_func(g_free);
    if (host)
        s->tried = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    /* Pruned here, not when one ends: the callers of sched_end() still use it. */
    sched_prune(daemon);
    g_ptr_array_add(daemon->scheds, s);
    return s;
}

static Sched *sched_find(Hotmigd *daemon, const char *id)
{
    for (guint i = 0; id && i < daemon->scheds->len; i++) {
        Sched *s = g_ptr_array_index(daemon->scheds, i);

        if (g_str_equal(s->id, id))
            return s;
    }
    return NULL;
}

static void sched_tell(Sched *s, JsonNode *event)
{
    /* A watcher may remove itself (or others) from its callback: go over a copy. */
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(guint));

    for (guint i = 0; i < s->watchers->len; i++)
        g_array_append_val(ids, ((Watcher *)g_ptr_array_index(s->watchers, i))->id);
    for (guint k = 0; k < ids->len; k++) {
        for (guint i = 0; i < s->watchers->len; i++) {
            Watcher *w = g_ptr_array_index(s->watchers, i);

            if (w->id == g_array_index(ids, guint, k)) {
                w->fn(event, w->data);
                break;
            }
        }
    }
}

static void sched_end(Sched *s, gboolean ok, const char *error)
{
    Hotmigd *daemon = s->daemon;
    PolScheduleProgress p;

    s->ended = now_s();
    s->ok = ok;
    if (error && !s->error)
        s->error = g_strdup(error);
    sched_progress(s, &p);
    g_message("Schedule %s (%s%s%s) ended %s: %u done, %u failed, %u skipped%s%s", s->id, s->kind,
              s->host ? " of " : "", s->host ? s->host : "", ok ? "ok" : "with failures", p.done,
              p.failed, p.skipped, s->error ? ": " : "", s->error ? s->error : "");
    if (daemon->plan_run == s)
        daemon->plan_run = NULL;
    if (s->host && g_hash_table_lookup(daemon->evacuations, s->host) == s) {
        g_autofree char *host = g_strdup(s->host);

        g_hash_table_remove(daemon->evacuations, host);
        if (daemon->evacuation_done)
            daemon->evacuation_done(daemon, host, ok, daemon->evacuation_done_data);
    }
    /* The watchers hear the end once, then are dropped. */
    while (s->watchers->len) {
        Watcher *w = g_ptr_array_steal_index(s->watchers, 0);

        w->fn(NULL, w->data);
        g_free(w);
    }
}

static void on_round_event(HotmigdRun *run, HotmigdRunEvent event, const HotmigdRunMove *move,
                           gpointer data);

/* Starts @migrations as a new round of @s on @cluster. */
static gboolean sched_start_round(Sched *s, const PolCluster *cluster, const GPtrArray *migrations,
                                  GError **error)
{
    Hotmigd *daemon = s->daemon;
    PolOptions opts;
    HotmigdRun *run;

    options_for(daemon, &opts);
    opts.min_stay_s = 0; /* checked by the planner; a plan given to run is not refused for it */
    run = hotmigd_run_new(&daemon->env, s->id, s->reason, cluster, migrations, &daemon->limits,
                          &opts, error);
    if (!run)
        return FALSE;
    /* Against a deadline the evacuation's order and predictions stand: a job's moves run side
     * by side there; elsewhere one at a time (docs/policies.md, "Running a plan"). */
    hotmigd_run_set_jobs_side_by_side(run, s->deadline > 0);
    g_ptr_array_add(s->rounds, run);
    for (guint i = 0; s->tried && i < migrations->len; i++)
        g_hash_table_add(s->tried,
                         g_strdup(((PolMigration *)g_ptr_array_index(migrations, i))->vm));
    hotmigd_run_start(run, on_round_event, s);
    return TRUE;
}

/* ---- drains and evacuations -------------------------------------------------------------------
 */

/* The VMs on @host in the inventory that @s has not had in a round yet. */
static guint evac_left(Sched *s, const HotmigdInventory *inv, guint *ret_all)
{
    guint left = 0, all = 0;

    for (guint i = 0; i < inv->vms->len; i++) {
        const HotmigdInvVm *vm = g_ptr_array_index(inv->vms, i);

        if (!g_str_equal(vm->host, s->host))
            continue;
        all++;
        left += !g_hash_table_contains(s->tried, vm->name);
    }
    if (ret_all)
        *ret_all = all;
    return left;
}

/* Plans the next round of drain @s on the daemon's inventory and starts it (when @start; else
 * only predicts which VMs will be late). *ret_started FALSE: nothing is left to move. Fails
 * when no plan exists (no room, a VM may not move), naming it. */
static gboolean evac_plan_round(Sched *s, gboolean start, gboolean *ret_started, GError **error)
{
    Hotmigd *daemon = s->daemon;
    g_auto(View) view = {0};
    g_autoptr(PolCluster) cluster = NULL;
    g_autoptr(PolPlan) drain = NULL;
    g_autoptr(PolEvacuation) evac = NULL;
    g_autoptr(GError) local = NULL;
    g_autoptr(GHashTable) others = NULL;
    const GPtrArray *migrations;
    PolOptions opts;
    guint all;

    *ret_started = FALSE;
    if (!evac_left(s, daemon->inventory, &all))
        return TRUE;
    view_init(daemon, &view);
    cluster = hotmigd_inventory_to_cluster(daemon->inventory, &view.view, error);
    if (!cluster)
        return FALSE;
    options_for(daemon, &opts);
    opts.min_stay_s = 0; /* a drain moves every VM */
    drain = pol_plan_drain(cluster, s->host, &opts, &local);
    if (!drain) {
        g_set_error(error, ORCH_ERROR,
                    g_error_matches(local, POL_ERROR, POL_ERROR_NOT_FOUND) ? ORCH_ERROR_NOT_FOUND
                                                                           : ORCH_ERROR_CONFLICT,
                    "no drain plan for host '%s': %s", s->host, local->message);
        return FALSE;
    }
    /* A later round moves only the VMs that appeared since. */
    if (s->rounds->len) {
        for (guint i = drain->migrations->len; i-- > 0;) {
            PolMigration *m = g_ptr_array_index(drain->migrations, i);

            if (g_hash_table_contains(s->tried, m->vm))
                g_ptr_array_remove_index(drain->migrations, i);
        }
    }
    migrations = drain->migrations;
    if (s->deadline > 0 && drain->migrations->len) {
        PolEvacOptions eo;
        guint conc = daemon->limits.per_host_out ? daemon->limits.per_host_out
                     : daemon->limits.total      ? daemon->limits.total
                                                 : drain->migrations->len;

        pol_evac_options_init(&eo);
        eo.bandwidth_mib_s = daemon->bandwidth;
        eo.concurrency = CLAMP(conc, 1, POL_EVAC_CONCURRENCY_MAX);
        eo.priority = 1;
        evac = pol_evacuation_order(cluster, drain, &eo, now_s(), s->deadline, &local);
        if (!evac) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                        "cannot order the evacuation of '%s' for its deadline: %s", s->host,
                        local->message);
            return FALSE;
        }
        for (guint i = 0; i < evac->late->len; i++) {
            const PolEvacMove *late = g_ptr_array_index(evac->late, i);

            if (!g_ptr_array_find_with_equal_func(s->late, late->migration->vm, g_str_equal, NULL))
                g_ptr_array_add(s->late, g_strdup(late->migration->vm));
        }
        migrations = evac->plan->migrations;
    }
    if (!migrations->len || !start)
        return TRUE;
    if (!sched_start_round(s, cluster, migrations, error))
        return FALSE;
    *ret_started = TRUE;
    g_message("Schedule %s: round %u of the drain of '%s' (%s): %u moves of %u VMs there%s", s->id,
              s->rounds->len, s->host, s->reason, migrations->len, all,
              s->late->len ? ", some predicted late" : "");
    return TRUE;
}

/* After a round (or the first inventory): plans the next one, or ends the drain. */
static void evac_go_on(Hotmigd *daemon, const GError *error, gpointer data)
{
    Sched *s = data;
    g_autoptr(GError) local = NULL;
    gboolean started = FALSE;
    guint all = 0;

    s->waiting--;
    if (s->ended)
        return;
    if (error) {
        sched_end(s, FALSE, error->message);
        return;
    }
    if (!evac_plan_round(s, TRUE, &started, &local)) {
        sched_end(s, FALSE, local->message);
        return;
    }
    if (started)
        return;
    evac_left(s, daemon->inventory, &all);
    if (all) {
        g_autofree char *msg = g_strdup_printf("%u VM(s) still on '%s' after %u round(s)", all,
                                               s->host, s->rounds->len);

        sched_end(s, FALSE, msg);
    } else {
        sched_end(s, TRUE, NULL);
    }
}

/* Drain @s is asked again with an earlier @deadline: what has not started yet is ordered again
 * for it. The pending moves of the round under way are skipped (running ones go on); the next
 * round, planned when those end, has their VMs again, ordered by pol_evacuation_order() for the
 * new deadline. The VMs predicted late are predicted again now, on the last inventory (the
 * moves still running are not counted: the prediction may be a little hopeful). */
static void evac_sooner(Sched *s, gint64 deadline)
{
    g_autoptr(GError) local = NULL;
    gboolean started;
    guint stopped = 0;

    s->deadline = deadline;
    for (guint i = 0; i < s->rounds->len; i++) {
        g_autoptr(GPtrArray) vms = hotmigd_run_stop_pending(
            g_ptr_array_index(s->rounds, i), "ordered again for an earlier deadline");

        for (guint k = 0; k < vms->len; k++)
            g_hash_table_remove(s->tried, g_ptr_array_index(vms, k));
        stopped += vms->len;
    }
    g_ptr_array_set_size(s->late, 0);
    if (s->daemon->inventory && !evac_plan_round(s, FALSE, &started, &local))
        g_warning("Schedule %s: cannot predict the evacuation of '%s' for its new deadline: %s",
                  s->id, s->host, local->message);
    g_message("Schedule %s: the drain of '%s' has an earlier deadline now; %u move(s) not started "
              "yet are ordered again for it%s",
              s->id, s->host, stopped, s->late->len ? ", some predicted late" : "");
}

static gboolean evacuate(Hotmigd *daemon, const char *host, gint64 deadline, const char *reason,
                         gboolean fresh, char **ret_id, gboolean *ret_merged, char ***ret_late,
                         GError **error)
{
    Sched *s = g_hash_table_lookup(daemon->evacuations, host ? host : "");
    g_autoptr(GPtrArray) late = g_ptr_array_new_with_free_func(g_free);
    gboolean started = FALSE;

    if (!check_host(daemon, host, error))
        return FALSE;
    if (deadline < 0) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "the deadline must be unix seconds or 0, not %" G_GINT64_FORMAT, deadline);
        return FALSE;
    }
    if (s) {
        g_message("Drain of '%s' asked again (%s): schedule %s runs already", host,
                  reason ? reason : "no reason given", s->id);
        if (deadline > 0 && (s->deadline == 0 || deadline < s->deadline))
            evac_sooner(s, deadline);
        for (guint i = 0; i < s->late->len; i++)
            g_ptr_array_add(late, g_strdup(g_ptr_array_index(s->late, i)));
        g_ptr_array_add(late, NULL);
        *ret_id = g_strdup(s->id);
        *ret_merged = TRUE;
        *ret_late = (char **)g_ptr_array_steal(late, NULL);
        return TRUE;
    }
    s = sched_new(daemon, "drain", "drain", host, reason, deadline);
    g_hash_table_insert(daemon->evacuations, g_strdup(host), s);
    g_message("Schedule %s: drain of '%s' (%s)%s", s->id, host, s->reason,
              deadline > 0 ? ", with a deadline" : "");
    if (daemon->inventory && !evac_plan_round(s, TRUE, &started, error)) {
        g_hash_table_remove(daemon->evacuations, host);
        g_ptr_array_remove(daemon->scheds, s);
        return FALSE;
    }
    if (!started) {
        /* No inventory yet, or nothing to move in this one: look again first. */
        s->waiting++;
        if (fresh && daemon->inventory)
            evac_go_on(daemon, NULL, s);
        else
            inventory_refresh(daemon, evac_go_on, s);
    }
    for (guint i = 0; i < s->late->len; i++)
        g_ptr_array_add(late, g_strdup(g_ptr_array_index(s->late, i)));
    g_ptr_array_add(late, NULL);
    *ret_id = g_strdup(s->id);
    *ret_merged = FALSE;
    *ret_late = (char **)g_ptr_array_steal(late, NULL);
    return TRUE;
}

gboolean hotmigd_evacuate(Hotmigd *daemon, const char *host, gint64 deadline, const char *reason,
                          char **ret_id, gboolean *ret_merged, char ***ret_late, GError **error)
{
    g_return_val_if_fail(daemon && ret_id && ret_merged && ret_late, FALSE);
    return evacuate(daemon, host, deadline, reason, FALSE, ret_id, ret_merged, ret_late, error);
}

/* ---- the rounds' events
 * ---------------------------------------------------------------------------- */

static void plan_run_done(Hotmigd *daemon, const GError *error, gpointer data)
{
    Sched *s = data;
    PolScheduleProgress p;

    s->waiting--;
    sched_progress(s, &p);
    if (!s->ended)
        sched_end(s, p.done == p.total, NULL);
}

static void on_round_event(HotmigdRun *run, HotmigdRunEvent event, const HotmigdRunMove *move,
                           gpointer data)
{
    Sched *s = data;
    Hotmigd *daemon = s->daemon;
    g_autoptr(JsonBuilder) b = NULL;
    g_autoptr(JsonNode) node = NULL;

    if (event == HOTMIGD_RUN_EVENT_FINISHED) {
        /* Look again: a drain's next round, or the end. */
        s->waiting++;
        inventory_refresh(daemon, s->host ? evac_go_on : plan_run_done, s);
        return;
    }
    if (event == HOTMIGD_RUN_EVENT_STARTED) {
        g_message("Schedule %s: %s %s -> %s started (%s)", s->id, move->move->vm, move->move->from,
                  move->move->to,
                  g_strcmp0(move->driven_by, "here") == 0 ? "here" : "at the source's hotmigd");
    } else {
        switch (move->move->state) {
        case POL_MOVE_DONE:
            daemon->stats.migrations_ok++;
            note_moved(daemon, move->move->vm);
            break;
        case POL_MOVE_FAILED:
            daemon->stats.migrations_failed++;
            break;
        default:
            daemon->stats.migrations_skipped++;
            break;
        }
        stats_add_report(daemon, move->report);
        g_message("Schedule %s: %s %s -> %s %s%s%s", s->id, move->move->vm, move->move->from,
                  move->move->to, pol_move_state_to_string(move->move->state),
                  move->move->detail ? ": " : "", move->move->detail ? move->move->detail : "");
        /* Its place under the shared limits is free: the other schedules may start a move. */
        for (guint i = 0; i < daemon->scheds->len; i++) {
            Sched *other = g_ptr_array_index(daemon->scheds, i);

            if (other != s && !other->ended && other->rounds->len)
                hotmigd_run_poke(g_ptr_array_index(other->rounds, other->rounds->len - 1));
        }
    }
    b = json_builder_new();
    move_json(b, s, move, FALSE);
    node = json_builder_get_root(b);
    sched_tell(s, node);
}

/* ---- the local API's calls
 * ------------------------------------------------------------------------- */

typedef struct {
    Hotmigd *daemon;
    HotmigdDone done;
    gpointer data;
    HotmigdPlanRequest plan_req;
    char *host;
    char *reason;
    gint64 deadline;
    PolPlan *plan;
} Call;

static Call *call_new(Hotmigd *daemon, HotmigdDone done, gpointer data)
{
    Call *c = g_new0(Call, 1);

    c->daemon = daemon;
    c->done = done;
    c->data = data;
    return c;
}

static void call_free(Call *c)
{
    g_free(c->host);
    g_free(c->reason);
    pol_plan_free(c->plan);
    g_free(c);
}

static void call_fail(Call *c, const GError *error)
{
    c->done(NULL, g_error_copy(error), c->data);
    call_free(c);
}

/* The cluster of the (fresh) inventory with the daemon's states. */
static PolCluster *cluster_now(Hotmigd *daemon, GError **error)
{
    g_auto(View) view = {0};

    view_init(daemon, &view);
    return hotmigd_inventory_to_cluster(daemon->inventory, &view.view, error);
}

static void plan_after_inventory(Hotmigd *daemon, const GError *error, gpointer data)
{
    Call *c = data;
    const HotmigdPlanRequest *req = &c->plan_req;
    g_autoptr(GError) local = NULL;
    g_autoptr(PolCluster) cluster = NULL;
    g_autoptr(PolPlan) plan = NULL;
    g_autofree char *json = NULL;
    PolOptions opts;

    if (error) {
        call_fail(c, error);
        return;
    }
    if (!(cluster = cluster_now(daemon, &local))) {
        call_fail(c, local);
        return;
    }
    options_for(daemon, &opts);
    if (req->min_stay_s >= 0)
        opts.min_stay_s = (guint)req->min_stay_s;
    if (req->bandwidth > 0)
        opts.bandwidth_mib_s = req->bandwidth;
    if (req->tolerance >= 0)
        opts.balance_tolerance = req->tolerance;
    if (req->max_moves >= 0)
        opts.max_moves = (guint)req->max_moves;
    if (req->host_value >= 0)
        opts.host_value = (guint)req->host_value;
    if (req->max_migrations >= 0)
        opts.max_migrations = (guint)req->max_migrations;
    opts.pack_by_vcpus = req->pack_vcpus;
    opts.keep_jobs_together = req->keep_jobs;
    switch (req->policy) {
    case POL_POLICY_CONSOLIDATE:
        plan = pol_plan_consolidate(cluster, &opts, &local);
        break;
    case POL_POLICY_DRAIN:
        opts.min_stay_s = 0;
        plan = pol_plan_drain(cluster, c->host, &opts, &local);
        break;
    default:
        plan = pol_plan_balance(cluster, &opts, &local);
        break;
    }
    if (!plan) {
        g_autoptr(GError) e = g_error_new(
            ORCH_ERROR,
            g_error_matches(local, POL_ERROR, POL_ERROR_NOT_FOUND) ? ORCH_ERROR_NOT_FOUND
                                                                   : ORCH_ERROR_CONFLICT,
            "no %s plan: %s", pol_policy_to_string(req->policy), local->message);

        call_fail(c, e);
        return;
    }
    json = orch_plan_format_json(plan, FALSE, TRUE);
    c->done(json_from_string(json, NULL), NULL, c->data);
    call_free(c);
}

void hotmigd_plan_async(Hotmigd *daemon, const HotmigdPlanRequest *req, HotmigdDone done,
                        gpointer data)
{
    Call *c = call_new(daemon, done, data);
    g_autoptr(GError) error = NULL;

    c->plan_req = *req;
    c->host = g_strdup(req->host);
    c->plan_req.host = c->host;
    if (req->policy == POL_POLICY_DRAIN && !check_host(daemon, req->host, &error)) {
        call_fail(c, error);
        return;
    }
    inventory_refresh(daemon, plan_after_inventory, c);
}

static void run_after_inventory(Hotmigd *daemon, const GError *error, gpointer data)
{
    Call *c = data;
    g_autoptr(GError) local = NULL;
    g_autoptr(PolCluster) cluster = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    Sched *s;

    if (error) {
        call_fail(c, error);
        return;
    }
    if (daemon->plan_run) {
        local = g_error_new(ORCH_ERROR, ORCH_ERROR_CONFLICT,
                            "plan run %s is running: one plan at a time", daemon->plan_run->id);
        call_fail(c, local);
        return;
    }
    if (!(cluster = cluster_now(daemon, &local))) {
        call_fail(c, local);
        return;
    }
    s = sched_new(daemon, "plan", pol_policy_to_string(c->plan->policy), NULL, c->reason, 0);
    if (!sched_start_round(s, cluster, c->plan->migrations, &local)) {
        g_autoptr(GError) e =
            g_error_new(ORCH_ERROR, ORCH_ERROR_INVALID,
                        "the plan does not fit the cluster as it is now: %s", local->message);

        g_ptr_array_remove(daemon->scheds, s);
        call_fail(c, e);
        return;
    }
    daemon->plan_run = s;
    g_message("Schedule %s: %s plan of %u moves (%s)", s->id, s->policy, c->plan->migrations->len,
              s->reason);
    json_builder_begin_object(b);
    orch_json_member_string(b, "id", s->id);
    orch_json_member_int(b, "moves", c->plan->migrations->len);
    json_builder_end_object(b);
    c->done(json_builder_get_root(b), NULL, c->data);
    call_free(c);
}

void hotmigd_run_async(Hotmigd *daemon, PolPlan *plan, const char *reason, HotmigdDone done,
                       gpointer data)
{
    Call *c = call_new(daemon, done, data);

    c->plan = plan;
    c->reason = g_strdup(reason ? reason : "migrate-vm run");
    inventory_refresh(daemon, run_after_inventory, c);
}

static void drain_after_inventory(Hotmigd *daemon, const GError *error, gpointer data)
{
    Call *c = data;
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *id = NULL;
    g_auto(GStrv) late = NULL;
    gboolean merged = FALSE;

    if (error) {
        call_fail(c, error);
        return;
    }
    if (!evacuate(daemon, c->host, c->deadline, c->reason, TRUE, &id, &merged, &late, &local)) {
        call_fail(c, local);
        return;
    }
    json_builder_begin_object(b);
    orch_json_member_string(b, "id", id);
    orch_json_member_bool(b, "merged", merged);
    json_builder_set_member_name(b, "late");
    json_builder_begin_array(b);
    for (guint i = 0; late[i]; i++)
        json_builder_add_string_value(b, late[i]);
    json_builder_end_array(b);
    json_builder_end_object(b);
    c->done(json_builder_get_root(b), NULL, c->data);
    call_free(c);
}

void hotmigd_drain_async(Hotmigd *daemon, const char *host, gint64 deadline, const char *reason,
                         HotmigdDone done, gpointer data)
{
    Call *c = call_new(daemon, done, data);
    g_autoptr(GError) error = NULL;

    c->host = g_strdup(host);
    c->deadline = deadline;
    c->reason = g_strdup(reason ? reason : "migrate-vm drain");
    if (!check_host(daemon, host, &error)) {
        call_fail(c, error);
        return;
    }
    /* One runs already: no need to look at the cluster first. */
    if (g_hash_table_contains(daemon->evacuations, host)) {
        drain_after_inventory(daemon, NULL, c);
        return;
    }
    inventory_refresh(daemon, drain_after_inventory, c);
}

static char *snapshot_json(Hotmigd *daemon)
{
    g_auto(View) view = {0};

    view_init(daemon, &view);
    return hotmigd_inventory_format_snapshot(daemon->inventory, &view.view, TRUE);
}

static void snapshot_after_inventory(Hotmigd *daemon, const GError *error, gpointer data)
{
    Call *c = data;
    g_autofree char *json = NULL;

    if (error) {
        call_fail(c, error);
        return;
    }
    json = snapshot_json(daemon);
    c->done(json_from_string(json, NULL), NULL, c->data);
    call_free(c);
}

void hotmigd_snapshot_async(Hotmigd *daemon, HotmigdDone done, gpointer data)
{
    inventory_refresh(daemon, snapshot_after_inventory, call_new(daemon, done, data));
}

static void remote_json(JsonBuilder *b, const Remote *r)
{
    g_autofree char *json = hotmigd_api_migration_format_json(&r->info);
    g_autoptr(JsonNode) node = json_from_string(json, NULL);

    json_builder_add_value(b, g_steal_pointer(&node));
}

static void hosts_json(Hotmigd *daemon, JsonBuilder *b)
{
    const HotmigdInventory *inv = daemon->inventory;
    g_auto(View) view = {0};
    g_autoptr(GHashTable) by_state =
        g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)g_ptr_array_unref);
    static const char *const order[] = {"ok", "quarantined", "evacuating", "down", "unknown"};

    view_init(daemon, &view);
    json_builder_set_member_name(b, "hosts");
    json_builder_begin_array(b);
    for (guint i = 0; i < daemon->hosts->len; i++) {
        const HmConfigHost *h = g_ptr_array_index(daemon->hosts, i);
        const HotmigdInvHost *ih = NULL;
        const Held *held = g_hash_table_lookup(daemon->held, h->name);
        const Sched *evac = g_hash_table_lookup(daemon->evacuations, h->name);
        const char *state = "unknown";
        const char *reason = NULL;
        GPtrArray *names;

        for (guint k = 0; inv && k < inv->hosts->len && !ih; k++) {
            const HotmigdInvHost *x = g_ptr_array_index(inv->hosts, k);

            if (g_str_equal(x->name, h->name))
                ih = x;
        }
        if (ih) {
            state = pol_host_state_to_string(hotmigd_inventory_host_state(inv, ih, &view.view));
            reason = ih->state_reason;
        } else if (evac) {
            state = "evacuating";
        } else if (held) {
            state = pol_host_state_to_string(held->state);
        }
        if (evac && (!ih || ih->state != POL_HOST_DOWN))
            reason = evac->reason;
        else if (held && (!ih || ih->state == POL_HOST_OK))
            reason = held->reason;
        json_builder_begin_object(b);
        orch_json_member_string(b, "name", h->name);
        orch_json_member_string(b, "state", state);
        orch_json_member_string(b, "reason", reason);
        orch_json_member_bool(b, "self", g_str_equal(h->name, daemon->name));
        orch_json_member_string(b, "uri", h->uri);
        orch_json_member_string(b, "hotmigd", h->hotmigd);
        if (ih) {
            orch_json_member_int(b, "cpus", ih->cpus);
            orch_json_member_int(b, "memory_mib", (gint64)ih->memory_mib);
            orch_json_member_int(b, "vfs", ih->vfs_total);
            orch_json_member_int(b, "vfs_free", ih->vfs_free);
            orch_json_member_int(b, "vms", ih->vms);
        }
        json_builder_end_object(b);
        names = g_hash_table_lookup(by_state, state);
        if (!names) {
            names = g_ptr_array_new();
            g_hash_table_insert(by_state, (gpointer)state, names);
        }
        g_ptr_array_add(names, h->name);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "by_state");
    json_builder_begin_object(b);
    for (guint i = 0; i < G_N_ELEMENTS(order); i++) {
        GPtrArray *names = g_hash_table_lookup(by_state, order[i]);

        if (!names)
            continue;
        json_builder_set_member_name(b, order[i]);
        json_builder_begin_array(b);
        for (guint k = 0; k < names->len; k++)
            json_builder_add_string_value(b, g_ptr_array_index(names, k));
        json_builder_end_array(b);
    }
    json_builder_end_object(b);
}

JsonNode *hotmigd_status(Hotmigd *daemon, const char *id, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    g_return_val_if_fail(daemon != NULL, NULL);
    if (id) {
        Sched *s = sched_find(daemon, id);

        if (!s) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND,
                        "no schedule '%.64s' (it may have been forgotten: the last %d are kept)",
                        id, HOTMIGD_KEEP_FINISHED);
            return NULL;
        }
        return sched_node(s, TRUE);
    }
    json_builder_begin_object(b);
    orch_json_member_string(b, "host", daemon->name);
    orch_json_member_string(b, "version", HOTMIG_VERSION);
    orch_json_member_time(b, "inventory_taken", daemon->inventory ? daemon->inventory->taken : 0);
    json_builder_set_member_name(b, "warnings");
    json_builder_begin_array(b);
    for (guint i = 0; daemon->inventory && i < daemon->inventory->warnings->len; i++)
        json_builder_add_string_value(b, g_ptr_array_index(daemon->inventory->warnings, i));
    json_builder_end_array(b);
    hosts_json(daemon, b);
    json_builder_set_member_name(b, "schedules");
    json_builder_begin_array(b);
    for (guint i = 0; i < daemon->scheds->len; i++)
        sched_json(b, g_ptr_array_index(daemon->scheds, i), FALSE);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "migrations");
    json_builder_begin_array(b);
    for (guint i = 0; i < daemon->remotes->len; i++)
        remote_json(b, g_ptr_array_index(daemon->remotes, i));
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static gboolean watch_ended(gpointer data)
{
    Watcher *w = data;

    w->fn(NULL, w->data);
    return G_SOURCE_REMOVE;
}

guint hotmigd_watch(Hotmigd *daemon, const char *id, HotmigdWatchFunc fn, gpointer data,
                    GError **error)
{
    Sched *s = sched_find(daemon, id);
    Watcher *w;

    if (!s) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND, "no schedule '%.64s'", id ? id : "");
        return 0;
    }
    w = g_new0(Watcher, 1);
    w->id = ++daemon->next_watch;
    w->fn = fn;
    w->data = data;
    if (s->ended) {
        GSource *src = g_idle_source_new();

        g_source_set_callback(src, watch_ended, w, g_free);
        g_source_attach(src, g_main_context_get_thread_default());
        g_source_unref(src);
        return w->id;
    }
    g_ptr_array_add(s->watchers, w);
    return w->id;
}

void hotmigd_unwatch(Hotmigd *daemon, guint watch)
{
    for (guint i = 0; i < daemon->scheds->len; i++) {
        Sched *s = g_ptr_array_index(daemon->scheds, i);

        for (guint k = 0; k < s->watchers->len; k++) {
            if (((Watcher *)g_ptr_array_index(s->watchers, k))->id == watch) {
                g_ptr_array_remove_index(s->watchers, k);
                return;
            }
        }
    }
}

/* ---- migrations run here for other hosts (POST /v1/migrations) --------------------------------
 */

static void remote_free(Remote *r)
{
    hotmigd_run_move_free(r->job);
    g_free(r->info.id);
    g_free(r->info.domain);
    g_free(r->info.source);
    g_free(r->info.destination);
    g_free(r->info.reason);
    g_free(r->info.plan);
    g_free(r->info.error);
    g_free(r->info.report);
    g_free(r);
}

static void remote_done(HotmigdMove *move, const HotmigdMoveResult *result, gpointer data)
{
    Remote *r = data;
    Hotmigd *daemon = r->daemon;

    r->info.state = result->ok ? ORCH_HOTMIGD_MIGRATION_DONE : ORCH_HOTMIGD_MIGRATION_FAILED;
    r->info.error = g_strdup(result->detail);
    r->info.report = g_strdup(result->report);
    r->info.finished = now_s();
    g_clear_pointer(&r->job, hotmigd_run_move_free);
    if (result->ok)
        note_moved(daemon, r->info.domain);
    g_message("Migration %s of '%s' to '%s' (%s) %s%s%s", r->info.id, r->info.domain,
              r->info.destination, r->info.reason, result->ok ? "done" : "failed",
              result->detail ? ": " : "", result->detail ? result->detail : "");
    /* Forget the oldest finished ones. */
    for (guint i = 0; daemon->remotes->len > HOTMIGD_KEEP_MIGRATIONS && i < daemon->remotes->len;) {
        Remote *old = g_ptr_array_index(daemon->remotes, i);

        if (old->job)
            i++;
        else
            g_ptr_array_remove_index(daemon->remotes, i);
    }
}

/* Is @domain being migrated by this daemon (for another host, or in a schedule here)? */
static gboolean domain_busy(Hotmigd *daemon, const char *domain)
{
    for (guint i = 0; i < daemon->remotes->len; i++) {
        Remote *r = g_ptr_array_index(daemon->remotes, i);

        if (r->job && g_str_equal(r->info.domain, domain))
            return TRUE;
    }
    for (guint i = 0; i < daemon->scheds->len; i++) {
        Sched *s = g_ptr_array_index(daemon->scheds, i);

        for (guint k = 0; !s->ended && k < s->rounds->len; k++) {
            const GPtrArray *moves = hotmigd_run_get_moves(g_ptr_array_index(s->rounds, k));

            for (guint m = 0; m < moves->len; m++) {
                const HotmigdRunMove *rm = g_ptr_array_index(moves, m);

                if (rm->move->state == POL_MOVE_RUNNING && g_str_equal(rm->move->vm, domain) &&
                    g_strcmp0(rm->move->from, daemon->name) == 0)
                    return TRUE;
            }
        }
    }
    return FALSE;
}

static char *service_migration_start(gpointer data, const OrchHotmigdMigrationRequest *req,
                                     GError **error)
{
    Hotmigd *daemon = data;
    Remote *r;

    if (!check_host(daemon, req->destination, error))
        return NULL;
    if (!hotmigd_has_host(daemon, daemon->name)) {
        g_set_error(
            error, ORCH_ERROR, ORCH_ERROR_INVALID,
            "this host's name '%s' ([hotmigd] name) is not one of its [host NAME] groups: it cannot run migrations",
            daemon->name);
        return NULL;
    }
    if (g_str_equal(req->destination, daemon->name)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "destination '%s' is this host: a migration goes to another one",
                    req->destination);
        return NULL;
    }
    if (domain_busy(daemon, req->domain)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_CONFLICT,
                    "domain '%s' is being migrated by this hotmigd already", req->domain);
        return NULL;
    }
    r = g_new0(Remote, 1);
    r->daemon = daemon;
    r->info.id = new_id("migration");
    r->info.domain = g_strdup(req->domain);
    r->info.source = g_strdup(daemon->name);
    r->info.destination = g_strdup(req->destination);
    r->info.reason = g_strdup(req->reason);
    r->info.plan = g_strdup(req->plan);
    r->info.state = ORCH_HOTMIGD_MIGRATION_RUNNING;
    r->info.started = now_s();
    g_ptr_array_add(daemon->remotes, r);
    r->job = hotmigd_run_move_start(&daemon->env, req->domain, daemon->name, req->destination,
                                    req->reason, req->plan, remote_done, r);
    return g_strdup(r->info.id);
}

static OrchHotmigdMigration *service_migration_get(gpointer data, const char *id, GError **error)
{
    Hotmigd *daemon = data;

    for (guint i = 0; i < daemon->remotes->len; i++) {
        Remote *r = g_ptr_array_index(daemon->remotes, i);
        OrchHotmigdMigration *copy;

        if (!g_str_equal(r->info.id, id))
            continue;
        copy = g_new0(OrchHotmigdMigration, 1);
        *copy = r->info;
        copy->id = g_strdup(r->info.id);
        copy->domain = g_strdup(r->info.domain);
        copy->source = g_strdup(r->info.source);
        copy->destination = g_strdup(r->info.destination);
        copy->reason = g_strdup(r->info.reason);
        copy->plan = g_strdup(r->info.plan);
        copy->error = g_strdup(r->info.error);
        copy->report = g_strdup(r->info.report);
        return copy;
    }
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND, "no migration '%.64s' here", id);
    return NULL;
}

typedef struct {
    HotmigdApiSnapshotDone done;
    gpointer data;
} SnapshotCall;

static void service_snapshot_done(JsonNode *result, GError *error, gpointer data)
{
    SnapshotCall *c = data;
    g_autoptr(JsonNode) node = result;

    c->done(node ? json_to_string(node, TRUE) : NULL, error, c->data);
    g_free(c);
}

static void service_snapshot(gpointer data, HotmigdApiSnapshotDone done, gpointer done_data)
{
    SnapshotCall *c = g_new0(SnapshotCall, 1);

    c->done = done;
    c->data = done_data;
    hotmigd_snapshot_async(data, service_snapshot_done, c);
}

/* ---- creating ------------------------------------------------------------------------------ */

static void config_host_free(HmConfigHost *host)
{
    g_free(host->name);
    g_free(host->uri);
    g_free(host->hotmigd);
    g_free(host);
}

/* The [host NAME] groups with their hotmigd URLs: the group's, else https://SERVER:PORT with
 * SERVER from its libvirt URI and PORT [migrate] hotmigd-port. */
static GPtrArray *daemon_hosts(const HmConfig *config)
{
    GPtrArray *groups = hm_config_get_hosts(config);
    GPtrArray *hosts = g_ptr_array_new_with_free_func((GDestroyNotify)config_host_free);

    for (guint i = 0; i < groups->len; i++) {
        const HmConfigHost *g = g_ptr_array_index(groups, i);
        HmConfigHost *h = g_new0(HmConfigHost, 1);

        h->name = g_strdup(g->name);
        h->uri = g_strdup(g->uri);
        h->line = g->line;
        h->hotmigd = hm_config_host_hotmigd_url(config, g);
        g_ptr_array_add(hosts, h);
    }
    return hosts;
}

static void options_free(OrchOptions *o)
{
    orch_options_clear(o);
    g_free(o);
}

/* [scheduler]: the limits the schedules share, min-stay, the bandwidth plans assume. */
static void daemon_scheduler_settings(Hotmigd *daemon, const HmConfig *config)
{
    daemon->limits.per_host_out = hm_config_get_uint(config, HM_CONFIG_SCHEDULER_PER_HOST_OUT);
    daemon->limits.per_host_in = hm_config_get_uint(config, HM_CONFIG_SCHEDULER_PER_HOST_IN);
    daemon->limits.total = hm_config_get_uint(config, HM_CONFIG_SCHEDULER_TOTAL);
    daemon->min_stay_s = hm_config_get_uint(config, HM_CONFIG_SCHEDULER_MIN_STAY);
    daemon->bandwidth = (double)hm_config_get_uint(config, HM_CONFIG_SCHEDULER_BANDWIDTH);
    daemon->host_value = (guint)hm_config_get_uint(config, HM_CONFIG_SCHEDULER_HOST_VALUE);
    daemon->cpu_allocation =
        (guint)hm_config_get_uint(config, HM_CONFIG_SCHEDULER_CPU_ALLOCATION);
}

/* What migrations run here start from: [migrate] and [hotmigd] state-dir of @c, into @o. */
static void daemon_migrate_options(Hotmigd *daemon, const HmConfig *c, OrchOptions *o)
{
    orch_options_init(o);
    orch_options_take_config(o, c); /* [hotmigd] state-dir included */
    o->connector = daemon->opts.connector;
}

static gboolean daemon_open_pool(Hotmigd *daemon, GError **error)
{
    const HmConfig *config = daemon->config;
    const char *run_dir = hm_config_get_string(config, HM_CONFIG_HOTMIGD_RUN_DIR);
    g_autofree char *lease_dir = g_build_filename(run_dir, "leases", NULL);
    g_auto(GStrv) pfs = hm_config_get_list(config, HM_CONFIG_POOL_PFS);
    g_auto(GStrv) vfs = hm_config_get_list(config, HM_CONFIG_POOL_VFS);
    g_auto(GStrv) standins = hm_config_get_list(config, HM_CONFIG_POOL_STANDINS);
    HotmigdPoolConfig pool_config = {
        .host_name = g_get_host_name(),
        .lease_dir = lease_dir,
        .lease_ttl_s = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_LEASE_TTL),
        .lease_ttl_max_s = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_LEASE_TTL_MAX),
        .pfs = (const char *const *)pfs,
        .vfs = (const char *const *)vfs,
        .standins = (const char *const *)standins,
    };
    gpointer host;

    if (g_mkdir_with_parents(run_dir, 0755) < 0) {
        int errsv = errno;

        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "Cannot create the run directory '%s': %s", run_dir, g_strerror(errsv));
        return FALSE;
    }
    host = hotmigd_host_new(hm_config_get_string(config, HM_CONFIG_HOTMIGD_SYSFS_ROOT),
                            hm_config_get_string(config, HM_CONFIG_HOTMIGD_CONNECT),
                            HOTMIGD_VFIO_TIMEOUT_MS, HOTMIGD_LIBVIRT_TIMEOUT_MS);
    hotmigd_host_set_standin_guids(host,
                                   hm_config_get_string(config, HM_CONFIG_POOL_STANDIN_GUIDS));
    daemon->pool = hotmigd_pool_new(&pool_config, &hotmigd_host_ops, host, error);
    if (!daemon->pool)
        return FALSE;
    g_message("Pool of %s: %u PFs, %u VFs, %u stand-ins; leases in '%s'",
              hotmigd_pool_host_name(daemon->pool), g_strv_length(pfs), g_strv_length(vfs),
              g_strv_length(standins), lease_dir);
    return TRUE;
}

static gboolean daemon_listen_https(Hotmigd *daemon, GError **error)
{
    const HmConfig *config = daemon->config;
    /* "*": every address; empty: this host's own URL's address, else loopback (never every
     * address by default: issue 15). */
    g_autofree char *listen = hm_config_listen_address(config);
    HotmigdServerConfig server_config = {
        .listen = listen,
        .max_connections = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_MAX_CONNECTIONS),
        .handshake_timeout_s = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_HANDSHAKE_TIMEOUT),
        .idle_timeout_s = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_IDLE_TIMEOUT),
        .port = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_PORT),
        .cert = hm_config_get_string(config, HM_CONFIG_HOTMIGD_SERVER_CERT),
        .key = hm_config_get_string(config, HM_CONFIG_HOTMIGD_SERVER_KEY),
        .ca = hm_config_get_string(config, HM_CONFIG_HOTMIGD_CA_CERT),
    };
    g_autoptr(GError) local = NULL;

    daemon->authz = hotmigd_authz_new(config);
    daemon->file_roots = hm_config_get_list(config, HM_CONFIG_HOTMIGD_FILE_ROOTS);
    server_config.authz = daemon->authz;
    server_config.file_roots = (const char *const *)daemon->file_roots;
    daemon->server = hotmigd_server_new(&server_config, daemon->pool, &local);
    if (!daemon->server) {
        /* Certificates that do not load are not a bad configuration file (exit 1, not 4). */
        local->code = ORCH_ERROR_FAILED;
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    hotmigd_server_set_services(daemon->server, &daemon->services);
    return TRUE;
}

/* The local API's commands, bound to the daemon (hotmigd/local-api.h). */
static void local_plan(gpointer owner, const HotmigdPlanRequest *req, HotmigdDone done,
                       gpointer data)
{
    hotmigd_plan_async(owner, req, done, data);
}

static void local_run(gpointer owner, PolPlan *plan, const char *reason, HotmigdDone done,
                      gpointer data)
{
    hotmigd_run_async(owner, plan, reason, done, data);
}

static void local_drain(gpointer owner, const char *host, gint64 deadline, const char *reason,
                        HotmigdDone done, gpointer data)
{
    hotmigd_drain_async(owner, host, deadline, reason, done, data);
}

static void local_snapshot(gpointer owner, HotmigdDone done, gpointer data)
{
    hotmigd_snapshot_async(owner, done, data);
}

static JsonNode *local_status(gpointer owner, const char *id, GError **error)
{
    return hotmigd_status(owner, id, error);
}

static guint local_watch(gpointer owner, const char *id, HotmigdWatchFunc fn, gpointer data,
                         GError **error)
{
    return hotmigd_watch(owner, id, fn, data, error);
}

static const HotmigdLocalApiOps local_ops = {
    .plan = local_plan,
    .run = local_run,
    .drain = local_drain,
    .snapshot = local_snapshot,
    .status = local_status,
    .watch = local_watch,
};

static gboolean daemon_listen_local(Hotmigd *daemon, GError **error)
{
    const char *path = hm_config_get_string(daemon->config, HM_CONFIG_HOTMIGD_SOCKET);
    g_autofree char *dir = g_path_get_dirname(path);
    g_autoptr(GError) local = NULL;

    if (g_mkdir_with_parents(dir, 0755) < 0) {
        int errsv = errno;

        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "Cannot create the directory of the local socket '%s': %s", path,
                    g_strerror(errsv));
        return FALSE;
    }
    daemon->local = hotmigd_local_api_new(&local_ops, daemon, path, &local);
    if (!daemon->local) {
        local->code = ORCH_ERROR_FAILED;
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    return TRUE;
}

gboolean hotmigd_recovering(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, FALSE);
    return daemon->recovery != NULL;
}

Hotmigd *hotmigd_new(HmConfig *config, const HotmigdOptions *opts, GError **error)
{
    g_autoptr(Hotmigd) daemon = g_new0(Hotmigd, 1);
    const char *name;
    guint interval;

    g_return_val_if_fail(config != NULL, NULL);
    daemon->config = config;
    if (opts)
        daemon->opts = *opts;
    name = hm_config_get_string(config, HM_CONFIG_HOTMIGD_NAME);
    daemon->name = g_strdup(*name ? name : g_get_host_name());
    daemon->hosts = daemon_hosts(config);
    daemon->cancel = g_cancellable_new();
    daemon->inventory_waiters = g_ptr_array_new_with_free_func(g_free);
    daemon->inventory_next = g_ptr_array_new_with_free_func(g_free);
    daemon->held =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)held_free);
    daemon->moved = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    daemon->scheds = g_ptr_array_new_with_free_func((GDestroyNotify)sched_free);
    daemon->evacuations = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    daemon->remotes = g_ptr_array_new_with_free_func((GDestroyNotify)remote_free);
    if (!daemon->opts.cpu_sample_ms)
        daemon->opts.cpu_sample_ms = HOTMIGD_INVENTORY_CPU_SAMPLE_MS_DEFAULT;
    daemon_migrate_options(daemon, config, &daemon->migrate_opts);
    daemon->reloaded_opts = g_ptr_array_new_with_free_func((GDestroyNotify)options_free);
    daemon_scheduler_settings(daemon, config);
    daemon->share = pol_schedule_share_new();
    daemon->env = (HotmigdMoveEnv){
        .self = daemon->name,
        .hosts = daemon->hosts,
        .migrate_opts = &daemon->migrate_opts,
        .migrate = daemon->opts.migrate ? daemon->opts.migrate : orch_migrate,
        .poll_ms = daemon->opts.remote_poll_ms,
        .share = daemon->share,
    };
    daemon->services = (HotmigdApiServices){
        .data = daemon,
        .migration_start = service_migration_start,
        .migration_get = service_migration_get,
        .snapshot = service_snapshot,
    };
    if (daemon->hosts->len && !hotmigd_has_host(daemon, daemon->name))
        g_warning(
            "This host's name '%s' is not one of the [host NAME] groups: set [hotmigd] name; it runs no migration",
            daemon->name);
    if (!daemon->opts.no_pool && !daemon_open_pool(daemon, error))
        return NULL;
    if (!daemon->opts.no_https && !daemon_listen_https(daemon, error))
        return NULL;
    if (!daemon_listen_local(daemon, error))
        return NULL;
    interval = daemon->opts.inventory_interval_s ? daemon->opts.inventory_interval_s
                                                 : HOTMIGD_INVENTORY_INTERVAL_S;
    if (daemon->hosts->len && interval != G_MAXUINT) {
        daemon->inventory_interval_s = interval;
        daemon->inventory_timer = g_timeout_source_new_seconds(interval);
        g_source_set_callback(daemon->inventory_timer, inventory_tick, daemon, NULL);
        g_source_attach(daemon->inventory_timer, g_main_context_get_thread_default());
        inventory_refresh(daemon, inventory_background_done, NULL);
    }
    daemon->recovery =
        hotmigd_recovery_start(&daemon->migrate_opts, daemon->opts.recover, &daemon->recovery);
    return g_steal_pointer(&daemon);
}

guint hotmigd_reload(Hotmigd *daemon, HmConfig *config)
{
    g_autoptr(HmConfig) fresh = config;
    OrchOptions *opts;
    guint pending = 0;

    g_return_val_if_fail(daemon != NULL && config != NULL, 0);

    /* What applies now: [migrate] for the migrations that start from now on (a running one
     * keeps its copy), [scheduler] for the schedules' next moves. */
    opts = g_new0(OrchOptions, 1);
    daemon_migrate_options(daemon, fresh, opts);
    /* The journals stay where recovery looks for them: state-dir waits for a restart. */
    g_free(opts->state_dir);
    opts->state_dir = g_strdup(hm_config_get_string(daemon->config, HM_CONFIG_HOTMIGD_STATE_DIR));
    g_ptr_array_add(daemon->reloaded_opts, opts);
    daemon->env.migrate_opts = opts;
    daemon_scheduler_settings(daemon, fresh);
    /* The rest is read once, at the start: name what changed and stays as it was. */
    for (int k = 0; k < HM_CONFIG_KEY_LAST; k++) {
        const char *group = hm_config_key_group(k);

        if (g_str_equal(group, "migrate") || g_str_equal(group, "scheduler") ||
            k == HM_CONFIG_ALERTS_TOKEN_FILE || hm_config_key_equal(daemon->config, fresh, k))
            continue;
        g_warning("Reload: [%s] %s changed; it takes effect when hotmigd restarts (a restart "
                  "ends the migrations it runs)",
                  group, hm_config_key_name(k));
        pending++;
    }
    if (!hm_config_hosts_equal(daemon->config, fresh)) {
        g_warning("Reload: the [host NAME] groups changed; they take effect when hotmigd restarts "
                  "(a restart ends the migrations it runs)");
        pending++;
    }
    g_message("Reloaded '%s': [migrate] and [scheduler] apply from now on%s",
              hm_config_get_path(fresh) ? hm_config_get_path(fresh) : "the defaults",
              pending ? "; other changes wait for a restart (see above)" : "");
    return pending;
}

void hotmigd_free(Hotmigd *daemon)
{
    GMainContext *ctx = g_main_context_get_thread_default();

    if (!daemon)
        return;
    daemon->evacuation_done = NULL; /* stopping is not the end of an evacuation */
    if (daemon->recovery) /* left to run; what it does not finish, the next start does */
        hotmigd_recovery_forget(daemon->recovery);
    g_cancellable_cancel(daemon->cancel);
    if (daemon->inventory_timer) {
        g_source_destroy(daemon->inventory_timer);
        g_source_unref(daemon->inventory_timer);
    }
    if (daemon->inventory_retry) {
        g_source_destroy(daemon->inventory_retry);
        g_clear_pointer(&daemon->inventory_retry, g_source_unref);
    }
    /* The inventory running ends soon (cancelled); the servers still answer meanwhile. Those
     * waiting for it hear it was cancelled. */
    while (daemon->inventory_running)
        g_main_context_iteration(ctx, TRUE);
    if (daemon->inventory_waiters) {
        g_autoptr(GPtrArray) waiters = g_steal_pointer(&daemon->inventory_waiters);
        g_autoptr(GError) stopped =
            g_error_new(ORCH_ERROR, ORCH_ERROR_CANCELLED, "hotmigd is stopping");

        daemon->inventory_waiters = g_ptr_array_new_with_free_func(g_free);
        for (guint i = 0; i < waiters->len; i++) {
            InvWaiter *w = g_ptr_array_index(waiters, i);

            w->fn(daemon, stopped, w->data);
        }
    }
    /* Those following a schedule hear it is over for them. */
    for (guint i = 0; daemon->scheds && i < daemon->scheds->len; i++) {
        Sched *s = g_ptr_array_index(daemon->scheds, i);

        while (s->watchers->len) {
            Watcher *w = g_ptr_array_steal_index(s->watchers, 0);

            w->fn(NULL, w->data);
            g_free(w);
        }
    }
    /* The moves running here are cancelled and undone; remote ones are no longer followed. */
    if (daemon->scheds)
        g_ptr_array_set_size(daemon->scheds, 0);
    if (daemon->remotes)
        g_ptr_array_set_size(daemon->remotes, 0);
    g_clear_pointer(&daemon->local, hotmigd_local_api_free);
    g_clear_pointer(&daemon->server, hotmigd_server_free);
    g_clear_pointer(&daemon->authz, hotmigd_authz_free);
    g_clear_pointer(&daemon->file_roots, g_strfreev);
    g_clear_pointer(&daemon->pool, hotmigd_pool_free);
    hotmigd_inventory_free(daemon->inventory);
    g_clear_pointer(&daemon->inventory_waiters, g_ptr_array_unref);
    g_clear_pointer(&daemon->inventory_next, g_ptr_array_unref);
    g_clear_pointer(&daemon->held, g_hash_table_unref);
    g_clear_pointer(&daemon->moved, g_hash_table_unref);
    g_clear_pointer(&daemon->evacuations, g_hash_table_unref);
    g_clear_pointer(&daemon->scheds, g_ptr_array_unref);
    g_clear_pointer(&daemon->remotes, g_ptr_array_unref);
    g_clear_pointer(&daemon->share, pol_schedule_share_free); /* after the schedules */
    g_clear_pointer(&daemon->hosts, g_ptr_array_unref);
    g_clear_object(&daemon->cancel);
    orch_options_clear(&daemon->migrate_opts);
    g_clear_pointer(&daemon->reloaded_opts, g_ptr_array_unref);
    g_clear_pointer(&daemon->config, hm_config_free);
    g_free(daemon->name);
    g_free(daemon);
}
