/* The schedules the daemon runs (daemon-state-priv.h): a plan run, or the drain (evacuation) of a host
 * in rounds, each move driven from its source host (run.c). A drain plans a round on the latest
 * inventory, and when it has run looks again: VMs that appeared meanwhile get another round.
 * Here too: the watchers following a schedule, its JSON for `status`, and what the schedules
 * under way bring to the view plans are made on (plan-view.c); each move's end is counted in
 * the figures for /metrics (stats.c). */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/schedules.h"

#include <math.h>
#include <string.h>

#include "engine/json.h"
#include "hotmigd/daemon-state-priv.h"
#include "hotmigd/inventory-refresh.h"
#include "hotmigd/plan-view.h"
#include "hotmigd/stats.h"

/* Finished schedules kept for `status`. */
#define HOTMIGD_KEEP_FINISHED 32

typedef struct {
    guint id;
    HotmigdWatchFunc fn;
    gpointer data;
} Watcher;

/* A schedule: a plan run, or the drain (evacuation) of a host in rounds. */
struct HotmigdSchedule {
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

/* ---- the view plans are made on ------------------------------------------------------------ */

/* What the schedules under way bring to each host (HotmigdInvArrival, owned; strings borrowed
 * from the schedules): no new plan takes that room. */
static GArray *sched_arrivals(Hotmigd *daemon)
{
    GArray *arriving = g_array_new(FALSE, FALSE, sizeof(HotmigdInvArrival));

    for (guint i = 0; i < daemon->scheds->len; i++) {
        const HotmigdSchedule *s = g_ptr_array_index(daemon->scheds, i);

        for (guint k = 0; !s->ended && k < s->rounds->len; k++) {
            const GPtrArray *moves = hotmigd_run_get_moves(g_ptr_array_index(s->rounds, k));

            for (guint j = 0; j < moves->len; j++) {
                const PolScheduleMove *pm =
                    ((const HotmigdRunMove *)g_ptr_array_index(moves, j))->move;
                HotmigdInvArrival a = {.vm = pm->vm, .host = pm->to};

                if (pm->state == POL_MOVE_PENDING || pm->state == POL_MOVE_RUNNING)
                    g_array_append_val(arriving, a);
            }
        }
    }
    return arriving;
}

void hotmigd_schedules_view_init(Hotmigd *daemon, HotmigdPlanView *v)
{
    hotmigd_plan_view_init(daemon, sched_arrivals(daemon), v);
}

PolCluster *hotmigd_schedules_cluster(Hotmigd *daemon, GError **error)
{
    g_auto(HotmigdPlanView) view = {0};

    hotmigd_schedules_view_init(daemon, &view);
    return hotmigd_inventory_to_cluster(daemon->inventory, &view.view, error);
}

/* ---- as JSON --------------------------------------------------------------------------------- */

static void member_report(JsonBuilder *b, const char *report)
{
    g_autoptr(JsonNode) node = report ? json_from_string(report, NULL) : NULL;

    json_builder_set_member_name(b, "report");
    if (node && JSON_NODE_HOLDS_OBJECT(node))
        json_builder_add_value(b, g_steal_pointer(&node));
    else
        json_builder_add_null_value(b);
}

static void move_json(JsonBuilder *b, const HotmigdSchedule *s, const HotmigdRunMove *m,
                      gboolean report)
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

static void sched_progress(const HotmigdSchedule *s, PolScheduleProgress *p)
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

static void sched_json(JsonBuilder *b, const HotmigdSchedule *s, gboolean reports)
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

static JsonNode *sched_node(const HotmigdSchedule *s, gboolean reports)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    sched_json(b, s, reports);
    return json_builder_get_root(b);
}

/* ---- running --------------------------------------------------------------------------------- */

static void sched_free(HotmigdSchedule *s)
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
        finished += ((HotmigdSchedule *)g_ptr_array_index(daemon->scheds, i))->ended != 0;
    for (guint i = 0; i < daemon->scheds->len && finished > HOTMIGD_KEEP_FINISHED;) {
        HotmigdSchedule *s = g_ptr_array_index(daemon->scheds, i);

        if (s->ended && !s->waiting && !s->watchers->len) {
            g_ptr_array_remove_index(daemon->scheds, i);
            finished--;
        } else {
            i++;
        }
    }
}

static HotmigdSchedule *sched_new(Hotmigd *daemon, const char *kind, const char *policy,
                                  const char *host, const char *reason, gint64 deadline)
{
    HotmigdSchedule *s = g_new0(HotmigdSchedule, 1);

    s->daemon = daemon;
    s->id = hotmigd_new_id(kind);
    s->kind = g_strdup(kind);
    s->policy = g_strdup(policy);
    s->host = g_strdup(host);
    s->reason = g_strdup(reason ? reason : kind);
    s->deadline = deadline;
    s->created = hotmigd_now_s();
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

static HotmigdSchedule *sched_find(Hotmigd *daemon, const char *id)
{
    for (guint i = 0; id && i < daemon->scheds->len; i++) {
        HotmigdSchedule *s = g_ptr_array_index(daemon->scheds, i);

        if (g_str_equal(s->id, id))
            return s;
    }
    return NULL;
}

static void sched_tell(HotmigdSchedule *s, JsonNode *event)
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

static void sched_end(HotmigdSchedule *s, gboolean ok, const char *error)
{
    Hotmigd *daemon = s->daemon;
    PolScheduleProgress p;

    s->ended = hotmigd_now_s();
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
static gboolean sched_start_round(HotmigdSchedule *s, const PolCluster *cluster,
                                  const GPtrArray *migrations, GError **error)
{
    Hotmigd *daemon = s->daemon;
    PolOptions opts;
    HotmigdRun *run;

    hotmigd_plan_view_options(daemon, &opts);
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

/* ---- drains and evacuations ------------------------------------------------------------------ */

/* The VMs on @host in the inventory that @s has not had in a round yet. */
static guint evac_left(HotmigdSchedule *s, const HotmigdInventory *inv, guint *ret_all)
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
static gboolean evac_plan_round(HotmigdSchedule *s, gboolean start, gboolean *ret_started,
                                GError **error)
{
    Hotmigd *daemon = s->daemon;
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
    cluster = hotmigd_schedules_cluster(daemon, error);
    if (!cluster)
        return FALSE;
    hotmigd_plan_view_options(daemon, &opts);
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
        evac = pol_evacuation_order(cluster, drain, &eo, hotmigd_now_s(), s->deadline, &local);
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
    HotmigdSchedule *s = data;
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
static void evac_sooner(HotmigdSchedule *s, gint64 deadline)
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

/* What a drain asked for answers: @s's id and the VMs predicted late (copies). */
static void evac_answer(const HotmigdSchedule *s, gboolean merged, char **ret_id,
                        gboolean *ret_merged, char ***ret_late)
{
    g_autoptr(GPtrArray) late = g_ptr_array_new_with_free_func(g_free);

    for (guint i = 0; i < s->late->len; i++)
        g_ptr_array_add(late, g_strdup(g_ptr_array_index(s->late, i)));
    g_ptr_array_add(late, NULL);
    *ret_id = g_strdup(s->id);
    *ret_merged = merged;
    *ret_late = (char **)g_ptr_array_steal(late, NULL);
}

gboolean hotmigd_schedules_evacuate(Hotmigd *daemon, const char *host, gint64 deadline,
                                    const char *reason, gboolean fresh, char **ret_id,
                                    gboolean *ret_merged, char ***ret_late, GError **error)
{
    HotmigdSchedule *s = g_hash_table_lookup(daemon->evacuations, host ? host : "");
    gboolean started = FALSE;

    if (!hotmigd_run_move_env_check_host(&daemon->env, host, error))
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
        evac_answer(s, TRUE, ret_id, ret_merged, ret_late);
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
            hotmigd_inventory_refresh(daemon, evac_go_on, s);
    }
    evac_answer(s, FALSE, ret_id, ret_merged, ret_late);
    return TRUE;
}

gboolean hotmigd_evacuate(Hotmigd *daemon, const char *host, gint64 deadline, const char *reason,
                          char **ret_id, gboolean *ret_merged, char ***ret_late, GError **error)
{
    g_return_val_if_fail(daemon && ret_id && ret_merged && ret_late, FALSE);
    return hotmigd_schedules_evacuate(daemon, host, deadline, reason, FALSE, ret_id, ret_merged,
                                      ret_late, error);
}

const char *hotmigd_schedules_evacuation_reason(Hotmigd *daemon, const char *host)
{
    const HotmigdSchedule *s = g_hash_table_lookup(daemon->evacuations, host);

    return s ? s->reason : NULL;
}

/* ---- the rounds' events ---------------------------------------------------------------------- */

static void plan_run_done(Hotmigd *daemon, const GError *error, gpointer data)
{
    HotmigdSchedule *s = data;
    PolScheduleProgress p;

    s->waiting--;
    sched_progress(s, &p);
    if (!s->ended)
        sched_end(s, p.done == p.total, NULL);
}

static void on_round_event(HotmigdRun *run, HotmigdRunEvent event, const HotmigdRunMove *move,
                           gpointer data)
{
    HotmigdSchedule *s = data;
    Hotmigd *daemon = s->daemon;
    g_autoptr(JsonBuilder) b = NULL;
    g_autoptr(JsonNode) node = NULL;

    if (event == HOTMIGD_RUN_EVENT_FINISHED) {
        /* Look again: a drain's next round, or the end. */
        s->waiting++;
        hotmigd_inventory_refresh(daemon, s->host ? evac_go_on : plan_run_done, s);
        return;
    }
    if (event == HOTMIGD_RUN_EVENT_STARTED) {
        g_message("Schedule %s: %s %s -> %s started (%s)", s->id, move->move->vm, move->move->from,
                  move->move->to,
                  g_strcmp0(move->driven_by, "here") == 0 ? "here" : "at the source's hotmigd");
    } else {
        if (move->move->state == POL_MOVE_DONE)
            hotmigd_plan_view_note_moved(daemon, move->move->vm);
        hotmigd_stats_add_move(&daemon->stats, move->move->state, move->report);
        g_message("Schedule %s: %s %s -> %s %s%s%s", s->id, move->move->vm, move->move->from,
                  move->move->to, pol_move_state_to_string(move->move->state),
                  move->move->detail ? ": " : "", move->move->detail ? move->move->detail : "");
        /* Its place under the shared limits is free: the other schedules may start a move. */
        for (guint i = 0; i < daemon->scheds->len; i++) {
            HotmigdSchedule *other = g_ptr_array_index(daemon->scheds, i);

            if (other != s && !other->ended && other->rounds->len)
                hotmigd_run_poke(g_ptr_array_index(other->rounds, other->rounds->len - 1));
        }
    }
    b = json_builder_new();
    move_json(b, s, move, FALSE);
    node = json_builder_get_root(b);
    sched_tell(s, node);
}

/* ---- following a schedule, and what the daemon's other files ask -------------------------- */

static gboolean watch_ended(gpointer data)
{
    Watcher *w = data;

    w->fn(NULL, w->data);
    return G_SOURCE_REMOVE;
}

guint hotmigd_watch(Hotmigd *daemon, const char *id, HotmigdWatchFunc fn, gpointer data,
                    GError **error)
{
    HotmigdSchedule *s = sched_find(daemon, id);
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
        HotmigdSchedule *s = g_ptr_array_index(daemon->scheds, i);

        for (guint k = 0; k < s->watchers->len; k++) {
            if (((Watcher *)g_ptr_array_index(s->watchers, k))->id == watch) {
                g_ptr_array_remove_index(s->watchers, k);
                return;
            }
        }
    }
}

void hotmigd_schedules_init(Hotmigd *daemon)
{
    daemon->scheds = g_ptr_array_new_with_free_func((GDestroyNotify)sched_free);
    daemon->evacuations = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
}

char *hotmigd_schedules_run_plan(Hotmigd *daemon, const PolPlan *plan, const char *reason,
                                 GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(PolCluster) cluster = NULL;
    HotmigdSchedule *s;

    if (daemon->plan_run) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_CONFLICT,
                    "plan run %s is running: one plan at a time", daemon->plan_run->id);
        return NULL;
    }
    if (!(cluster = hotmigd_schedules_cluster(daemon, error)))
        return NULL;
    s = sched_new(daemon, "plan", pol_policy_to_string(plan->policy), NULL, reason, 0);
    if (!sched_start_round(s, cluster, plan->migrations, &local)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "the plan does not fit the cluster as it is now: %s", local->message);
        g_ptr_array_remove(daemon->scheds, s);
        return NULL;
    }
    daemon->plan_run = s;
    g_message("Schedule %s: %s plan of %u moves (%s)", s->id, s->policy, plan->migrations->len,
              s->reason);
    return g_strdup(s->id);
}

gboolean hotmigd_schedules_moving(Hotmigd *daemon, const char *domain)
{
    for (guint i = 0; i < daemon->scheds->len; i++) {
        HotmigdSchedule *s = g_ptr_array_index(daemon->scheds, i);

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

JsonNode *hotmigd_schedules_get_json(Hotmigd *daemon, const char *id, GError **error)
{
    HotmigdSchedule *s = sched_find(daemon, id);

    if (!s) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND,
                    "no schedule '%.64s' (it may have been forgotten: the last %d are kept)", id,
                    HOTMIGD_KEEP_FINISHED);
        return NULL;
    }
    return sched_node(s, TRUE);
}

void hotmigd_schedules_add_json(Hotmigd *daemon, JsonBuilder *b)
{
    for (guint i = 0; i < daemon->scheds->len; i++)
        sched_json(b, g_ptr_array_index(daemon->scheds, i), FALSE);
}

void hotmigd_schedules_stop(Hotmigd *daemon)
{
    /* Those following a schedule hear it is over for them. */
    for (guint i = 0; daemon->scheds && i < daemon->scheds->len; i++) {
        HotmigdSchedule *s = g_ptr_array_index(daemon->scheds, i);

        while (s->watchers->len) {
            Watcher *w = g_ptr_array_steal_index(s->watchers, 0);

            w->fn(NULL, w->data);
            g_free(w);
        }
    }
    /* The moves running here are cancelled and undone; remote ones are no longer followed. */
    if (daemon->scheds)
        g_ptr_array_set_size(daemon->scheds, 0);
}
