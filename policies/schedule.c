/* hm-policies: the scheduler's core. Which moves of a plan may start now under the limits and
 * without overcommitting any host, one move of an MPI job at a time, what a failure makes
 * impossible, and the report of every move (docs/policies.md, "Running a plan"). Pure: the
 * caller starts the migrations and says when they end; time is a parameter. */
#include "policies/policies-priv.h"

#include <stdlib.h>
#include <string.h>

HM_ENUM_IMPL(pol_move_state, PolMoveState, POL_MOVE_STATE_LAST, "pending", "running", "done",
             "failed", "skipped")

typedef struct {
    PolScheduleMove pub; /* first: a Move * is a PolScheduleMove * */
    guint from;
    guint to;
    gint prev;   /* the same VM's previous move in the order, or -1 */
    gint next;   /* ... and its next one, or -1 */
    gint job;    /* index into PolSchedule.jobs, or -1: its VM is in no job */
    gint64 *dem; /* dims: what the VM uses */
} Move;

struct PolSchedule {
    guint dims;
    guint n_hosts;
    PolScheduleLimits limits;
    gint64 *cap;         /* n_hosts * dims */
    gint64 *used;        /* n_hosts * dims: the VMs on the host and those arriving */
    guint *out_running;  /* n_hosts */
    guint *in_running;   /* n_hosts */
    GArray **arrivals;   /* n_hosts: indices of the moves into the host, in order */
    GArray **departures; /* n_hosts: ... out of it */
    gint *first_lost;    /* n_hosts: the first failed or skipped move out of the host, or -1 */
    guint8 *blocked;     /* n_hosts: scratch for pol_schedule_next() */
    gint64 *held;        /* n_hosts * dims: scratch, the room of moves held for their job */
    GPtrArray *jobs;     /* char *: the job ids of the moves' VMs (borrowed from the moves) */
    guint *job_running;  /* jobs->len: running moves of each job */
    GPtrArray *moves;    /* Move (owned), in the schedule's order */
    PolScheduleShare *share; /* borrowed, or NULL */
    gboolean jobs_side_by_side;
    guint first_pending; /* every move before it has started */
    PolScheduleProgress progress;
};

static void move_free(Move *m)
{
    if (!m)
        return;
    g_free(m->pub.job);
    g_free(m->pub.vm);
    g_free(m->pub.from);
    g_free(m->pub.to);
    g_free(m->pub.detail);
    g_free(m->dem);
    g_free(m);
}

struct PolScheduleShare {
    GHashTable *out, *in; /* host name (owned) -> GUINT_TO_POINTER(running) */
    GHashTable *jobs;     /* job id (owned) -> GUINT_TO_POINTER(running) */
    guint total;
};

PolScheduleShare *pol_schedule_share_new(void)
{
    PolScheduleShare *share = g_new0(PolScheduleShare, 1);

    share->out = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    share->in = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    share->jobs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    return share;
}

void pol_schedule_share_free(PolScheduleShare *share)
{
    if (!share)
        return;
    g_hash_table_unref(share->out);
    g_hash_table_unref(share->in);
    g_hash_table_unref(share->jobs);
    g_free(share);
}

static guint share_get(GHashTable *table, const char *host)
{
    return GPOINTER_TO_UINT(g_hash_table_lookup(table, host));
}

static void share_count(GHashTable *table, const char *host, int delta)
{
    guint n = share_get(table, host) + delta;

    if (n)
        g_hash_table_insert(table, g_strdup(host), GUINT_TO_POINTER(n));
    else
        g_hash_table_remove(table, host);
}

/* Counts move @m's start (+1) or end (-1) in @s's share, if any. */
static void share_move(PolSchedule *s, const PolScheduleMove *m, int delta)
{
    if (!s->share)
        return;
    share_count(s->share->out, m->from, delta);
    share_count(s->share->in, m->to, delta);
    if (m->job)
        share_count(s->share->jobs, m->job, delta);
    s->share->total += delta;
}

guint pol_schedule_share_running(const PolScheduleShare *share, const char *host,
                                 gboolean leaving)
{
    g_return_val_if_fail(share != NULL, 0);
    if (!host)
        return share->total;
    return share_get(leaving ? share->out : share->in, host);
}

void pol_schedule_set_share(PolSchedule *s, PolScheduleShare *share)
{
    g_return_if_fail(s != NULL && s->progress.running == 0 && !s->share);
    s->share = share;
}

void pol_schedule_set_jobs_side_by_side(PolSchedule *s, gboolean side_by_side)
{
    g_return_if_fail(s != NULL && s->progress.running == 0);
    s->jobs_side_by_side = side_by_side;
}

void pol_schedule_free(PolSchedule *s)
{
    if (!s)
        return;
    /* Given up with moves running: they no longer count. */
    for (guint i = 0; s->share && i < s->moves->len; i++) {
        const Move *m = g_ptr_array_index(s->moves, i);

        if (m->pub.state == POL_MOVE_RUNNING)
            share_move(s, &m->pub, -1);
    }
    for (guint h = 0; h < s->n_hosts; h++) {
        g_array_unref(s->arrivals[h]);
        g_array_unref(s->departures[h]);
    }
    g_free(s->arrivals);
    g_free(s->departures);
    g_free(s->cap);
    g_free(s->used);
    g_free(s->out_running);
    g_free(s->in_running);
    g_free(s->first_lost);
    g_free(s->blocked);
    g_free(s->held);
    g_free(s->job_running);
    if (s->jobs)
        g_ptr_array_unref(s->jobs);
    g_ptr_array_unref(s->moves);
    g_free(s);
}

static Move *move_at(const PolSchedule *s, gint i)
{
    return g_ptr_array_index(s->moves, (guint)i);
}

typedef struct {
    const PolMigration *m;
    guint index;
} Ranked;

/* Higher priority first, equal priorities in the given order. */
static int ranked_cmp(const void *pa, const void *pb)
{
    const Ranked *a = pa, *b = pb;

    if (a->m->priority != b->m->priority)
        return a->m->priority > b->m->priority ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

static gint index_of(GHashTable *table, const char *name)
{
    return GPOINTER_TO_INT(g_hash_table_lookup(table, name)) - 1;
}

/* A schedule without moves for @p's hosts, with their room as the cluster's VMs leave it. */
static PolSchedule *schedule_alloc(const PolProblem *p, const PolScheduleLimits *limits)
{
    const guint D = p->dims;
    PolSchedule *s = g_new0(PolSchedule, 1);

    s->dims = D;
    s->n_hosts = p->n_hosts;
    if (limits)
        s->limits = *limits;
    s->cap = g_new0(gint64, (gsize)p->n_hosts * D + 1);
    memcpy(s->cap, p->cap, sizeof(gint64) * p->n_hosts * D);
    s->used = g_new0(gint64, (gsize)p->n_hosts * D + 1);
    s->held = g_new0(gint64, (gsize)p->n_hosts * D + 1);
    s->out_running = g_new0(guint, p->n_hosts + 1);
    s->in_running = g_new0(guint, p->n_hosts + 1);
    s->arrivals = g_new0(GArray *, p->n_hosts + 1);
    s->departures = g_new0(GArray *, p->n_hosts + 1);
    s->first_lost = g_new(gint, p->n_hosts + 1);
    s->blocked = g_new0(guint8, p->n_hosts + 1);
    for (guint h = 0; h < p->n_hosts; h++) {
        s->arrivals[h] = g_array_new(FALSE, FALSE, sizeof(guint));
        s->departures[h] = g_array_new(FALSE, FALSE, sizeof(guint));
        s->first_lost[h] = -1;
    }
    for (guint v = 0; v < p->n_vms; v++) {
        guint h = ((PolVm *)g_ptr_array_index(p->cluster->vms, v))->host;
        for (guint d = 0; d < D; d++)
            s->used[(gsize)h * D + d] += p->vm_dem[(gsize)v * D + d];
    }
    s->moves = g_ptr_array_new_with_free_func((GDestroyNotify)move_free);
    s->jobs = g_ptr_array_new();
    return s;
}

/* The index of job @job in s->jobs, added (borrowed: a move's copy) when new; -1 for none. */
static gint schedule_job(PolSchedule *s, GHashTable *index, const char *job)
{
    gpointer i;

    if (!job || !*job)
        return -1;
    if (!g_hash_table_lookup_extended(index, job, NULL, &i)) {
        i = GUINT_TO_POINTER(s->jobs->len);
        g_ptr_array_add(s->jobs, (gpointer)job);
        g_hash_table_insert(index, (gpointer)job, i);
    }
    return (gint)GPOINTER_TO_UINT(i);
}

/* Appends @pm, VM @v of @p, as move number s->moves->len; @last: each VM's last move so far. */
static void schedule_add_move(PolSchedule *s, const PolProblem *p, const PolMigration *pm, guint v,
                              gint *last, GHashTable *job_index)
{
    const PolVm *vm = g_ptr_array_index(p->cluster->vms, v);
    const guint i = s->moves->len;
    Move *m = g_new0(Move, 1);

    m->pub.index = i;
    m->pub.vm = g_strdup(pm->vm);
    m->pub.from = g_strdup(pm->from);
    m->pub.to = g_strdup(pm->to);
    m->pub.job = vm->job && *vm->job ? g_strdup(vm->job) : NULL;
    m->pub.duration_s = pm->duration_s;
    m->pub.priority = pm->priority;
    m->pub.extra = pm->extra;
    m->pub.state = POL_MOVE_PENDING;
    m->from = (guint)index_of(p->cluster->host_by_name, pm->from);
    m->to = (guint)index_of(p->cluster->host_by_name, pm->to);
    m->job = schedule_job(s, job_index, m->pub.job);
    m->dem = g_new(gint64, s->dims);
    memcpy(m->dem, p->vm_dem + (gsize)v * s->dims, sizeof(gint64) * s->dims);
    m->prev = last[v];
    m->next = -1;
    if (m->prev >= 0)
        move_at(s, m->prev)->next = (gint)i;
    last[v] = (gint)i;
    g_array_append_val(s->arrivals[m->to], i);
    g_array_append_val(s->departures[m->from], i);
    g_ptr_array_add(s->moves, m);
}

PolSchedule *pol_schedule_new(const PolCluster *cluster, const GPtrArray *migrations,
                              const PolScheduleLimits *limits, const PolOptions *opts,
                              GError **error)
{
    PolOptions defaults;
    g_autoptr(PolSchedule) s = NULL;
    g_autoptr(PolProblem) p = NULL;
    g_autoptr(GPtrArray) ordered = NULL;
    g_autoptr(GError) local = NULL;
    g_autoptr(GHashTable) job_index = g_hash_table_new(g_str_hash, g_str_equal);
    g_autofree Ranked *ranked = NULL;
    g_autofree gint *last = NULL;
    PolPlan replay = {0};
    guint n;

    g_return_val_if_fail(cluster != NULL && migrations != NULL, NULL);
    if (!opts) {
        pol_options_init(&defaults);
        opts = &defaults;
    }
    n = migrations->len;
    ranked = g_new(Ranked, n + 1);
    for (guint i = 0; i < n; i++)
        ranked[i] = (Ranked){g_ptr_array_index(migrations, i), i};
    qsort(ranked, n, sizeof(Ranked), ranked_cmp);
    ordered = g_ptr_array_sized_new(n);
    for (guint i = 0; i < n; i++)
        g_ptr_array_add(ordered, (gpointer)ranked[i].m);
    /* The order must be a plan that never overcommits when run one move after the other:
     * then running moves side by side cannot get stuck either (docs/policies.md). */
    replay.migrations = ordered;
    if (!pol_plan_verify(cluster, &replay, opts, &local)) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                    "cannot schedule the migrations in priority order: %s", local->message);
        return NULL;
    }

    p = pol_problem_new(cluster, opts);
    s = schedule_alloc(p, limits);
    last = g_new(gint, p->n_vms + 1);
    for (guint v = 0; v < p->n_vms; v++)
        last[v] = -1;
    for (guint i = 0; i < n; i++) /* every VM known: the replay checked */
        schedule_add_move(s, p, ranked[i].m, (guint)index_of(cluster->vm_by_name, ranked[i].m->vm),
                          last, job_index);
    s->job_running = g_new0(guint, s->jobs->len + 1);
    s->progress.total = s->progress.pending = n;
    return g_steal_pointer(&s);
}

/* ---- starting moves ---------------------------------------------------------------------- */

/* Room on @m's destination now, counting the room of the moves held for their job. */
static gboolean fits(const PolSchedule *s, const Move *m)
{
    const gint64 *used = s->used + (gsize)m->to * s->dims;
    const gint64 *held = s->held + (gsize)m->to * s->dims;
    const gint64 *cap = s->cap + (gsize)m->to * s->dims;

    for (guint d = 0; d < s->dims; d++) {
        if (m->dem[d] > 0 && used[d] + held[d] + m->dem[d] > cap[d])
            return FALSE;
    }
    return TRUE;
}

/* Another move of @m's job runs, here or in a schedule sharing the limits. */
static gboolean job_busy(const PolSchedule *s, const Move *m)
{
    if (m->job < 0 || s->jobs_side_by_side)
        return FALSE;
    if (s->share)
        return share_get(s->share->jobs, m->pub.job) > 0;
    return s->job_running[m->job] > 0;
}

static gboolean limits_allow(const PolSchedule *s, const Move *m)
{
    const PolScheduleLimits *l = &s->limits;

    if (s->share)
        return (l->total == 0 || s->share->total < l->total) &&
               (l->per_host_out == 0 || share_get(s->share->out, m->pub.from) < l->per_host_out) &&
               (l->per_host_in == 0 || share_get(s->share->in, m->pub.to) < l->per_host_in);
    return (l->total == 0 || s->progress.running < l->total) &&
           (l->per_host_out == 0 || s->out_running[m->from] < l->per_host_out) &&
           (l->per_host_in == 0 || s->in_running[m->to] < l->per_host_in);
}

/* Marks @m running from @now and counts it. */
static void start_move(PolSchedule *s, Move *m, gint64 now)
{
    m->pub.state = POL_MOVE_RUNNING;
    m->pub.started = now;
    for (guint d = 0; d < s->dims; d++)
        s->used[(gsize)m->to * s->dims + d] += m->dem[d];
    s->out_running[m->from]++;
    s->in_running[m->to]++;
    if (m->job >= 0)
        s->job_running[m->job]++;
    share_move(s, &m->pub, +1);
    s->progress.pending--;
    s->progress.running++;
}

/* Walks the pending moves in order and starts those that may start (@start), or only says
 * whether one could (!@start), limits and jobs left out: with nothing of its own running,
 * only the moves of the schedules it shares them with can hold it back, and those end. */
static guint scan(PolSchedule *s, gint64 now, gboolean start, GPtrArray *started)
{
    guint n = 0;

    while (s->first_pending < s->moves->len &&
           move_at(s, (gint)s->first_pending)->pub.state != POL_MOVE_PENDING)
        s->first_pending++;
    memset(s->blocked, 0, s->n_hosts);
    memset(s->held, 0, sizeof(gint64) * s->n_hosts * s->dims);
    for (guint i = s->first_pending; i < s->moves->len; i++) {
        Move *m = move_at(s, (gint)i);

        if (m->pub.state != POL_MOVE_PENDING)
            continue;
        /* Arrivals at a host start in order: a later one would take the room an earlier one
         * waits for. */
        if (s->blocked[m->to] ||
            (m->prev >= 0 && move_at(s, m->prev)->pub.state != POL_MOVE_DONE) ||
            (start && !limits_allow(s, m)) || !fits(s, m)) {
            s->blocked[m->to] = TRUE;
            continue;
        }
        if (!start)
            return 1;
        /* Its job has a move running: it waits, and its room stays claimed as if it ran, so
         * the later arrivals that start meanwhile cannot take it (docs/policies.md). */
        if (job_busy(s, m)) {
            for (guint d = 0; d < s->dims; d++)
                s->held[(gsize)m->to * s->dims + d] += m->dem[d];
            continue;
        }
        start_move(s, m, now);
        g_ptr_array_add(started, m);
        n++;
        if (s->limits.total &&
            (s->share ? s->share->total : s->progress.running) >= s->limits.total)
            break;
    }
    return n;
}

guint pol_schedule_next(PolSchedule *s, gint64 now, GPtrArray **ret_moves)
{
    g_autoptr(GPtrArray) started = g_ptr_array_new();
    guint n;

    g_return_val_if_fail(s != NULL, 0);
    n = scan(s, now, TRUE, started);
    if (ret_moves)
        *ret_moves = g_steal_pointer(&started);
    return n;
}

/* ---- ends, failures and what they make impossible ---------------------------------------- */

static void skip(PolSchedule *s, Move *m, char *reason, gint64 now, GPtrArray *skipped,
                 GQueue *hosts)
{
    m->pub.state = POL_MOVE_SKIPPED;
    m->pub.detail = reason;
    m->pub.finished = now;
    s->progress.pending--;
    s->progress.skipped++;
    g_ptr_array_add(skipped, m);
    if (s->first_lost[m->from] < 0)
        s->first_lost[m->from] = (gint)m->pub.index;
    /* The room it would have freed on its source is lost: re-check the moves into it. */
    g_queue_push_tail(hosts, GUINT_TO_POINTER(m->from));
}

/* The VM of @m will not be where its later moves start: skip them. */
static void skip_later_moves(PolSchedule *s, const Move *m, gint64 now, GPtrArray *skipped,
                             GQueue *hosts)
{
    for (gint j = m->next; j >= 0; j = move_at(s, j)->next) {
        Move *later = move_at(s, j);
        Move *cause = move_at(s, later->prev);
        if (later->pub.state != POL_MOVE_PENDING)
            break;
        skip(s, later,
             g_strdup_printf("VM '%s' will not be on '%s': its move from '%s' to '%s' %s",
                             later->pub.vm, later->pub.from, cause->pub.from, cause->pub.to,
                             cause->pub.state == POL_MOVE_FAILED ? "failed" : "was skipped"),
             now, skipped, hosts);
    }
}

static char *no_room_reason(const PolSchedule *s, const Move *m)
{
    const Move *cause = s->first_lost[m->to] >= 0 ? move_at(s, s->first_lost[m->to]) : NULL;

    if (!cause)
        return g_strdup_printf(
            "no room on '%s' for VM '%s': the moves that were to make room cannot run", m->pub.to,
            m->pub.vm);
    return g_strdup_printf("no room on '%s' for VM '%s': the move of VM '%s' from '%s' to '%s' %s",
                           m->pub.to, m->pub.vm, cause->pub.vm, cause->pub.from, cause->pub.to,
                           cause->pub.state == POL_MOVE_FAILED ? "failed" : "was skipped");
}

/* Skips the moves into the hosts of @hosts that cannot get room any more: even if every move
 * still pending or running out of the host succeeded, the host would not hold the VM. (Moves
 * that could still fit but will lose the room to earlier ones are caught when nothing runs.) */
static void recheck(PolSchedule *s, gint64 now, GPtrArray *skipped, GQueue *hosts)
{
    const guint D = s->dims;
    g_autofree gint64 *room = g_new(gint64, D);

    while (!g_queue_is_empty(hosts)) {
        guint h = GPOINTER_TO_UINT(g_queue_pop_head(hosts));
        GArray *out = s->departures[h], *in = s->arrivals[h];

        for (guint d = 0; d < D; d++)
            room[d] = s->cap[(gsize)h * D + d] - s->used[(gsize)h * D + d];
        for (guint i = 0; i < out->len; i++) {
            const Move *m = move_at(s, (gint)g_array_index(out, guint, i));
            if (m->pub.state != POL_MOVE_PENDING && m->pub.state != POL_MOVE_RUNNING)
                continue;
            for (guint d = 0; d < D; d++)
                room[d] += m->dem[d];
        }
        for (guint i = 0; i < in->len; i++) {
            Move *m = move_at(s, (gint)g_array_index(in, guint, i));
            gboolean ok = TRUE;
            if (m->pub.state != POL_MOVE_PENDING)
                continue;
            for (guint d = 0; d < D && ok; d++)
                ok = m->dem[d] == 0 || m->dem[d] <= room[d];
            if (ok)
                continue;
            skip(s, m, no_room_reason(s, m), now, skipped, hosts);
            skip_later_moves(s, m, now, skipped, hosts);
        }
    }
}

void pol_schedule_skip_pending(PolSchedule *s, const char *reason, gint64 now,
                               GPtrArray **ret_skipped)
{
    g_autoptr(GPtrArray) skipped = g_ptr_array_new();

    g_return_if_fail(s != NULL && reason != NULL);
    for (guint i = s->first_pending; i < s->moves->len; i++) {
        Move *m = move_at(s, (gint)i);

        if (m->pub.state != POL_MOVE_PENDING)
            continue;
        m->pub.state = POL_MOVE_SKIPPED;
        m->pub.detail = g_strdup(reason);
        m->pub.finished = now;
        s->progress.pending--;
        s->progress.skipped++;
        g_ptr_array_add(skipped, m);
    }
    if (ret_skipped)
        *ret_skipped = g_steal_pointer(&skipped);
}

void pol_schedule_done(PolSchedule *s, const PolScheduleMove *move, gboolean ok, const char *detail,
                       gint64 now, GPtrArray **ret_skipped)
{
    g_autoptr(GPtrArray) skipped = g_ptr_array_new();
    g_autoptr(GQueue) hosts = g_queue_new();
    Move *m;

    g_return_if_fail(s != NULL && move != NULL && move->index < s->moves->len);
    m = move_at(s, (gint)move->index);
    g_return_if_fail(&m->pub == move && m->pub.state == POL_MOVE_RUNNING);

    m->pub.finished = now;
    s->out_running[m->from]--;
    s->in_running[m->to]--;
    if (m->job >= 0)
        s->job_running[m->job]--;
    share_move(s, &m->pub, -1);
    s->progress.running--;
    if (ok) {
        m->pub.state = POL_MOVE_DONE;
        s->progress.done++;
        for (guint d = 0; d < s->dims; d++)
            s->used[(gsize)m->from * s->dims + d] -= m->dem[d];
    } else {
        /* The VM stays on its source: the room held for it on the destination is free. */
        m->pub.state = POL_MOVE_FAILED;
        m->pub.detail = g_strdup(detail && *detail ? detail : "failed");
        s->progress.failed++;
        for (guint d = 0; d < s->dims; d++)
            s->used[(gsize)m->to * s->dims + d] -= m->dem[d];
        if (s->first_lost[m->from] < 0)
            s->first_lost[m->from] = (gint)m->pub.index;
        g_queue_push_tail(hosts, GUINT_TO_POINTER(m->from));
        skip_later_moves(s, m, now, skipped, hosts);
        recheck(s, now, skipped, hosts);
    }
    /* Nothing runs and nothing can start: the first move left waits for room that no move
     * will make (the others can only follow it). Skip it and look again. */
    while (s->progress.running == 0 && s->progress.pending > 0 && scan(s, now, FALSE, NULL) == 0) {
        Move *first = move_at(s, (gint)s->first_pending);
        skip(s, first, no_room_reason(s, first), now, skipped, hosts);
        skip_later_moves(s, first, now, skipped, hosts);
        recheck(s, now, skipped, hosts);
    }
    if (ret_skipped)
        *ret_skipped = g_steal_pointer(&skipped);
}

gboolean pol_schedule_is_finished(const PolSchedule *s)
{
    g_return_val_if_fail(s != NULL, TRUE);
    return s->progress.pending == 0 && s->progress.running == 0;
}

void pol_schedule_get_progress(const PolSchedule *s, PolScheduleProgress *ret_progress)
{
    g_return_if_fail(s != NULL && ret_progress != NULL);
    *ret_progress = s->progress;
}

const GPtrArray *pol_schedule_get_moves(const PolSchedule *s)
{
    g_return_val_if_fail(s != NULL, NULL);
    return s->moves;
}
