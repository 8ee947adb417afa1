/* Running plans (hotmigd/run.h): moves driven from their source hosts, in threads of their
 * own, through the scheduler core. */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/run.h"

#include <string.h>

#include "engine/hotmigd-client.h"
#include "engine/journal.h"

const HmConfigHost *hotmigd_run_move_env_find_host(const HotmigdMoveEnv *env, const char *name)
{
    for (guint i = 0; env->hosts && name && i < env->hosts->len; i++) {
        const HmConfigHost *host = g_ptr_array_index(env->hosts, i);

        if (g_str_equal(host->name, name))
            return host;
    }
    return NULL;
}

gboolean hotmigd_run_move_env_check_host(const HotmigdMoveEnv *env, const char *name,
                                         GError **error)
{
    g_autoptr(GString) known = g_string_new(NULL);

    if (hotmigd_run_move_env_find_host(env, name))
        return TRUE;
    for (guint i = 0; env->hosts && i < env->hosts->len; i++)
        g_string_append_printf(known, "%s%s", i ? ", " : "",
                               ((HmConfigHost *)g_ptr_array_index(env->hosts, i))->name);
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND,
                "unknown host '%.64s' (the [host NAME] groups of the configuration: %s)",
                name ? name : "", known->len ? known->str : "none");
    return FALSE;
}

/* Waits @ms, or less when @cancellable is cancelled: FALSE then. */
gboolean hotmigd_run_wait_ms(guint ms, GCancellable *cancellable)
{
    g_autoptr(GCancellable) own = cancellable ? NULL : g_cancellable_new();
    GCancellable *c = cancellable ? cancellable : own;
    HmDeadline deadline = hm_deadline_in_ms(ms);
    GPollFD pfd;

    if (!g_cancellable_make_pollfd(c, &pfd))
        return FALSE; /* no file descriptor left: as if cancelled */
    while (!g_cancellable_is_cancelled(c) && g_get_monotonic_time() < deadline)
        g_poll(&pfd, 1, (gint)MAX(hm_deadline_remaining_ms(deadline), 1));
    g_cancellable_release_fd(c);
    return !g_cancellable_is_cancelled(c);
}

/* ---- one move ------------------------------------------------------------------------------ */

struct HotmigdMove {
    gint ref; /* the owner's and, until it is delivered, the thread's */
    const HotmigdMoveEnv *env;
    char *domain, *from, *to, *reason, *plan;
    GCancellable *cancel;
    GMainContext *ctx; /* where @done is called */
    GThread *thread;
    GMutex lock; /* remote_id, read by the owner while the thread runs */
    HotmigdMoveResult result;
    HotmigdMoveDone done;
    gpointer data;
    gboolean orphaned; /* the owner freed it: @done is not called */
};

static void move_unref(HotmigdMove *m)
{
    if (!g_atomic_int_dec_and_test(&m->ref))
        return;
    g_free(m->domain);
    g_free(m->from);
    g_free(m->to);
    g_free(m->reason);
    g_free(m->plan);
    g_clear_object(&m->cancel);
    g_main_context_unref(m->ctx);
    g_mutex_clear(&m->lock);
    g_free(m->result.detail);
    g_free(m->result.report);
    g_free(m->result.driven_by);
    g_free(m->result.remote_id);
    g_free(m);
}

static void move_fail(HotmigdMove *m, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void move_fail(HotmigdMove *m, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    g_free(m->result.detail);
    m->result.detail = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    m->result.ok = FALSE;
}

/* Did the failed migration of @opts->domain keep its journal (its undo or its resume failed)?
 * Not when it was refused for a journal already there, or another process migrating it. */
static gboolean move_kept_journal(const OrchOptions *opts, const GError *error)
{
    g_autoptr(GPtrArray) journals = NULL;

    if (g_error_matches(error, ORCH_ERROR, ORCH_ERROR_UNFINISHED) ||
        g_error_matches(error, ORCH_ERROR, ORCH_ERROR_BUSY))
        return FALSE;
    journals = orch_journal_list(opts->state_dir ? opts->state_dir : ORCH_STATE_DIR_DEFAULT, NULL);
    for (guint i = 0; journals && i < journals->len; i++) {
        if (g_str_equal(g_ptr_array_index(journals, i), opts->domain))
            return TRUE;
    }
    return FALSE;
}

/* The journal the failed move kept, recovered as 'migrate-vm --recover DOMAIN' does (the move
 * still holds the domain: no other move of it starts meanwhile); tried again every
 * recover_retry_ms while it fails, for HOTMIGD_MOVE_RECOVER_FOR_S at most, or until the move is
 * cancelled (the daemon stops: its next start recovers it). What became of it, for the move's
 * detail (owned). */
static char *move_recover(HotmigdMove *m, const OrchOptions *opts)
{
    HotmigdRecoverFunc recover = m->env->recover ? m->env->recover : orch_recover;
    guint retry_ms =
        m->env->recover_retry_ms ? m->env->recover_retry_ms : HOTMIGD_MOVE_RECOVER_RETRY_MS_DEFAULT;
    HmDeadline until = hm_deadline_in_ms(HOTMIGD_MOVE_RECOVER_FOR_S * 1000);
    g_autoptr(GError) local = NULL;

    for (guint attempt = 1;; attempt++) {
        g_autoptr(GPtrArray) results = NULL;
        const OrchRecovery *rec;

        g_clear_error(&local);
        if (recover(opts, &results, &local)) {
            rec = results && results->len ? g_ptr_array_index(results, 0) : NULL;
            g_message("Recovered the journal the failed migration of '%s' kept (attempt %u): %s",
                      m->domain, attempt, rec ? rec->outcome : "done");
            if (!rec || !rec->final_host)
                return g_strdup_printf("its journal recovered: %s", rec ? rec->outcome : "done");
            return g_strdup_printf("its journal recovered: %s, on the %s host with %u of %u VF(s)",
                                   rec->outcome, rec->final_host, rec->vfs_attached,
                                   rec->vfs_total);
        }
        if (g_error_matches(local, ORCH_ERROR, ORCH_ERROR_BUSY))
            return g_strdup_printf("its journal is left to the process recovering it: %s",
                                   local->message);
        g_message("Recovering the journal the failed migration of '%s' kept, attempt %u: %s",
                  m->domain, attempt, local->message);
        if (hm_deadline_remaining_ms(until) <= retry_ms ||
            !hotmigd_run_wait_ms(retry_ms, m->cancel))
            break;
    }
    g_warning("The journal the failed migration of '%s' kept is left for the next start of "
              "hotmigd or 'migrate-vm --recover %s': %s",
              m->domain, m->domain, local->message);
    return g_strdup_printf("its journal is kept ('migrate-vm --recover %s' retries): %s", m->domain,
                           local->message);
}

/* @deputy_why: the move runs here for @from, whose hotmigd could not be reached (why), or NULL. */
static void move_run_here(HotmigdMove *m, const HmConfigHost *from, const HmConfigHost *to,
                          const char *deputy_why)
{
    g_auto(OrchOptions) opts = {0};
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    orch_options_copy(&opts, m->env->migrate_opts);
    g_free(opts.domain);
    opts.domain = g_strdup(m->domain);
    g_free(opts.source_uri);
    opts.source_uri = g_strdup(from->uri);
    g_free(opts.dest_uri);
    opts.dest_uri = g_strdup(to->uri);
    g_free(opts.hotmigd_url);
    opts.hotmigd_url = g_strdup(to->hotmigd);
    g_free(opts.source_hotmigd_url);
    opts.source_hotmigd_url = g_strdup(from->hotmigd);
    opts.cancellable = m->cancel;
    opts.progress = NULL;
    g_free(m->result.driven_by);
    m->result.driven_by = g_strdup("here");
    if (deputy_why)
        g_message("Migrating '%s' from '%s' here: its hotmigd cannot be reached (%s)", m->domain,
                  from->name, deputy_why);
    m->result.ok = m->env->migrate(&opts, &report, &error);
    if (!m->result.ok && move_kept_journal(&opts, error)) {
        g_autofree char *recovered = move_recover(m, &opts);

        move_fail(m, "%s; %s", error ? error->message : "the migration failed", recovered);
    } else if (!m->result.ok) {
        move_fail(m, "%s", error ? error->message : "the migration failed");
    }
    if (report)
        m->result.report = orch_report_format_json(report, FALSE);
}

/* Asks @from's hotmigd to run the move and follows it there; when that hotmigd cannot be
 * reached at all (nothing was sent: no migration can have started there), runs it here, over
 * libvirt, as its deputy (docs/policies.md). */
static void move_run_remote(HotmigdMove *m, const HmConfigHost *from, const HmConfigHost *to)
{
    const HotmigdMoveEnv *env = m->env;
    guint poll_ms = env->poll_ms ? env->poll_ms : HOTMIGD_MOVE_POLL_MS_DEFAULT;
    guint lost_s = env->lost_after_s ? env->lost_after_s : HOTMIGD_MOVE_LOST_AFTER_S_DEFAULT;
    OrchHotmigdMigrationRequest req = {
        .domain = m->domain, .destination = m->to, .reason = m->reason, .plan = m->plan};
    g_autoptr(OrchHotmigdClient) vfd = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *id = NULL;
    gint64 last_answer;

    m->result.driven_by = g_strdup(from->name);
    if (!from->hotmigd) {
        move_fail(m, "no hotmigd URL known for source host '%s': it drives its moves", from->name);
        return;
    }
    vfd = orch_connector_open_hotmigd(env->migrate_opts, from->hotmigd, &error);
    if (vfd)
        id = orch_hotmigd_client_migration_start(vfd, &req, &error);
    if (!id && g_error_matches(error, ORCH_ERROR, ORCH_ERROR_UNREACHABLE)) {
        move_run_here(m, from, to, error->message);
        return;
    }
    if (!id) {
        move_fail(m, "the hotmigd of source host '%s' did not start the migration: %s", from->name,
                  error->message);
        return;
    }
    g_mutex_lock(&m->lock);
    m->result.remote_id = g_strdup(id);
    g_mutex_unlock(&m->lock);
    last_answer = g_get_monotonic_time();
    /* Nothing tells us when it ends: ask every poll_ms (docs/decisions.md). */
    while (hotmigd_run_wait_ms(poll_ms, m->cancel)) {
        g_autoptr(OrchHotmigdMigration) mig = NULL;

        g_clear_error(&error);
        mig = orch_hotmigd_client_migration_get(vfd, id, &error);
        if (mig) {
            last_answer = g_get_monotonic_time();
            if (mig->state == ORCH_HOTMIGD_MIGRATION_RUNNING)
                continue;
            m->result.ok = mig->state == ORCH_HOTMIGD_MIGRATION_DONE;
            if (!m->result.ok)
                move_fail(m, "%s", mig->error ? mig->error : "the migration failed");
            m->result.report = g_steal_pointer(&mig->report);
            return;
        }
        if (g_error_matches(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND)) {
            move_fail(
                m,
                "the hotmigd of source host '%s' no longer knows migration %s (did it restart?): %s",
                from->name, id, error->message);
            return;
        }
        if (g_get_monotonic_time() - last_answer > (gint64)lost_s * G_USEC_PER_SEC) {
            move_fail(
                m,
                "lost the hotmigd of source host '%s' for %u s while it migrated '%s' (migration %s; see its status): %s",
                from->name, lost_s, m->domain, id, error->message);
            return;
        }
    }
    move_fail(m, "stopped following migration %s of '%s' at source host '%s' (it goes on there)",
              id, m->domain, from->name);
}

static gboolean move_deliver(gpointer data)
{
    HotmigdMove *m = data;

    if (!m->orphaned && m->done)
        m->done(m, &m->result, m->data);
    return G_SOURCE_REMOVE;
}

static gpointer move_thread(gpointer data)
{
    HotmigdMove *m = data;
    const HmConfigHost *from = hotmigd_run_move_env_find_host(m->env, m->from);
    const HmConfigHost *to = hotmigd_run_move_env_find_host(m->env, m->to);

    if (!from || !to)
        move_fail(m, "unknown host '%s'", from ? m->to : m->from);
    else if (g_strcmp0(m->from, m->env->self) == 0)
        move_run_here(m, from, to, NULL);
    else
        move_run_remote(m, from, to);
    hm_main_context_post(m->ctx, G_PRIORITY_DEFAULT, move_deliver, m, (GDestroyNotify)move_unref);
    return NULL;
}

HotmigdMove *hotmigd_run_move_start(const HotmigdMoveEnv *env, const char *domain, const char *from,
                                    const char *to, const char *reason, const char *plan,
                                    HotmigdMoveDone done, gpointer data)
{
    HotmigdMove *m = g_new0(HotmigdMove, 1);
    g_autofree char *name = g_strdup_printf("move %.40s", domain);

    g_return_val_if_fail(env && env->migrate && env->migrate_opts && domain && from && to, NULL);
    m->ref = 2; /* the owner's, the thread's */
    m->env = env;
    m->domain = g_strdup(domain);
    m->from = g_strdup(from);
    m->to = g_strdup(to);
    m->reason = g_strdup(reason ? reason : "hotmigd");
    m->plan = g_strdup(plan);
    m->cancel = g_cancellable_new();
    m->ctx = g_main_context_ref_thread_default();
    m->done = done;
    m->data = data;
    g_mutex_init(&m->lock);
    m->thread = g_thread_new(name, move_thread, m);
    return m;
}

void hotmigd_run_move_free(HotmigdMove *m)
{
    if (!m)
        return;
    m->orphaned = TRUE;
    g_cancellable_cancel(m->cancel);
    g_thread_join(m->thread);
    move_unref(m);
}

const char *hotmigd_run_move_get_remote_id(HotmigdMove *m)
{
    const char *id;

    g_mutex_lock(&m->lock);
    id = m->result.remote_id;
    g_mutex_unlock(&m->lock);
    return id;
}

/* ---- a plan's run ---------------------------------------------------------------------------- */

typedef struct {
    HotmigdRunMove pub;
    HotmigdRun *run;
    HotmigdMove *job;  /* while it runs */
    gboolean reported; /* its end was told */
} RunMove;

struct HotmigdRun {
    const HotmigdMoveEnv *env;
    char *id;
    char *reason;
    PolSchedule *sched;
    GPtrArray *moves; /* RunMove, in the schedule's order */
    HotmigdRunFunc cb;
    gpointer data;
    GSource *idle; /* the pending pump or end (on the run's context) */
    gboolean finish_told;
};

/* @fn(@run) soon, on the thread-default context. */
static void run_later(HotmigdRun *run, GSourceFunc fn)
{
    run->idle = g_idle_source_new();
    g_source_set_callback(run->idle, fn, run, NULL);
    g_source_attach(run->idle, g_main_context_get_thread_default());
}

static void run_idle_clear(HotmigdRun *run)
{
    if (!run->idle)
        return;
    g_source_destroy(run->idle);
    g_source_unref(run->idle);
    run->idle = NULL;
}

static void run_move_free(RunMove *rm)
{
    hotmigd_run_move_free(rm->job);
    g_free(rm->pub.driven_by);
    g_free(rm->pub.remote_id);
    g_free(rm->pub.report);
    g_free(rm);
}

static void run_pump(HotmigdRun *run);

static void run_tell(HotmigdRun *run, HotmigdRunEvent event, RunMove *rm)
{
    if (run->cb)
        run->cb(run, event, rm ? &rm->pub : NULL, run->data);
}

/* Tells the ends the schedule decided on its own (skips). */
static void run_tell_ends(HotmigdRun *run)
{
    for (guint i = 0; i < run->moves->len; i++) {
        RunMove *rm = g_ptr_array_index(run->moves, i);
        PolMoveState state = rm->pub.move->state;

        if (rm->reported ||
            (state != POL_MOVE_SKIPPED && state != POL_MOVE_DONE && state != POL_MOVE_FAILED) ||
            rm->job)
            continue;
        rm->reported = TRUE;
        run_tell(run, HOTMIGD_RUN_EVENT_ENDED, rm);
    }
}

static void run_move_done(HotmigdMove *job, const HotmigdMoveResult *result, gpointer data)
{
    RunMove *rm = data;
    HotmigdRun *run = rm->run;
    g_autofree char *detail = NULL;

    g_free(rm->pub.driven_by);
    rm->pub.driven_by = g_strdup(result->driven_by);
    g_free(rm->pub.remote_id);
    rm->pub.remote_id = g_strdup(result->remote_id);
    g_free(rm->pub.report);
    rm->pub.report = g_strdup(result->report);
    detail = g_strdup(result->detail);
    g_clear_pointer(&rm->job, hotmigd_run_move_free);
    pol_schedule_done(run->sched, rm->pub.move, result->ok, detail,
                      g_get_real_time() / G_USEC_PER_SEC, NULL);
    g_debug("run %s: %s %s -> %s %s%s%s", run->id, rm->pub.move->vm, rm->pub.move->from,
            rm->pub.move->to, result->ok ? "done" : "failed", detail ? ": " : "",
            detail ? detail : "");
    rm->reported = TRUE;
    run_tell(run, HOTMIGD_RUN_EVENT_ENDED, rm);
    run_pump(run);
}

static gboolean run_finish(gpointer data)
{
    HotmigdRun *run = data;

    run_idle_clear(run);
    if (!run->finish_told) {
        run->finish_told = TRUE;
        /* The last call: the callback may free the run. */
        run_tell(run, HOTMIGD_RUN_EVENT_FINISHED, NULL);
    }
    return G_SOURCE_REMOVE;
}

static void run_pump(HotmigdRun *run)
{
    g_autoptr(GPtrArray) started = NULL;
    g_autofree char *reason = NULL;

    pol_schedule_next(run->sched, g_get_real_time() / G_USEC_PER_SEC, &started);
    for (guint i = 0; started && i < started->len; i++) {
        const PolScheduleMove *move = g_ptr_array_index(started, i);
        RunMove *rm = g_ptr_array_index(run->moves, move->index);

        g_clear_pointer(&reason, g_free);
        reason = g_strdup_printf("%s (%s)", run->reason, run->id);
        rm->pub.driven_by =
            g_strdup(g_strcmp0(move->from, run->env->self) == 0 ? "here" : move->from);
        rm->job = hotmigd_run_move_start(run->env, move->vm, move->from, move->to, reason, run->id,
                                         run_move_done, rm);
        run_tell(run, HOTMIGD_RUN_EVENT_STARTED, rm);
    }
    run_tell_ends(run);
    if (pol_schedule_is_finished(run->sched) && !run->idle && !run->finish_told)
        run_later(run, run_finish);
}

static gboolean run_first_pump(gpointer data)
{
    HotmigdRun *run = data;

    run_idle_clear(run);
    run_pump(run);
    return G_SOURCE_REMOVE;
}

HotmigdRun *hotmigd_run_new(const HotmigdMoveEnv *env, const char *id, const char *reason,
                            const PolCluster *cluster, const GPtrArray *migrations,
                            const PolScheduleLimits *limits, const PolOptions *opts, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(PolSchedule) sched = NULL;
    const GPtrArray *moves;
    HotmigdRun *run;

    g_return_val_if_fail(env && id && cluster && migrations, NULL);
    sched = pol_schedule_new(cluster, migrations, limits, opts, &local);
    if (!sched) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "%s", local->message);
        return NULL;
    }
    if (env->share)
        pol_schedule_set_share(sched, env->share);
    run = g_new0(HotmigdRun, 1);
    run->env = env;
    run->id = g_strdup(id);
    run->reason = g_strdup(reason ? reason : "hotmigd");
    run->sched = g_steal_pointer(&sched);
    run->moves = g_ptr_array_new_with_free_func((GDestroyNotify)run_move_free);
    moves = pol_schedule_get_moves(run->sched);
    for (guint i = 0; i < moves->len; i++) {
        RunMove *rm = g_new0(RunMove, 1);

        rm->pub.move = g_ptr_array_index(moves, i);
        rm->run = run;
        g_ptr_array_add(run->moves, rm);
    }
    return run;
}

void hotmigd_run_set_jobs_side_by_side(HotmigdRun *run, gboolean side_by_side)
{
    g_return_if_fail(run && !run->cb);
    pol_schedule_set_jobs_side_by_side(run->sched, side_by_side);
}

void hotmigd_run_start(HotmigdRun *run, HotmigdRunFunc cb, gpointer data)
{
    g_return_if_fail(run && !run->cb);
    run->cb = cb;
    run->data = data;
    run_later(run, run_first_pump);
}

GPtrArray *hotmigd_run_stop_pending(HotmigdRun *run, const char *reason)
{
    g_autoptr(GPtrArray) skipped = NULL;
    GPtrArray *vms = g_ptr_array_new_with_free_func(g_free);

    g_return_val_if_fail(run && reason, vms);
    pol_schedule_skip_pending(run->sched, reason, g_get_real_time() / G_USEC_PER_SEC, &skipped);
    for (guint i = 0; i < skipped->len; i++)
        g_ptr_array_add(vms, g_strdup(((const PolScheduleMove *)g_ptr_array_index(skipped, i))->vm));
    if (run->cb) {
        run_tell_ends(run);
        if (pol_schedule_is_finished(run->sched) && !run->idle && !run->finish_told)
            run_later(run, run_finish);
    }
    return vms;
}

void hotmigd_run_poke(HotmigdRun *run)
{
    g_return_if_fail(run != NULL);
    if (!run->cb || run->finish_told || run->idle)
        return;
    run_later(run, run_first_pump);
}

void hotmigd_run_free(HotmigdRun *run)
{
    if (!run)
        return;
    run_idle_clear(run);
    /* Each running move is cancelled and waited for (a migration here is undone). */
    g_ptr_array_unref(run->moves);
    pol_schedule_free(run->sched);
    g_free(run->id);
    g_free(run->reason);
    g_free(run);
}

const char *hotmigd_run_get_id(const HotmigdRun *run)
{
    return run->id;
}

gboolean hotmigd_run_is_finished(const HotmigdRun *run)
{
    return pol_schedule_is_finished(run->sched);
}

void hotmigd_run_get_progress(const HotmigdRun *run, PolScheduleProgress *ret_progress)
{
    pol_schedule_get_progress(run->sched, ret_progress);
}

const GPtrArray *hotmigd_run_get_moves(const HotmigdRun *run)
{
    return run->moves;
}
