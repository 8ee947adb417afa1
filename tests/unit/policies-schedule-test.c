/* hm-policies: the scheduler's core. Limits never exceeded and no host overcommitted at any
 * step (checked against the test's own bookkeeping), a failure in the middle stopping only
 * what depended on it, the report of every move, priority order, the moves of one MPI job
 * one at a time (other moves taking the places meanwhile), and the same input giving the same
 * run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "common/config.h"
#include "policies/policies-priv.h"

#define T0 1700000000

static void add_host(PolCluster *c, const char *name, guint cpus, guint64 mem, guint vfs)
{
    assert_true(pol_cluster_add_host(c, name, cpus, mem, POL_HOST_OK, NULL));
    assert_true(pol_cluster_set_host_vfs(c, name, NULL, vfs, -1, NULL));
}

static void add_vm(PolCluster *c, const char *name, const char *host, guint64 mem)
{
    PolVmSpec spec = {.name = name,
                      .host = host,
                      .vcpus = 1,
                      .memory_mib = mem,
                      .cpu_util = 0.1,
                      .moved_ago_s = -1};

    assert_true(pol_cluster_add_vm(c, &spec, NULL));
}

static void add_move(GPtrArray *moves, const char *vm, const char *from, const char *to,
                     gint priority, gboolean extra)
{
    PolMigration *m = g_new0(PolMigration, 1);

    m->vm = g_strdup(vm);
    m->from = g_strdup(from);
    m->to = g_strdup(to);
    m->duration_s = 1.0;
    m->priority = priority;
    m->extra = extra;
    g_ptr_array_add(moves, m);
}

static GPtrArray *moves_new(void)
{
    return g_ptr_array_new_with_free_func((GDestroyNotify)pol_migration_free);
}

/* "vm:from>to" of each move of @moves, space separated (owned). */
static char *names(const GPtrArray *moves)
{
    GString *s = g_string_new(NULL);

    for (guint i = 0; moves && i < moves->len; i++) {
        const PolScheduleMove *m = g_ptr_array_index(moves, i);
        g_string_append_printf(s, "%s%s:%s>%s", i ? " " : "", m->vm, m->from, m->to);
    }
    return g_string_free(s, FALSE);
}

static char *next_names(PolSchedule *s, gint64 now)
{
    g_autoptr(GPtrArray) started = NULL;

    pol_schedule_next(s, now, &started);
    return names(started);
}

static const PolScheduleMove *find(const PolSchedule *s, const char *vm, const char *to)
{
    const GPtrArray *moves = pol_schedule_get_moves(s);

    for (guint i = 0; i < moves->len; i++) {
        const PolScheduleMove *m = g_ptr_array_index(moves, i);
        if (g_str_equal(m->vm, vm) && g_str_equal(m->to, to))
            return m;
    }
    fail_msg("no move of '%s' to '%s'", vm, to);
    return NULL;
}

/* ---- hand-checked cases ------------------------------------------------------------------ */

/* x leaves B for C, which makes room on B for y; z goes from A to C on its own. x fails: y is
 * skipped naming x, z still runs, and the report says what happened to each. */
static void test_failure_in_the_middle(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GPtrArray) moves = moves_new();
    g_autoptr(PolSchedule) s = NULL;
    g_autoptr(GPtrArray) skipped = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *first = NULL, *second = NULL, *skipped_names = NULL;
    PolScheduleProgress pr;
    const PolScheduleMove *x, *y, *z;

    add_host(c, "A", 8, 1000, 4);
    add_host(c, "B", 8, 1000, 4);
    add_host(c, "C", 8, 1000, 4);
    add_vm(c, "x", "B", 600);
    add_vm(c, "y", "A", 600);
    add_vm(c, "z", "A", 300);
    add_move(moves, "x", "B", "C", 0, FALSE);
    add_move(moves, "y", "A", "B", 0, FALSE);
    add_move(moves, "z", "A", "C", 0, FALSE);
    s = pol_schedule_new(c, moves, NULL, NULL, &error);
    assert_non_null(s);
    /* y waits: B still holds x until x's move is done. z fits on C next to x's 600 MiB. */
    first = next_names(s, T0);
    assert_string_equal(first, "x:B>C z:A>C");
    pol_schedule_get_progress(s, &pr);
    assert_int_equal(pr.running, 2);
    assert_int_equal(pr.pending, 1);
    x = find(s, "x", "C");
    y = find(s, "y", "B");
    z = find(s, "z", "C");
    pol_schedule_done(s, x, FALSE, "migrate: connection reset by peer", T0 + 5, &skipped);
    skipped_names = names(skipped);
    assert_string_equal(skipped_names, "y:A>B");
    assert_int_equal(y->state, POL_MOVE_SKIPPED);
    assert_string_equal(y->detail,
                        "no room on 'B' for VM 'y': the move of VM 'x' from 'B' to 'C' failed");
    assert_int_equal(y->finished, T0 + 5);
    second = next_names(s, T0 + 5);
    assert_string_equal(second, "");
    assert_false(pol_schedule_is_finished(s));
    pol_schedule_done(s, z, TRUE, NULL, T0 + 9, NULL);
    assert_true(pol_schedule_is_finished(s));
    pol_schedule_get_progress(s, &pr);
    assert_int_equal(pr.total, 3);
    assert_int_equal(pr.done, 1);
    assert_int_equal(pr.failed, 1);
    assert_int_equal(pr.skipped, 1);
    assert_int_equal(pr.pending + pr.running, 0);
    assert_int_equal(x->state, POL_MOVE_FAILED);
    assert_string_equal(x->detail, "migrate: connection reset by peer");
    assert_int_equal(x->started, T0);
    assert_int_equal(x->finished, T0 + 5);
    assert_int_equal(z->state, POL_MOVE_DONE);
    assert_null(z->detail);
    assert_int_equal(z->finished, T0 + 9);
}

/* A swap of two full hosts through a detour: a's detour to C fails, so b cannot go to A and
 * a's second move cannot start from C. */
static void test_failed_detour_skips_the_chain(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GPtrArray) moves = moves_new();
    g_autoptr(PolSchedule) s = NULL;
    g_autoptr(GPtrArray) skipped = NULL;
    g_autofree char *first = NULL, *skipped_names = NULL;
    const PolScheduleMove *detour;

    add_host(c, "A", 8, 100, 4);
    add_host(c, "B", 8, 100, 4);
    add_host(c, "C", 8, 200, 4);
    add_vm(c, "a", "A", 100);
    add_vm(c, "b", "B", 100);
    add_move(moves, "a", "A", "C", 0, TRUE);
    add_move(moves, "b", "B", "A", 0, FALSE);
    add_move(moves, "a", "C", "B", 0, FALSE);
    s = pol_schedule_new(c, moves, NULL, NULL, NULL);
    assert_non_null(s);
    first = next_names(s, T0);
    assert_string_equal(first, "a:A>C");
    detour = find(s, "a", "C");
    assert_true(detour->extra);
    pol_schedule_done(s, detour, FALSE, "plug: no free VF", T0 + 1, &skipped);
    skipped_names = names(skipped);
    assert_string_equal(skipped_names, "a:C>B b:B>A");
    assert_string_equal(find(s, "a", "B")->detail,
                        "VM 'a' will not be on 'C': its move from 'A' to 'C' failed");
    assert_string_equal(find(s, "b", "A")->detail,
                        "no room on 'A' for VM 'b': the move of VM 'a' from 'A' to 'C' failed");
    assert_true(pol_schedule_is_finished(s));
}

/* The same swap when everything works: one move at a time, in order. */
static void test_detour_runs_in_order(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GPtrArray) moves = moves_new();
    g_autoptr(PolSchedule) s = NULL;
    g_autofree char *n1 = NULL, *n2 = NULL, *n3 = NULL;

    add_host(c, "A", 8, 100, 4);
    add_host(c, "B", 8, 100, 4);
    add_host(c, "C", 8, 200, 4);
    add_vm(c, "a", "A", 100);
    add_vm(c, "b", "B", 100);
    add_move(moves, "a", "A", "C", 0, TRUE);
    add_move(moves, "b", "B", "A", 0, FALSE);
    add_move(moves, "a", "C", "B", 0, FALSE);
    s = pol_schedule_new(c, moves, NULL, NULL, NULL);
    n1 = next_names(s, T0);
    assert_string_equal(n1, "a:A>C");
    pol_schedule_done(s, find(s, "a", "C"), TRUE, NULL, T0 + 1, NULL);
    n2 = next_names(s, T0 + 1);
    assert_string_equal(n2, "b:B>A");
    pol_schedule_done(s, find(s, "b", "A"), TRUE, NULL, T0 + 2, NULL);
    n3 = next_names(s, T0 + 2);
    assert_string_equal(n3, "a:C>B");
    pol_schedule_done(s, find(s, "a", "B"), TRUE, NULL, T0 + 3, NULL);
    assert_true(pol_schedule_is_finished(s));
}

/* A drain of five VMs: per host outbound, per host inbound and cluster limits. */
static void test_limits(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GPtrArray) moves = moves_new();
    const struct {
        PolScheduleLimits limits;
        const char *started;
    } cases[] = {
        {{0, 0, 0}, "v1:A>B v2:A>C v3:A>B v4:A>C v5:A>B"},
        {{2, 0, 0}, "v1:A>B v2:A>C"},
        {{0, 1, 0}, "v1:A>B v2:A>C"},
        {{0, 2, 3}, "v1:A>B v2:A>C v3:A>B"},
        {{0, 0, 1}, "v1:A>B"},
    };

    add_host(c, "A", 64, 10000, 8);
    add_host(c, "B", 64, 10000, 8);
    add_host(c, "C", 64, 10000, 8);
    for (guint i = 1; i <= 5; i++) {
        g_autofree char *vm = g_strdup_printf("v%u", i);
        add_vm(c, vm, "A", 1000);
        add_move(moves, vm, "A", i % 2 ? "B" : "C", 0, FALSE);
    }
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(PolSchedule) s = pol_schedule_new(c, moves, &cases[i].limits, NULL, NULL);
        g_autofree char *started = next_names(s, T0);
        g_autofree char *again = next_names(s, T0);

        assert_string_equal(started, cases[i].started);
        assert_string_equal(again, ""); /* nothing more until a move ends */
    }
    {
        /* One at a time into B: v3 starts when v1 is done, even if v2 still runs. */
        PolScheduleLimits one_in = {0, 1, 0};
        g_autoptr(PolSchedule) s = pol_schedule_new(c, moves, &one_in, NULL, NULL);
        g_autofree char *n1 = next_names(s, T0), *n2 = NULL;

        assert_string_equal(n1, "v1:A>B v2:A>C");
        pol_schedule_done(s, find(s, "v1", "B"), TRUE, NULL, T0 + 1, NULL);
        n2 = next_names(s, T0 + 1);
        assert_string_equal(n2, "v3:A>B");
    }
}

/* Two schedules sharing their running moves: the limits hold for both together; a schedule
 * freed with moves running gives their places back. */
static void test_shared_limits(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GPtrArray) from_a = moves_new();
    g_autoptr(GPtrArray) from_c = moves_new();
    g_autoptr(PolScheduleShare) share = pol_schedule_share_new();
    PolScheduleLimits limits = {0, 1, 2}; /* one arrival per host, two moves in all */
    g_autoptr(PolSchedule) s1 = NULL;
    PolSchedule *s2;
    g_autofree char *a1 = NULL, *c1 = NULL, *c2 = NULL, *a2 = NULL, *c3 = NULL;

    add_host(c, "A", 64, 10000, 8);
    add_host(c, "B", 64, 10000, 8);
    add_host(c, "C", 64, 10000, 8);
    add_host(c, "D", 64, 10000, 8);
    add_vm(c, "a1", "A", 1000);
    add_vm(c, "a2", "A", 1000);
    add_vm(c, "c1", "C", 1000);
    add_vm(c, "c2", "C", 1000);
    add_move(from_a, "a1", "A", "B", 0, FALSE);
    add_move(from_a, "a2", "A", "D", 0, FALSE);
    add_move(from_c, "c1", "C", "B", 0, FALSE);
    add_move(from_c, "c2", "C", "D", 0, FALSE);
    s1 = pol_schedule_new(c, from_a, &limits, NULL, NULL);
    s2 = pol_schedule_new(c, from_c, &limits, NULL, NULL);
    pol_schedule_set_share(s1, share);
    pol_schedule_set_share(s2, share);

    a1 = next_names(s1, T0);
    assert_string_equal(a1, "a1:A>B a2:A>D"); /* two in all */
    c1 = next_names(s2, T0);
    assert_string_equal(c1, ""); /* alone it would start both */
    assert_int_equal(pol_schedule_share_running(share, NULL, FALSE), 2);
    assert_int_equal(pol_schedule_share_running(share, "A", TRUE), 2);
    assert_int_equal(pol_schedule_share_running(share, "B", FALSE), 1);
    pol_schedule_done(s1, find(s1, "a1", "B"), TRUE, NULL, T0 + 1, NULL);
    c2 = next_names(s2, T0 + 1);
    assert_string_equal(c2, "c1:C>B"); /* B is free again; D still receives a2 */
    pol_schedule_done(s2, find(s2, "c1", "B"), FALSE, "failed", T0 + 2, NULL);
    a2 = next_names(s1, T0 + 2);
    assert_string_equal(a2, "");
    /* s1 given up while a2 runs: D takes c2. */
    g_clear_pointer(&s1, pol_schedule_free);
    assert_int_equal(pol_schedule_share_running(share, NULL, FALSE), 0);
    c3 = next_names(s2, T0 + 3);
    assert_string_equal(c3, "c2:C>D");
    pol_schedule_free(s2);
    assert_int_equal(pol_schedule_share_running(share, "D", FALSE), 0);
}

/* Higher priority first; equal priorities keep the given order; a priority order that the
 * cluster cannot replay without overcommitting is refused. */
static void test_priority_order(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolCluster) c2 = pol_cluster_new();
    g_autoptr(GPtrArray) moves = moves_new();
    g_autoptr(GPtrArray) bad = moves_new();
    g_autoptr(PolSchedule) s = NULL;
    g_autoptr(GError) error = NULL;
    PolScheduleLimits one = {0, 0, 1};
    g_autofree char *order = NULL, *n1 = NULL, *n2 = NULL;
    const GPtrArray *report;

    add_host(c, "A", 64, 1000, 8);
    add_host(c, "B", 64, 1200, 8);
    add_vm(c, "p", "A", 100);
    add_vm(c, "q", "A", 100);
    add_vm(c, "r", "A", 100);
    add_vm(c, "full", "B", 900);
    add_move(moves, "p", "A", "B", 0, FALSE);
    add_move(moves, "q", "A", "B", 5, FALSE);
    add_move(moves, "r", "A", "B", 5, FALSE);
    s = pol_schedule_new(c, moves, &one, NULL, &error);
    assert_non_null(s);
    report = pol_schedule_get_moves(s);
    order = names(report);
    assert_string_equal(order, "q:A>B r:A>B p:A>B");
    assert_int_equal(((PolScheduleMove *)g_ptr_array_index(report, 2))->index, 2);
    n1 = next_names(s, T0);
    assert_string_equal(n1, "q:A>B");
    pol_schedule_done(s, find(s, "q", "B"), TRUE, NULL, T0 + 1, NULL);
    n2 = next_names(s, T0 + 1);
    assert_string_equal(n2, "r:A>B");

    /* "old" must leave B before "new" fits there: given a lower priority it would come
     * second, and B would be overcommitted meanwhile. */
    add_host(c2, "A", 64, 2000, 8);
    add_host(c2, "B", 64, 1000, 8);
    add_vm(c2, "old", "B", 800);
    add_vm(c2, "new", "A", 800);
    add_move(bad, "old", "B", "A", 0, FALSE);
    add_move(bad, "new", "A", "B", 1, FALSE);
    g_clear_error(&error);
    assert_null(pol_schedule_new(c2, bad, NULL, NULL, &error));
    assert_true(g_error_matches(error, POL_ERROR, POL_ERROR_INVALID));
    assert_string_equal(
        error->message,
        "cannot schedule the migrations in priority order: step 1: VM 'new' overcommits 'B' (dimension 1: 800 + 800 > 1000)");
    /* In the plan's own order it is fine. */
    ((PolMigration *)g_ptr_array_index(bad, 1))->priority = 0;
    g_clear_pointer(&s, pol_schedule_free);
    s = pol_schedule_new(c2, bad, NULL, NULL, NULL);
    assert_non_null(s);
}

static void test_empty_plan(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GPtrArray) moves = moves_new();
    g_autoptr(PolSchedule) s = NULL;
    g_autoptr(GPtrArray) started = NULL;

    add_host(c, "A", 8, 1000, 4);
    s = pol_schedule_new(c, moves, NULL, NULL, NULL);
    assert_true(pol_schedule_is_finished(s));
    assert_int_equal(pol_schedule_next(s, T0, &started), 0);
    assert_int_equal(started->len, 0);
    assert_string_equal(pol_move_state_to_string(POL_MOVE_SKIPPED), "skipped");
}

/* An urgent evacuation run by the scheduler with the evacuation's concurrency as the
 * outbound limit: moves start in the evacuation's order and, when they take the predicted
 * time, end when it said. */
static void test_runs_an_evacuation_as_predicted(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolPlan) drain = NULL;
    g_autoptr(PolEvacuation) evac = NULL;
    g_autoptr(PolSchedule) s = NULL;
    g_autoptr(GPtrArray) running = g_ptr_array_new();
    PolScheduleLimits limits = {2, 0, 0};
    PolEvacOptions o;
    const guint64 sizes[] = {6000, 5000, 4000, 3000, 2000};

    add_host(c, "src", 64, 100000, 8);
    add_host(c, "dst", 64, 100000, 8);
    for (guint i = 0; i < G_N_ELEMENTS(sizes); i++) {
        g_autofree char *vm = g_strdup_printf("v%u", (guint)(sizes[i] / 1000));
        add_vm(c, vm, "src", sizes[i]);
    }
    drain = pol_plan_drain(c, "src", NULL, NULL);
    pol_evac_options_init(&o);
    o.bandwidth_mib_s = 1000.0;
    o.overhead_s = 0.0;
    o.concurrency = 2;
    o.priority = 100;
    evac = pol_evacuation_order(c, drain, &o, T0, T0 + 10, NULL);
    assert_non_null(evac);
    s = pol_schedule_new(c, evac->plan->migrations, &limits, NULL, NULL);
    assert_non_null(s);
    /* Event loop on a simulated clock: each move ends after its predicted duration. */
    for (gint64 now = T0; !pol_schedule_is_finished(s); now++) {
        g_autoptr(GPtrArray) started = NULL;
        for (guint i = 0; i < running->len;) {
            const PolScheduleMove *m = g_ptr_array_index(running, i);
            if (m->started + (gint64)m->duration_s == now) {
                pol_schedule_done(s, m, TRUE, NULL, now, NULL);
                g_ptr_array_remove_index(running, i);
            } else {
                i++;
            }
        }
        pol_schedule_next(s, now, &started);
        g_ptr_array_extend(running, started, NULL, NULL);
        assert_true(now < T0 + 100);
    }
    for (guint i = 0; i < evac->moves->len; i++) {
        const PolEvacMove *e = g_ptr_array_index(evac->moves, i);
        const PolScheduleMove *m = g_ptr_array_index(pol_schedule_get_moves(s), i);
        assert_string_equal(m->vm, e->migration->vm);
        assert_int_equal(m->state, POL_MOVE_DONE);
        assert_int_equal(m->started - T0, (gint64)e->start_s);
        assert_int_equal(m->finished - T0, (gint64)e->finish_s);
        assert_true(m->finished <= T0 + 10);
    }
}

/* ---- MPI jobs: one move of a job at a time ------------------------------------------------ */

static void add_job_vm(PolCluster *c, const char *name, const char *host, guint64 mem,
                       const char *job)
{
    PolVmSpec spec = {.name = name,
                      .host = host,
                      .vcpus = 1,
                      .memory_mib = mem,
                      .cpu_util = 0.1,
                      .job = job,
                      .moved_ago_s = -1};

    assert_true(pol_cluster_add_vm(c, &spec, NULL));
}

/* Two places, two jobs of two VMs and a VM without a job, drained in the order j1 j2 k1 k2 x:
 * the places go to two jobs at once, each job's moves one after the other, and the job's
 * next move starts as soon as its last one ends. */
static void test_jobs_interleave(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GPtrArray) moves = moves_new();
    g_autoptr(PolSchedule) s = NULL;
    PolScheduleLimits two = {2, 0, 0};
    const char *vms[][2] = {{"j1", "J"}, {"j2", "J"}, {"k1", "K"}, {"k2", "K"}, {"x", NULL}};
    g_autofree char *n1 = NULL, *n2 = NULL, *n3 = NULL, *n4 = NULL, *n5 = NULL;

    add_host(c, "A", 64, 10000, 8);
    add_host(c, "B", 64, 10000, 8);
    for (guint i = 0; i < G_N_ELEMENTS(vms); i++) {
        add_job_vm(c, vms[i][0], "A", 1000, vms[i][1]);
        add_move(moves, vms[i][0], "A", "B", 0, FALSE);
    }
    s = pol_schedule_new(c, moves, &two, NULL, NULL);
    n1 = next_names(s, T0);
    assert_string_equal(n1, "j1:A>B k1:A>B"); /* not j2: J has a move running */
    pol_schedule_done(s, find(s, "j1", "B"), TRUE, NULL, T0 + 1, NULL);
    n2 = next_names(s, T0 + 1);
    assert_string_equal(n2, "j2:A>B"); /* J's next, before x */
    pol_schedule_done(s, find(s, "k1", "B"), TRUE, NULL, T0 + 2, NULL);
    n3 = next_names(s, T0 + 2);
    assert_string_equal(n3, "k2:A>B");
    /* A failure ends the job's move like a success: the job may move again. */
    pol_schedule_done(s, find(s, "j2", "B"), FALSE, "failed", T0 + 3, NULL);
    n4 = next_names(s, T0 + 3);
    assert_string_equal(n4, "x:A>B");
    pol_schedule_done(s, find(s, "k2", "B"), TRUE, NULL, T0 + 4, NULL);
    pol_schedule_done(s, find(s, "x", "B"), TRUE, NULL, T0 + 4, NULL);
    n5 = next_names(s, T0 + 4);
    assert_string_equal(n5, "");
    assert_true(pol_schedule_is_finished(s));
    /* The report says each move's job. */
    assert_string_equal(find(s, "j2", "B")->job, "J");
    assert_null(find(s, "x", "B")->job);
}

/* Every move left is of a job with a move running: it waits, even with places free (a plain
 * drain pauses one of the job's guests at a time). Moves without a job are never held back,
 * and side by side (an evacuation against a deadline) a job's moves run at once. */
static void test_jobs_wait(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GPtrArray) moves = moves_new();
    g_autoptr(GPtrArray) free_moves = moves_new();
    g_autoptr(PolSchedule) s = NULL;
    g_autoptr(PolSchedule) free_s = NULL;
    g_autoptr(PolSchedule) side = NULL;
    g_autofree char *n1 = NULL, *n2 = NULL, *n3 = NULL, *n4 = NULL, *n5 = NULL;

    add_host(c, "A", 64, 10000, 8);
    add_host(c, "B", 64, 10000, 8);
    for (guint i = 1; i <= 3; i++) {
        g_autofree char *vm = g_strdup_printf("j%u", i);
        g_autofree char *u = g_strdup_printf("u%u", i);

        add_job_vm(c, vm, "A", 1000, "J");
        add_move(moves, vm, "A", "B", 0, FALSE);
        add_job_vm(c, u, "A", 1000, NULL);
        add_move(free_moves, u, "A", "B", 0, FALSE);
    }
    s = pol_schedule_new(c, moves, NULL, NULL, NULL);
    n1 = next_names(s, T0);
    assert_string_equal(n1, "j1:A>B");
    n2 = next_names(s, T0);
    assert_string_equal(n2, ""); /* no limit, and still one at a time */
    pol_schedule_done(s, find(s, "j1", "B"), TRUE, NULL, T0 + 1, NULL);
    n3 = next_names(s, T0 + 1);
    assert_string_equal(n3, "j2:A>B");

    free_s = pol_schedule_new(c, free_moves, NULL, NULL, NULL);
    n4 = next_names(free_s, T0);
    assert_string_equal(n4, "u1:A>B u2:A>B u3:A>B");

    side = pol_schedule_new(c, moves, NULL, NULL, NULL);
    pol_schedule_set_jobs_side_by_side(side, TRUE);
    n5 = next_names(side, T0);
    assert_string_equal(n5, "j1:A>B j2:A>B j3:A>B");
}

/* A move held for its job keeps its room on the destination: x, after it in the order, does
 * not take the place j2 waits for (B has room for j2 or x until b0 has left). */
static void test_jobs_held_room(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GPtrArray) moves = moves_new();
    g_autoptr(PolSchedule) s = NULL;
    g_autofree char *n1 = NULL, *n2 = NULL, *n3 = NULL;

    add_host(c, "A", 64, 10000, 8);
    add_host(c, "B", 64, 3000, 8);
    add_host(c, "C", 64, 10000, 8);
    add_job_vm(c, "j1", "A", 1000, "J");
    add_job_vm(c, "j2", "A", 1000, "J");
    add_job_vm(c, "x", "A", 1000, NULL);
    add_job_vm(c, "b0", "B", 1000, NULL);
    add_move(moves, "j1", "A", "B", 0, FALSE);
    add_move(moves, "j2", "A", "B", 0, FALSE);
    add_move(moves, "b0", "B", "C", 0, FALSE);
    add_move(moves, "x", "A", "B", 0, FALSE);
    s = pol_schedule_new(c, moves, NULL, NULL, NULL);
    assert_non_null(s);
    n1 = next_names(s, T0);
    assert_string_equal(n1, "j1:A>B b0:B>C");
    pol_schedule_done(s, find(s, "j1", "B"), TRUE, NULL, T0 + 1, NULL);
    n2 = next_names(s, T0 + 1);
    assert_string_equal(n2, "j2:A>B");
    pol_schedule_done(s, find(s, "b0", "C"), TRUE, NULL, T0 + 2, NULL);
    n3 = next_names(s, T0 + 2);
    assert_string_equal(n3, "x:A>B");
}

/* Schedules side by side (a plan run and an evacuation) hold a job's moves for each other. */
static void test_jobs_shared(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GPtrArray) from_a = moves_new();
    g_autoptr(GPtrArray) from_c = moves_new();
    g_autoptr(PolScheduleShare) share = pol_schedule_share_new();
    g_autoptr(PolSchedule) s1 = NULL;
    g_autoptr(PolSchedule) s2 = NULL;
    g_autoptr(GPtrArray) skipped = NULL;
    g_autofree char *a1 = NULL, *c1 = NULL, *c2 = NULL;

    add_host(c, "A", 64, 10000, 8);
    add_host(c, "B", 64, 10000, 8);
    add_host(c, "C", 64, 10000, 8);
    add_job_vm(c, "a1", "A", 1000, "J");
    add_job_vm(c, "c1", "C", 1000, "J");
    add_move(from_a, "a1", "A", "B", 0, FALSE);
    add_move(from_c, "c1", "C", "B", 0, FALSE);
    s1 = pol_schedule_new(c, from_a, NULL, NULL, NULL);
    s2 = pol_schedule_new(c, from_c, NULL, NULL, NULL);
    pol_schedule_set_share(s1, share);
    pol_schedule_set_share(s2, share);
    a1 = next_names(s1, T0);
    assert_string_equal(a1, "a1:A>B");
    c1 = next_names(s2, T0);
    assert_string_equal(c1, "");
    /* Nothing of s2's own runs, and it waits for s1's move: not stuck, nothing skipped. */
    assert_false(pol_schedule_is_finished(s2));
    pol_schedule_done(s1, find(s1, "a1", "B"), TRUE, NULL, T0 + 1, &skipped);
    assert_int_equal(skipped->len, 0);
    c2 = next_names(s2, T0 + 1);
    assert_string_equal(c2, "c1:C>B");
}

/* ---- random plans ------------------------------------------------------------------------ */

static guint64 next_random(guint64 *s)
{
    guint64 z = (*s += G_GUINT64_CONSTANT(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Unequal hosts, VMs placed where they fit (nothing starts overcommitted). */
static PolCluster *random_cluster(guint64 seed)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    guint64 s = seed;
    guint n_hosts = 3 + next_random(&s) % 10, n_vms = 5 + next_random(&s) % 60;
    g_autofree gint64 *room = g_new0(gint64, n_hosts * 3);

    for (guint h = 0; h < n_hosts; h++) {
        g_autofree char *name = g_strdup_printf("h%02u", h);
        guint cpus = 8 + next_random(&s) % 3 * 8, vfs = next_random(&s) % 6;
        guint64 mem = 4096 * (1 + next_random(&s) % 4);

        add_host(c, name, cpus, mem, vfs);
        room[h * 3] = cpus * 1000;
        room[h * 3 + 1] = (gint64)mem;
        room[h * 3 + 2] = vfs;
    }
    for (guint v = 0; v < n_vms; v++) {
        g_autofree char *name = g_strdup_printf("vm%03u", v);
        guint vcpus = 1 + next_random(&s) % 4, vfs = next_random(&s) % 3 == 0;
        guint64 mem = 512 * (1 + next_random(&s) % 6);
        double util = (double)(next_random(&s) % 101) / 100.0;
        gint64 cpu = (gint64)((double)vcpus * util * 1000.0 + 0.999);
        guint h0 = next_random(&s) % n_hosts;
        guint job = (guint)(next_random(&s) % 8); /* half of them in one of 4 jobs */
        g_autofree char *job_id = job < 4 ? g_strdup_printf("job%u", job) : NULL;

        for (guint t = 0; t < n_hosts; t++) {
            guint h = (h0 + t) % n_hosts;
            g_autofree char *host = g_strdup_printf("h%02u", h);
            PolVmSpec spec = {.name = name,
                              .host = host,
                              .vcpus = vcpus,
                              .memory_mib = mem,
                              .cpu_util = util,
                              .vfs = vfs,
                              .job = job_id,
                              .moved_ago_s = -1};
            if (room[h * 3] < cpu || room[h * 3 + 1] < (gint64)mem || room[h * 3 + 2] < vfs)
                continue;
            room[h * 3] -= cpu;
            room[h * 3 + 1] -= (gint64)mem;
            room[h * 3 + 2] -= vfs;
            assert_true(pol_cluster_add_vm(c, &spec, NULL));
            break;
        }
    }
    return g_steal_pointer(&c);
}

static gint host_index(const PolCluster *c, const char *name)
{
    return GPOINTER_TO_INT(g_hash_table_lookup(c->host_by_name, name)) - 1;
}

static gint vm_index(const PolCluster *c, const char *name)
{
    return GPOINTER_TO_INT(g_hash_table_lookup(c->vm_by_name, name)) - 1;
}

/* Runs @migrations through a schedule with @limits, ending a random running move at each
 * step (failing one in @fail_one_in when not 0), and checks after every call, with its own
 * bookkeeping: no limit exceeded, no two moves of one job running, no host over a capacity
 * counting the VMs on it and those arriving, every started move's VM where the move begins. Returns the log of the run. */
static char *drive(const PolCluster *c, const GPtrArray *migrations,
                   const PolScheduleLimits *limits, guint64 seed, guint fail_one_in)
{
    PolOptions opts;
    g_autoptr(PolProblem) p = NULL;
    g_autoptr(PolSchedule) s = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) running = g_ptr_array_new();
    g_autofree guint *loc = NULL;
    GString *log = g_string_new(NULL);
    guint64 rnd = seed;
    PolScheduleProgress pr;
    guint D, steps = 0;

    pol_options_init(&opts);
    p = pol_problem_new(c, &opts);
    D = p->dims;
    loc = g_new(guint, p->n_vms + 1);
    for (guint v = 0; v < p->n_vms; v++)
        loc[v] = ((PolVm *)g_ptr_array_index(c->vms, v))->host;
    s = pol_schedule_new(c, migrations, limits, &opts, &error);
    if (!s)
        fail_msg("schedule: %s", error->message);

    for (gint64 now = T0;; now++) {
        g_autoptr(GPtrArray) started = NULL;
        g_autofree gint64 *used = g_new0(gint64, (gsize)p->n_hosts * D + 1);
        g_autofree guint *out = g_new0(guint, p->n_hosts + 1);
        g_autofree guint *in = g_new0(guint, p->n_hosts + 1);

        pol_schedule_next(s, now, &started);
        for (guint i = 0; i < started->len; i++) {
            const PolScheduleMove *m = g_ptr_array_index(started, i);
            assert_int_equal(loc[vm_index(c, m->vm)], host_index(c, m->from));
            assert_int_equal(m->state, POL_MOVE_RUNNING);
            assert_int_equal(m->started, now);
            g_string_append_printf(log, "+%u ", m->index);
        }
        g_ptr_array_extend(running, started, NULL, NULL);
        /* The limits and the capacities, from what the test knows. */
        for (guint v = 0; v < p->n_vms; v++)
            for (guint d = 0; d < D; d++)
                used[(gsize)loc[v] * D + d] += p->vm_dem[(gsize)v * D + d];
        for (guint i = 0; i < running->len; i++) {
            const PolScheduleMove *m = g_ptr_array_index(running, i);
            gint v = vm_index(c, m->vm), from = host_index(c, m->from), to = host_index(c, m->to);
            out[from]++;
            in[to]++;
            for (guint d = 0; d < D; d++)
                used[(gsize)to * D + d] += p->vm_dem[(gsize)v * D + d];
        }
        if (limits->total)
            assert_true(running->len <= limits->total);
        /* One move of a job at a time. */
        for (guint i = 0; i < running->len; i++)
            for (guint j = i + 1; j < running->len; j++) {
                const PolScheduleMove *a = g_ptr_array_index(running, i);
                const PolScheduleMove *b = g_ptr_array_index(running, j);
                const char *ja = ((PolVm *)g_ptr_array_index(c->vms, vm_index(c, a->vm)))->job;
                const char *jb = ((PolVm *)g_ptr_array_index(c->vms, vm_index(c, b->vm)))->job;
                if (ja && jb && g_str_equal(ja, jb))
                    fail_msg("step %u: '%s' and '%s' of job '%s' run at once", steps, a->vm,
                             b->vm, ja);
                assert_string_equal(a->job ? a->job : "", ja ? ja : "");
            }
        for (guint h = 0; h < p->n_hosts; h++) {
            if (limits->per_host_out)
                assert_true(out[h] <= limits->per_host_out);
            if (limits->per_host_in)
                assert_true(in[h] <= limits->per_host_in);
            for (guint d = 0; d < D; d++) {
                if (used[(gsize)h * D + d] > p->cap[(gsize)h * D + d])
                    fail_msg("step %u: host %u dimension %u: %" G_GINT64_FORMAT
                             " > %" G_GINT64_FORMAT,
                             steps, h, d, used[(gsize)h * D + d], p->cap[(gsize)h * D + d]);
            }
        }
        pol_schedule_get_progress(s, &pr);
        assert_int_equal(pr.running, running->len);
        assert_int_equal(pr.pending + pr.running + pr.done + pr.failed + pr.skipped, pr.total);
        if (running->len == 0) {
            /* Nothing runs and nothing started: the schedule must be over. */
            assert_true(pol_schedule_is_finished(s));
            break;
        }
        {
            guint r = (guint)(next_random(&rnd) % running->len);
            const PolScheduleMove *m = g_ptr_array_index(running, r);
            gboolean ok = fail_one_in == 0 || next_random(&rnd) % fail_one_in != 0;
            g_autoptr(GPtrArray) skipped = NULL;

            g_ptr_array_remove_index(running, r);
            pol_schedule_done(s, m, ok, ok ? NULL : "injected", now, &skipped);
            assert_int_equal(m->state, ok ? POL_MOVE_DONE : POL_MOVE_FAILED);
            if (ok)
                loc[vm_index(c, m->vm)] = (guint)host_index(c, m->to);
            g_string_append_printf(log, "%c%u ", ok ? '=' : '!', m->index);
            for (guint i = 0; i < skipped->len; i++) {
                const PolScheduleMove *k = g_ptr_array_index(skipped, i);
                assert_int_equal(k->state, POL_MOVE_SKIPPED);
                assert_non_null(k->detail);
                g_string_append_printf(log, "~%u ", k->index);
            }
        }
        steps++;
    }
    /* The report: every move ended, with a reason when it did not succeed. */
    for (guint i = 0; i < pol_schedule_get_moves(s)->len; i++) {
        const PolScheduleMove *m = g_ptr_array_index(pol_schedule_get_moves(s), i);
        assert_true(m->state == POL_MOVE_DONE || m->state == POL_MOVE_FAILED ||
                    m->state == POL_MOVE_SKIPPED);
        if (m->state == POL_MOVE_DONE)
            assert_null(m->detail);
        else
            assert_true(m->detail && *m->detail);
        if (m->state == POL_MOVE_FAILED)
            assert_string_equal(m->detail, "injected");
        if (fail_one_in == 0)
            assert_int_equal(m->state, POL_MOVE_DONE);
    }
    return g_string_free(log, FALSE);
}

static void test_random_runs(void **state)
{
    guint runs = 0, with_failures = 0, with_skips = 0;

    for (guint64 seed = 1; seed <= 150; seed++) {
        g_autoptr(PolCluster) c = random_cluster(seed);
        for (PolPolicy policy = 0; policy < POL_POLICY_LAST; policy++) {
            g_autoptr(PolPlan) plan = NULL;
            PolScheduleLimits limits = {(guint)(seed % 3), (guint)(seed / 3 % 3),
                                        (guint)(seed / 9 % 4)};

            plan = policy == POL_POLICY_CONSOLIDATE ? pol_plan_consolidate(c, NULL, NULL)
                   : policy == POL_POLICY_DRAIN     ? pol_plan_drain(c, "h00", NULL, NULL)
                                                    : pol_plan_balance(c, NULL, NULL);
            if (!plan)
                continue;
            for (guint fail = 0; fail <= 4; fail += 4) {
                g_autofree char *a = drive(c, plan->migrations, &limits, seed, fail);
                g_autofree char *b = drive(c, plan->migrations, &limits, seed, fail);
                /* The same input and the same ends give the same run. */
                assert_string_equal(a, b);
                runs++;
                with_failures += strchr(a, '!') != NULL;
                with_skips += strchr(a, '~') != NULL;
            }
        }
    }
    /* The runs covered what they claim to. */
    assert_true(runs > 600);
    assert_true(with_failures > 100);
    assert_true(with_skips > 10);
}

/* One default bandwidth: `migrate-vm plan` (the policies' default) and hotmigd's [scheduler]
 * bandwidth predict the same durations when nothing is configured. */
static void test_default_bandwidth_is_the_config_default(void **state)
{
    g_autoptr(HmConfig) config = hm_config_new();

    (void)state;
    assert_int_equal(hm_config_get_uint(config, HM_CONFIG_SCHEDULER_BANDWIDTH),
                     (guint64)POL_BANDWIDTH_MIB_S_DEFAULT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_bandwidth_is_the_config_default),
        cmocka_unit_test(test_failure_in_the_middle),
        cmocka_unit_test(test_failed_detour_skips_the_chain),
        cmocka_unit_test(test_detour_runs_in_order),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_priority_order),
        cmocka_unit_test(test_empty_plan),
        cmocka_unit_test(test_shared_limits),
        cmocka_unit_test(test_runs_an_evacuation_as_predicted),
        cmocka_unit_test(test_jobs_interleave),
        cmocka_unit_test(test_jobs_wait),
        cmocka_unit_test(test_jobs_held_room),
        cmocka_unit_test(test_jobs_shared),
        cmocka_unit_test(test_random_runs),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
