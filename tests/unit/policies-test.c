/* hm-policies unit tests: bounds, plans that never overcommit at any step, cycles broken by
 * one detour, minimum stay and pinning, jobs kept together, host states, determinism, and bad
 * cluster descriptions that change nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "policies/policies-priv.h"

static void add_host(PolCluster *c, const char *name, guint cpus, guint64 mem, guint vfs,
                     PolHostState state)
{
    g_autoptr(GError) error = NULL;

    assert_true(pol_cluster_add_host(c, name, cpus, mem, state, &error));
    assert_true(pol_cluster_set_host_vfs(c, name, NULL, vfs, -1, &error));
}

static void add_vm_full(PolCluster *c, const char *name, const char *host, guint vcpus,
                        guint64 mem, guint vfs, const char *job, gboolean pinned, gint64 ago)
{
    g_autoptr(GError) error = NULL;
    PolVmSpec spec = {.name = name,
                      .host = host,
                      .vcpus = vcpus,
                      .memory_mib = mem,
                      .cpu_util = 1.0,
                      .vfs = vfs,
                      .job = job,
                      .pinned = pinned,
                      .moved_ago_s = ago};

    assert_true(pol_cluster_add_vm(c, &spec, &error));
    assert_null(error);
}

static void add_vm(PolCluster *c, const char *name, const char *host, guint64 mem)
{
    add_vm_full(c, name, host, 1, mem, 0, NULL, FALSE, -1);
}

static void assert_verifies(const PolCluster *c, const PolPlan *plan, const PolOptions *opts)
{
    g_autoptr(GError) error = NULL;

    if (!pol_plan_verify(c, plan, opts, &error))
        fail_msg("plan does not verify: %s", error->message);
}

/* Where @vm ends up after @plan. */
static const char *final_host(const PolPlan *plan, const char *vm, const char *start)
{
    const char *where = start;

    for (guint i = 0; i < plan->migrations->len; i++) {
        const PolMigration *m = g_ptr_array_index(plan->migrations, i);
        if (g_str_equal(m->vm, vm))
            where = m->to;
    }
    return where;
}

static gboolean plan_moves(const PolPlan *plan, const char *vm)
{
    for (guint i = 0; i < plan->migrations->len; i++) {
        if (g_str_equal(((PolMigration *)g_ptr_array_index(plan->migrations, i))->vm, vm))
            return TRUE;
    }
    return FALSE;
}

/* ---- lower bound ------------------------------------------------------------------------- */

static void test_lower_bound_l2(void **state)
{
    const guint64 three_big[] = {6, 6, 6};
    const guint64 mixed[] = {7, 7, 7, 7, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    const guint64 halves[] = {5, 5, 5, 5};
    const guint64 big_small[] = {6, 6, 6, 4, 4, 4};
    const guint64 one[] = {10};

    assert_int_equal(pol_lower_bound_l2(three_big, 3, 10), 3); /* L1 says 2 */
    assert_int_equal(pol_lower_bound_l2(mixed, G_N_ELEMENTS(mixed), 10), 5);
    assert_int_equal(pol_lower_bound_l2(halves, 4, 10), 2);
    assert_int_equal(pol_lower_bound_l2(big_small, 6, 10), 3);
    assert_int_equal(pol_lower_bound_l2(one, 1, 10), 1);
    assert_int_equal(pol_lower_bound_l2(NULL, 0, 10), 0);
}

/* ---- consolidate ------------------------------------------------------------------------- */

static void test_consolidate_simple(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolPlan) plan = NULL;
    g_autoptr(GError) error = NULL;

    add_host(c, "h1", 8, 1000, 2, POL_HOST_OK);
    add_host(c, "h2", 8, 1000, 2, POL_HOST_OK);
    add_host(c, "h3", 8, 1000, 2, POL_HOST_OK);
    add_host(c, "h4", 8, 1000, 2, POL_HOST_OK);
    add_vm(c, "a", "h1", 400);
    add_vm(c, "b", "h2", 400);
    add_vm(c, "c", "h3", 400);
    add_vm(c, "d", "h4", 400);
    plan = pol_plan_consolidate(c, NULL, &error);
    assert_non_null(plan);
    assert_int_equal(plan->hosts_before, 4);
    assert_int_equal(plan->hosts_used, 2);
    assert_int_equal(plan->lower_bound, 2);
    assert_int_equal(plan->migrations->len, 2); /* fewest: one VM joins each kept host */
    assert_int_equal(plan->extra_moves, 0);
    assert_verifies(c, plan, NULL);
}

static void test_consolidate_nothing_to_do(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolPlan) plan = NULL;

    add_host(c, "h1", 8, 1000, 2, POL_HOST_OK);
    add_host(c, "h2", 8, 1000, 2, POL_HOST_OK);
    add_vm(c, "a", "h1", 900);
    add_vm(c, "b", "h2", 900);
    plan = pol_plan_consolidate(c, NULL, NULL);
    assert_non_null(plan);
    assert_int_equal(plan->migrations->len, 0);
    assert_int_equal(plan->hosts_used, 2);
}

/* splitmix64, so the random clusters are the same on every run. */
static guint64 next_random(guint64 *s)
{
    guint64 z = (*s += G_GUINT64_CONSTANT(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* A random cluster, feasible when packing @by_vcpus or not: unequal hosts, some states, VMs placed where they fit, a few
 * pinned, recently moved or in jobs. */
static PolCluster *random_cluster(guint64 seed, gboolean by_vcpus)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    guint64 s = seed;
    guint n_hosts = 3 + next_random(&s) % 18, n_vms = next_random(&s) % 80;
    g_autofree gint64 *room = g_new0(gint64, n_hosts * 3);

    for (guint h = 0; h < n_hosts; h++) {
        g_autofree char *name = g_strdup_printf("h%02u", h);
        guint cpus = 8 + next_random(&s) % 3 * 8, vfs = next_random(&s) % 6;
        guint64 mem = 4096 * (1 + next_random(&s) % 4);
        guint r = next_random(&s) % 10;
        PolHostState st = r == 0 ? POL_HOST_QUARANTINED : r == 1 ? POL_HOST_EVACUATING : POL_HOST_OK;

        add_host(c, name, cpus, mem, vfs, st);
        room[h * 3] = cpus * 1000;
        room[h * 3 + 1] = (gint64)mem;
        room[h * 3 + 2] = vfs;
    }
    for (guint v = 0; v < n_vms; v++) {
        g_autofree char *name = g_strdup_printf("vm%03u", v);
        g_autofree char *job = g_strdup_printf("job%u", (guint)(next_random(&s) % 5));
        guint vcpus = 1 + next_random(&s) % 4, vfs = next_random(&s) % 3 == 0;
        guint64 mem = 512 * (1 + next_random(&s) % 6);
        double util = (double)(next_random(&s) % 101) / 100.0;
        guint h0 = next_random(&s) % n_hosts, r = next_random(&s) % 20;
        gint64 cpu = by_vcpus ? vcpus * 1000 : (gint64)((double)vcpus * util * 1000.0 + 0.999);

        for (guint t = 0; t < n_hosts; t++) {
            guint h = (h0 + t) % n_hosts;
            g_autofree char *host = g_strdup_printf("h%02u", h);
            g_autoptr(GError) error = NULL;
            PolVmSpec spec = {.name = name, .host = host, .vcpus = vcpus, .memory_mib = mem,
                              .cpu_util = util, .vfs = vfs, .job = r < 8 ? job : NULL,
                              .pinned = r == 8, .moved_ago_s = r == 9 ? 30 : 100000};
            if (room[h * 3] < cpu || room[h * 3 + 1] < (gint64)mem || room[h * 3 + 2] < vfs)
                continue;
            room[h * 3] -= cpu;
            room[h * 3 + 1] -= (gint64)mem;
            room[h * 3 + 2] -= vfs;
            assert_true(pol_cluster_add_vm(c, &spec, &error));
            break;
        }
    }
    return g_steal_pointer(&c);
}

static gboolean has_evacuating(const PolCluster *c)
{
    for (guint v = 0; v < c->vms->len; v++) {
        const PolVm *vm = g_ptr_array_index(c->vms, v);
        if (((PolHost *)g_ptr_array_index(c->hosts, vm->host))->state == POL_HOST_EVACUATING)
            return TRUE;
    }
    return FALSE;
}

/* Every plan of every policy on many random clusters replays without a host ever exceeding a
 * capacity (pol_plan_verify replays independently of the planner's own bookkeeping), moves
 * no pinned or recently moved VM, and is the same when planned again. */
static void test_random_plans_never_overcommit(void **state)
{
    guint planned = 0;

    for (guint64 seed = 1; seed <= 300; seed++) {
        g_autoptr(PolCluster) c = random_cluster(seed, seed % 3 == 0);
        PolOptions opts;

        pol_options_init(&opts);
        opts.min_stay_s = 600;
        opts.keep_jobs_together = seed % 2;
        opts.pack_by_vcpus = seed % 3 == 0;
        for (PolPolicy policy = 0; policy < POL_POLICY_LAST; policy++) {
            g_autoptr(PolPlan) a = NULL;
            g_autoptr(PolPlan) b = NULL;
            g_autoptr(GError) error = NULL;
            g_autofree char *host = g_strdup_printf("h%02u", (guint)(seed % 3));

            if (policy == POL_POLICY_CONSOLIDATE) {
                a = pol_plan_consolidate(c, &opts, &error);
                b = pol_plan_consolidate(c, &opts, NULL);
            } else if (policy == POL_POLICY_DRAIN) {
                a = pol_plan_drain(c, host, &opts, &error);
                b = pol_plan_drain(c, host, &opts, NULL);
            } else {
                a = pol_plan_balance(c, &opts, &error);
                b = pol_plan_balance(c, &opts, NULL);
            }
            if (!a) {
                /* Only drain may refuse here (a blocked VM, no room elsewhere). */
                /* Consolidate only when the VMs of an evacuating host find no room. */
                if (policy == POL_POLICY_CONSOLIDATE && has_evacuating(c) &&
                    g_error_matches(error, POL_ERROR, POL_ERROR_NO_ROOM))
                    continue;
                if (policy != POL_POLICY_DRAIN)
                    fail_msg("seed %" G_GUINT64_FORMAT ": %s", seed, error->message);
                assert_int_equal(policy, POL_POLICY_DRAIN);
                assert_true(g_error_matches(error, POL_ERROR, POL_ERROR_BLOCKED) ||
                            g_error_matches(error, POL_ERROR, POL_ERROR_NO_ROOM));
                assert_null(b);
                continue;
            }
            assert_verifies(c, a, &opts);
            if (a->hosts_used < a->lower_bound)
                fail_msg("seed %" G_GUINT64_FORMAT " policy %d: %u hosts < bound %u", seed, policy, a->hosts_used, a->lower_bound);
            /* Never more hosts, unless an evacuating host's VMs need new ones. */
            if (policy == POL_POLICY_CONSOLIDATE && !has_evacuating(c))
                assert_true(a->hosts_used <= a->hosts_before);
            if (policy == POL_POLICY_DRAIN)
                for (guint i = 0; i < a->hosts->len; i++)
                    assert_string_not_equal(g_ptr_array_index(a->hosts, i), host);
            assert_int_equal(a->migrations->len, b->migrations->len);
            for (guint i = 0; i < a->migrations->len; i++) {
                PolMigration *x = g_ptr_array_index(a->migrations, i);
                PolMigration *y = g_ptr_array_index(b->migrations, i);
                assert_string_equal(x->vm, y->vm);
                assert_string_equal(x->from, y->from);
                assert_string_equal(x->to, y->to);
                assert_int_equal(x->extra, y->extra);
            }
            planned++;
        }
    }
    assert_true(planned > 600);
}

/* ---- cycles ------------------------------------------------------------------------------ */

static void test_cycle_broken_by_one_detour(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolProblem) p = NULL;
    g_autoptr(GPtrArray) moves = NULL;
    g_autoptr(PolPlan) plan = g_new0(PolPlan, 1);
    g_autoptr(GError) error = NULL;
    PolOptions opts;
    guint final[3];

    add_host(c, "A", 4, 100, 0, POL_HOST_OK);
    add_host(c, "B", 4, 100, 0, POL_HOST_OK);
    add_host(c, "C", 4, 200, 0, POL_HOST_OK);
    add_vm(c, "a", "A", 100);
    add_vm(c, "b", "B", 100);
    add_vm(c, "x", "C", 50);
    pol_options_init(&opts);
    p = pol_problem_new(c, &opts);
    /* Swap a and b: each waits for the other's host; C has room for a detour. */
    final[0] = 1;
    final[1] = 0;
    final[2] = 2;
    moves = pol_moves_order(p, final, &opts, &error);
    assert_non_null(moves);
    assert_int_equal(moves->len, 3);
    assert_true(((PolMigration *)g_ptr_array_index(moves, 0))->extra);
    assert_string_equal(((PolMigration *)g_ptr_array_index(moves, 0))->to, "C");
    plan->migrations = g_steal_pointer(&moves);
    plan->hosts = g_ptr_array_new();
    assert_verifies(c, plan, &opts);
    assert_string_equal(final_host(plan, "a", "A"), "B");
    assert_string_equal(final_host(plan, "b", "B"), "A");
}

static void test_cycle_without_room_fails(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolProblem) p = NULL;
    g_autoptr(GPtrArray) moves = NULL;
    g_autoptr(GError) error = NULL;
    PolOptions opts;
    const guint final[] = {1, 0, 2};

    add_host(c, "A", 4, 100, 0, POL_HOST_OK);
    add_host(c, "B", 4, 100, 0, POL_HOST_OK);
    add_host(c, "C", 4, 100, 0, POL_HOST_OK);
    add_vm(c, "a", "A", 100);
    add_vm(c, "b", "B", 100);
    add_vm(c, "x", "C", 60); /* C cannot hold a or b meanwhile */
    pol_options_init(&opts);
    p = pol_problem_new(c, &opts);
    moves = pol_moves_order(p, final, &opts, &error);
    assert_null(moves);
    assert_true(g_error_matches(error, POL_ERROR, POL_ERROR_NO_ROOM));
}

/* ---- min stay, pinning, jobs, states ----------------------------------------------------- */

static void test_min_stay_respected(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolPlan) plan = NULL;
    g_autoptr(PolPlan) drain = NULL;
    g_autoptr(GError) error = NULL;
    PolOptions opts;

    add_host(c, "h1", 8, 1000, 0, POL_HOST_OK);
    add_host(c, "h2", 8, 1000, 0, POL_HOST_OK);
    add_host(c, "h3", 8, 1000, 0, POL_HOST_OK);
    add_vm_full(c, "recent", "h1", 1, 300, 0, NULL, FALSE, 60); /* moved a minute ago */
    add_vm(c, "old1", "h2", 300);
    add_vm(c, "old2", "h3", 300);
    add_vm_full(c, "pinned", "h3", 1, 100, 0, NULL, TRUE, -1);
    pol_options_init(&opts);
    opts.min_stay_s = 300;
    plan = pol_plan_consolidate(c, &opts, &error);
    assert_non_null(plan);
    assert_false(plan_moves(plan, "recent"));
    assert_false(plan_moves(plan, "pinned"));
    assert_int_equal(plan->hosts_used, 2); /* h1 and h3 must stay; old1 joins one of them */
    assert_int_equal(plan->migrations->len, 1);
    assert_verifies(c, plan, &opts);

    drain = pol_plan_drain(c, "h1", &opts, &error);
    assert_null(drain);
    assert_true(g_error_matches(error, POL_ERROR, POL_ERROR_BLOCKED));
    assert_non_null(strstr(error->message, "'recent'"));
    g_clear_error(&error);

    /* Past the minimum stay it moves. */
    opts.min_stay_s = 30;
    drain = pol_plan_drain(c, "h1", &opts, &error);
    assert_non_null(drain);
    assert_true(plan_moves(drain, "recent"));
    assert_verifies(c, drain, &opts);
}

static void test_jobs_kept_together(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolPlan) plan = NULL;
    PolOptions opts;
    const char *where;

    add_host(c, "h1", 16, 1000, 4, POL_HOST_OK);
    add_host(c, "h2", 16, 1000, 4, POL_HOST_OK);
    add_host(c, "h3", 16, 1000, 4, POL_HOST_OK);
    add_vm_full(c, "r0", "h1", 2, 200, 1, "mpi", FALSE, -1);
    add_vm_full(c, "r1", "h1", 2, 200, 1, "mpi", FALSE, -1);
    add_vm_full(c, "r2", "h1", 2, 200, 1, "mpi", FALSE, -1);
    add_vm(c, "big", "h2", 500);
    add_vm(c, "small", "h3", 300);
    pol_options_init(&opts);
    opts.keep_jobs_together = TRUE;
    plan = pol_plan_consolidate(c, &opts, NULL);
    assert_non_null(plan);
    assert_verifies(c, plan, &opts);
    where = final_host(plan, "r0", "h1");
    assert_string_equal(final_host(plan, "r1", "h1"), where);
    assert_string_equal(final_host(plan, "r2", "h1"), where);
    assert_int_equal(plan->hosts_used, 2);
}

/* A drain lists the moves of one job's VMs one after the other, where the job's first move
 * is; VMs without a job keep their places. */
static void test_drain_groups_jobs(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolPlan) drain = NULL;
    g_autoptr(GString) order = g_string_new(NULL);

    add_host(c, "h1", 16, 4000, 8, POL_HOST_OK);
    add_host(c, "h2", 16, 4000, 8, POL_HOST_OK);
    add_vm_full(c, "j1", "h1", 1, 500, 0, "mpi", FALSE, -1);
    add_vm(c, "x", "h1", 400);
    add_vm_full(c, "k1", "h1", 1, 300, 0, "other", FALSE, -1);
    add_vm_full(c, "j2", "h1", 1, 200, 0, "mpi", FALSE, -1);
    add_vm(c, "y", "h1", 150);
    add_vm_full(c, "k2", "h1", 1, 100, 0, "other", FALSE, -1);
    drain = pol_plan_drain(c, "h1", NULL, NULL);
    assert_non_null(drain);
    assert_verifies(c, drain, NULL);
    for (guint i = 0; i < drain->migrations->len; i++)
        g_string_append_printf(order, "%s%s", i ? " " : "",
                               ((PolMigration *)g_ptr_array_index(drain->migrations, i))->vm);
    assert_string_equal(order->str, "j1 j2 x k1 k2 y");
}

static void test_host_states(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolPlan) plan = NULL;
    g_autoptr(GError) error = NULL;

    add_host(c, "ok1", 8, 1000, 0, POL_HOST_OK);
    add_host(c, "quar", 8, 1000, 0, POL_HOST_QUARANTINED);
    add_host(c, "evac", 8, 1000, 0, POL_HOST_EVACUATING);
    add_host(c, "down", 8, 1000, 0, POL_HOST_DOWN);
    add_host(c, "ok2", 8, 1000, 0, POL_HOST_OK);
    add_vm(c, "a", "ok1", 500);
    add_vm(c, "e", "evac", 400);
    add_vm(c, "d", "down", 400);
    add_vm(c, "q", "quar", 100);
    plan = pol_plan_balance(c, NULL, &error);
    assert_non_null(plan);
    assert_verifies(c, plan, NULL);
    assert_false(plan_moves(plan, "q"));
    assert_true(plan_moves(plan, "e"));         /* evacuating: always leaves */
    assert_false(plan_moves(plan, "d"));        /* down: cannot be live-migrated */
    for (guint i = 0; i < plan->migrations->len; i++) {
        PolMigration *m = g_ptr_array_index(plan->migrations, i);
        assert_string_not_equal(m->to, "quar"); /* quarantined: accepts nothing */
        assert_string_not_equal(m->to, "down");
    }
    g_clear_pointer(&plan, pol_plan_free);
    plan = pol_plan_consolidate(c, NULL, &error);
    assert_non_null(plan);
    assert_verifies(c, plan, NULL);
    assert_string_equal(final_host(plan, "e", "evac"), "ok1");
    assert_false(plan_moves(plan, "q")); /* quarantined: keeps its VMs */
    assert_int_equal(plan->hosts_used, 2); /* ok1 and quar; a host that is down is not counted */
    g_clear_pointer(&plan, pol_plan_free);
    assert_null(pol_plan_drain(c, "down", NULL, &error));
    assert_true(g_error_matches(error, POL_ERROR, POL_ERROR_BLOCKED));
}

static void test_balance_lowers_peak(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolPlan) plan = NULL;

    add_host(c, "h1", 8, 1000, 0, POL_HOST_OK);
    add_host(c, "h2", 8, 1000, 0, POL_HOST_OK);
    for (guint i = 0; i < 8; i++) {
        g_autofree char *name = g_strdup_printf("v%u", i);
        add_vm(c, name, "h1", 100);
    }
    plan = pol_plan_balance(c, NULL, NULL);
    assert_non_null(plan);
    assert_verifies(c, plan, NULL);
    assert_int_equal(plan->migrations->len, 4);
    assert_true(plan->max_load_after < plan->max_load_before);
}

static void test_drain_no_room(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GError) error = NULL;

    add_host(c, "h1", 8, 1000, 0, POL_HOST_OK);
    add_host(c, "h2", 8, 1000, 0, POL_HOST_OK);
    add_vm(c, "a", "h1", 600);
    add_vm(c, "b", "h2", 600);
    add_host(c, "q", 8, 4000, 0, POL_HOST_QUARANTINED);
    assert_null(pol_plan_drain(c, "h1", NULL, &error));
    assert_true(g_error_matches(error, POL_ERROR, POL_ERROR_NO_ROOM));
    /* The message says, host by host, what is short. */
    assert_string_equal(error->message,
                        "cannot drain 'h1': no host has room for VM 'a' (1 vCPUs, 600 MiB, 0 VFs): "
                        "h2: 600 MiB needed, 400 free; q: quarantined");
    g_clear_error(&error);
    assert_null(pol_plan_drain(c, "nope", NULL, &error));
    assert_true(g_error_matches(error, POL_ERROR, POL_ERROR_NOT_FOUND));
}

/* [scheduler] cpu-allocation: a host takes CPU demand up to its CPUs x the percent. */
static void test_cpu_allocation(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(PolPlan) plan = NULL;
    PolOptions opts;

    add_host(c, "h1", 2, 1000, 0, POL_HOST_OK);
    add_host(c, "h2", 2, 1000, 0, POL_HOST_OK);
    add_vm(c, "a", "h1", 100);
    add_vm(c, "b", "h1", 100);
    add_vm(c, "c", "h2", 100);
    add_vm(c, "d", "h2", 100);
    pol_options_init(&opts);
    assert_int_equal(opts.cpu_allocation, 100); /* the configuration's default */
    assert_null(pol_plan_drain(c, "h1", &opts, &error));
    assert_true(g_error_matches(error, POL_ERROR, POL_ERROR_NO_ROOM));
    assert_non_null(strstr(error->message, "h2: CPU 1.00 needed, 0.00 free"));
    g_clear_error(&error);
    opts.cpu_allocation = 150; /* 3 CPUs of demand: one more VM */
    assert_null(pol_plan_drain(c, "h1", &opts, &error));
    assert_non_null(strstr(error->message, "h2: CPU 1.00 needed, 0.00 free"));
    g_clear_error(&error);
    opts.cpu_allocation = 200;
    plan = pol_plan_drain(c, "h1", &opts, &error);
    assert_non_null(plan);
    assert_int_equal(plan->migrations->len, 2);
    assert_verifies(c, plan, &opts);
    /* The same plan is refused against the default allocation. */
    opts.cpu_allocation = 100;
    assert_false(pol_plan_verify(c, plan, &opts, &error));
}

/* ---- bad input --------------------------------------------------------------------------- */

static void test_bad_input_changes_nothing(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GError) error = NULL;
    PolVmSpec spec = {.name = "v", .host = "nope", .vcpus = 1, .memory_mib = 1, .cpu_util = 0.5};

    add_host(c, "h1", 8, 1000, 0, POL_HOST_OK);
    assert_false(pol_cluster_add_host(c, "h1", 8, 1000, POL_HOST_OK, &error));
    assert_non_null(strstr(error->message, "'h1'"));
    g_clear_error(&error);
    assert_false(pol_cluster_add_host(c, "", 8, 1000, POL_HOST_OK, &error));
    g_clear_error(&error);
    assert_false(pol_cluster_add_host(c, "big", POL_CPUS_MAX + 1, 1000, POL_HOST_OK, &error));
    assert_non_null(strstr(error->message, "cpus"));
    g_clear_error(&error);

    assert_false(pol_cluster_add_vm(c, &spec, &error));
    assert_true(g_error_matches(error, POL_ERROR, POL_ERROR_NOT_FOUND));
    assert_non_null(strstr(error->message, "unknown host 'nope'"));
    g_clear_error(&error);
    spec.host = "h1";
    spec.cpu_util = -0.1;
    assert_false(pol_cluster_add_vm(c, &spec, &error));
    assert_non_null(strstr(error->message, "cpu_util"));
    g_clear_error(&error);
    spec.cpu_util = 0.5;
    spec.vcpus = 0;
    assert_false(pol_cluster_add_vm(c, &spec, &error));
    assert_non_null(strstr(error->message, "vcpus"));
    g_clear_error(&error);
    spec.vcpus = 1;
    spec.memory_mib = POL_MEMORY_MIB_MAX + 1;
    assert_false(pol_cluster_add_vm(c, &spec, &error));
    assert_non_null(strstr(error->message, "memory_mib"));
    g_clear_error(&error);
    assert_int_equal(pol_cluster_get_n_hosts(c), 1);
    assert_int_equal(pol_cluster_get_n_vms(c), 0);

    spec.memory_mib = 1;
    assert_true(pol_cluster_add_vm(c, &spec, &error));
    assert_false(pol_cluster_add_vm(c, &spec, &error));
    assert_non_null(strstr(error->message, "listed twice"));
    assert_int_equal(pol_cluster_get_n_vms(c), 1);
}

static void test_state_strings(void **state)
{
    for (int s = 0; s < POL_HOST_STATE_LAST; s++)
        assert_int_equal(pol_host_state_from_string(pol_host_state_to_string(s)), s);
    assert_int_equal(pol_host_state_from_string("sleeping"), -1);
    assert_string_equal(pol_policy_to_string(POL_POLICY_DRAIN), "drain");
}

/* ---- the oracle ---------------------------------------------------------------------------- */

/* pol_plan_verify() is the oracle behind every "never overcommits" claim: each kind of bad
 * plan must be refused with POL_ERROR_INVALID naming its step, and a good plan accepted. */
static void expect_refused(const PolCluster *c, const char *what, const char *want,
                           const char *const *steps)
{
    g_autoptr(PolPlan) plan = g_new0(PolPlan, 1);
    g_autoptr(GError) error = NULL;

    plan->migrations = g_ptr_array_new_with_free_func((GDestroyNotify)pol_migration_free);
    for (guint i = 0; steps[i]; i += 3) {
        PolMigration *m = g_new0(PolMigration, 1);

        m->vm = g_strdup(steps[i]);
        m->from = g_strdup(steps[i + 1]);
        m->to = g_strdup(steps[i + 2]);
        m->memory_mib = 1;
        g_ptr_array_add(plan->migrations, m);
    }
    if (!want) {
        if (!pol_plan_verify(c, plan, NULL, &error))
            fail_msg("%s: a good plan was refused: %s", what, error->message);
        return;
    }
    if (pol_plan_verify(c, plan, NULL, &error))
        fail_msg("%s: the bad plan verified", what);
    assert_true(g_error_matches(error, POL_ERROR, POL_ERROR_INVALID));
    if (!strstr(error->message, want))
        fail_msg("%s: error '%s' does not say '%s'", what, error->message, want);
}

static void test_verify_refuses_bad_plans(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    const char *good[] = {"small", "h1", "h2", NULL};
    const char *overcommit[] = {"big1", "h1", "h2", NULL};
    const char *late_overcommit[] = {"small", "h1", "h2", "big1", "h1", "h2", NULL};
    const char *vfs[] = {"vf2", "h1", "h2", NULL};
    const char *unknown_vm[] = {"ghost", "h1", "h2", NULL};
    const char *unknown_host[] = {"small", "h1", "h9", NULL};
    const char *wrong_from[] = {"small", "h2", "h1", NULL};
    const char *stays[] = {"small", "h1", "h1", NULL};
    const char *quarantined[] = {"small", "h1", "hq", NULL};
    const char *pinned[] = {"pin", "h1", "h2", NULL};
    const char *twice[] = {"small", "h1", "h2", "small", "h2", "h1", NULL};

    (void)state;
    add_host(c, "h1", 8, 8192, 2, POL_HOST_OK);
    add_host(c, "h2", 8, 8192, 2, POL_HOST_OK);
    add_host(c, "hq", 8, 8192, 2, POL_HOST_QUARANTINED);
    add_vm(c, "big1", "h1", 6000);
    add_vm(c, "big2", "h2", 6000);
    add_vm(c, "small", "h1", 2000);
    add_vm_full(c, "vf2", "h1", 1, 10, 2, NULL, FALSE, -1);
    add_vm_full(c, "pin", "h1", 1, 10, 0, NULL, TRUE, -1);

    expect_refused(c, "good", NULL, good);
    expect_refused(c, "memory overcommit", "overcommits 'h2'", overcommit);
    /* Only the second step overcommits (the first fills h2 further): its number is named. */
    expect_refused(c, "overcommit at step 2", "step 2: VM 'big1' overcommits 'h2'", late_overcommit);
    add_vm_full(c, "vf2b", "h2", 1, 10, 1, NULL, FALSE, -1);
    expect_refused(c, "VF overcommit", "overcommits 'h2'", vfs);
    expect_refused(c, "unknown VM", "unknown VM or host", unknown_vm);
    expect_refused(c, "unknown host", "unknown VM or host", unknown_host);
    expect_refused(c, "wrong source", "is on 'h1', not 'h2'", wrong_from);
    expect_refused(c, "no move", "or stays", stays);
    expect_refused(c, "quarantined destination", "accepts no VMs", quarantined);
    expect_refused(c, "pinned VM", "pinned", pinned);
    expect_refused(c, "second move", "moves again", twice);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lower_bound_l2),
        cmocka_unit_test(test_verify_refuses_bad_plans),
        cmocka_unit_test(test_consolidate_simple),
        cmocka_unit_test(test_consolidate_nothing_to_do),
        cmocka_unit_test(test_random_plans_never_overcommit),
        cmocka_unit_test(test_cycle_broken_by_one_detour),
        cmocka_unit_test(test_cycle_without_room_fails),
        cmocka_unit_test(test_min_stay_respected),
        cmocka_unit_test(test_jobs_kept_together),
        cmocka_unit_test(test_drain_groups_jobs),
        cmocka_unit_test(test_host_states),
        cmocka_unit_test(test_balance_lowers_peak),
        cmocka_unit_test(test_drain_no_room),
        cmocka_unit_test(test_cpu_allocation),
        cmocka_unit_test(test_bad_input_changes_nothing),
        cmocka_unit_test(test_state_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
