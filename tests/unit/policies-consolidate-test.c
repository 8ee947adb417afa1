/* hm-policies unit tests for consolidation that counts migrations: the migration lower bound
 * against an exhaustive search on small clusters (never above the true minimum, and above the
 * "empty the hosts with the fewest VMs" count where the kept hosts cannot take the VMs), the
 * host value trading hosts for migrations, the cap, moved memory breaking ties, and the errors
 * for clusters already over capacity and caps no plan meets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "policies/policies-priv.h"

/* The bound at @k hosts, G_MAXUINT when no placement on @k hosts can exist. */
static guint bound_at(const PolCluster *c, const PolOptions *opts, guint k)
{
    g_autoptr(GError) error = NULL;
    guint bound = 0;

    if (!pol_cluster_migration_bound(c, opts, k, &bound, &error)) {
        assert_true(g_error_matches(error, POL_ERROR, POL_ERROR_NO_ROOM));
        return G_MAXUINT;
    }
    return bound;
}

static guint64 next_random(guint64 *s)
{
    guint64 z = (*s += G_GUINT64_CONSTANT(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static void add_host(PolCluster *c, const char *name, guint64 mem, guint vfs, PolHostState st)
{
    g_autoptr(GError) error = NULL;

    assert_true(pol_cluster_add_host(c, name, 64, mem, st, &error));
    assert_true(pol_cluster_set_host_vfs(c, name, NULL, vfs, -1, &error));
}

static void add_vm(PolCluster *c, const char *name, const char *host, guint64 mem, guint vfs)
{
    g_autoptr(GError) error = NULL;
    PolVmSpec spec = {.name = name, .host = host, .vcpus = 1, .memory_mib = mem,
                      .cpu_util = 0.0, .vfs = vfs, .moved_ago_s = -1};

    assert_true(pol_cluster_add_vm(c, &spec, &error));
}

#define EX_HOSTS_MAX 4
#define EX_VMS_MAX 8

typedef struct {
    guint n_hosts, n_vms;
    guint64 cap_mem[EX_HOSTS_MAX];
    guint cap_vfs[EX_HOSTS_MAX];
    guint64 mem[EX_VMS_MAX];
    guint vfs[EX_VMS_MAX];
    guint home[EX_VMS_MAX];
} Instance;

/* A small random cluster: memory and VFs tight, VMs placed where they fit (first the drawn
 * host, then the next ones), so that some hosts are nearly full. */
static PolCluster *instance_make(guint64 seed, Instance *in)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    guint64 s = seed;
    guint64 used_mem[EX_HOSTS_MAX] = {0};
    guint used_vfs[EX_HOSTS_MAX] = {0};

    in->n_hosts = 3 + next_random(&s) % 2;
    in->n_vms = 0;
    for (guint h = 0; h < in->n_hosts; h++) {
        g_autofree char *name = g_strdup_printf("h%u", h);
        in->cap_mem[h] = 4096 * (3 + next_random(&s) % 2);
        in->cap_vfs[h] = 2 + next_random(&s) % 3;
        add_host(c, name, in->cap_mem[h], in->cap_vfs[h], POL_HOST_OK);
    }
    for (guint v = 0, tries = 5 + next_random(&s) % 4; v < tries; v++) {
        guint64 mem = 1024 * (1 + next_random(&s) % 6);
        guint vfs = next_random(&s) % 3 == 0 ? 1 + next_random(&s) % 2 : 0;
        guint h0 = next_random(&s) % in->n_hosts;

        for (guint t = 0; t < in->n_hosts; t++) {
            guint h = (h0 + t) % in->n_hosts;
            g_autofree char *name = g_strdup_printf("v%u", in->n_vms);
            g_autofree char *host = g_strdup_printf("h%u", h);
            if (used_mem[h] + mem > in->cap_mem[h] || used_vfs[h] + vfs > in->cap_vfs[h])
                continue;
            used_mem[h] += mem;
            used_vfs[h] += vfs;
            in->mem[in->n_vms] = mem;
            in->vfs[in->n_vms] = vfs;
            in->home[in->n_vms] = h;
            add_vm(c, name, host, mem, vfs);
            in->n_vms++;
            break;
        }
    }
    return g_steal_pointer(&c);
}

/* Fewest migrations (VMs not on their home host) over every placement that fits, for each
 * number of hosts used; G_MAXUINT where none fits. */
static void exhaustive(const Instance *in, guint *best)
{
    guint assign[EX_VMS_MAX] = {0};
    guint64 total = 1;

    for (guint k = 0; k <= EX_HOSTS_MAX; k++)
        best[k] = G_MAXUINT;
    for (guint v = 0; v < in->n_vms; v++)
        total *= in->n_hosts;
    for (guint64 code = 0; code < total; code++) {
        guint64 mem[EX_HOSTS_MAX] = {0}, x = code;
        guint vfs[EX_HOSTS_MAX] = {0}, n[EX_HOSTS_MAX] = {0}, used = 0, moves = 0;
        gboolean fits = TRUE;

        for (guint v = 0; v < in->n_vms; v++) {
            assign[v] = x % in->n_hosts;
            x /= in->n_hosts;
            mem[assign[v]] += in->mem[v];
            vfs[assign[v]] += in->vfs[v];
            n[assign[v]]++;
            moves += assign[v] != in->home[v];
        }
        for (guint h = 0; h < in->n_hosts; h++) {
            fits &= mem[h] <= in->cap_mem[h] && vfs[h] <= in->cap_vfs[h];
            used += n[h] > 0;
        }
        if (fits)
            best[used] = MIN(best[used], moves);
    }
}

/* "Empty the hosts with the fewest VMs": the count the bound must be at least. */
static guint naive_bound(const Instance *in, guint k)
{
    guint n[EX_HOSTS_MAX] = {0}, sum = 0;

    for (guint v = 0; v < in->n_vms; v++)
        n[in->home[v]]++;
    for (guint i = 0; i < in->n_hosts; i++) {
        for (guint j = i + 1; j < in->n_hosts; j++) {
            if (n[j] < n[i]) {
                guint t = n[i];
                n[i] = n[j];
                n[j] = t;
            }
        }
    }
    for (guint i = 0; i + k < in->n_hosts; i++)
        sum += n[i];
    return sum;
}

/* On 400 random small clusters: the bound at each host count is never above the true
 * minimum (exhaustive search over every placement), never below the naive count, and above
 * it on some instances (it accounts for what the kept hosts can take); the plan's migrations
 * are never below the true minimum at its host count, and its bound is the bound there. */
static void test_migration_bound_exhaustive(void **state)
{
    guint stronger = 0, exact = 0, checked = 0;

    for (guint64 seed = 1; seed <= 400; seed++) {
        Instance in;
        g_autoptr(PolCluster) c = instance_make(seed, &in);
        g_autoptr(PolPlan) plan = NULL;
        g_autoptr(GError) error = NULL;
        guint best[EX_HOSTS_MAX + 1];
        PolOptions opts;
        guint moved = 0;

        pol_options_init(&opts);
        exhaustive(&in, best);
        for (guint k = 1; k <= in.n_hosts; k++) {
            guint bound = bound_at(c, &opts, k);
            if (best[k] == G_MAXUINT)
                continue;
            checked++;
            if (bound > best[k])
                fail_msg("seed %" G_GUINT64_FORMAT ", %u hosts: bound %u > the minimum %u",
                         seed, k, bound, best[k]);
            if (bound < naive_bound(&in, k))
                fail_msg("seed %" G_GUINT64_FORMAT ", %u hosts: bound %u < naive %u", seed, k,
                         bound, naive_bound(&in, k));
            stronger += bound > naive_bound(&in, k);
            exact += bound == best[k];
        }
        plan = pol_plan_consolidate(c, &opts, &error);
        if (!plan)
            fail_msg("seed %" G_GUINT64_FORMAT ": %s", seed, error->message);
        assert_true(pol_plan_verify(c, plan, &opts, NULL));
        for (guint i = 0; i < plan->migrations->len; i++)
            moved += !((PolMigration *)g_ptr_array_index(plan->migrations, i))->extra;
        assert_true(best[plan->hosts_used] != G_MAXUINT);
        assert_true(moved >= best[plan->hosts_used]);
        assert_int_equal(plan->migration_bound, bound_at(c, &opts, plan->hosts_used));
    }
    print_message("bound checked at %u host counts: equal to the minimum at %u, above the naive count at %u\n",
                  checked, exact, stronger);
    assert_true(stronger > 0);
}

/* Three hosts of 10 GiB: a (8 x 1 GiB), b (8 x 1 GiB), c (2 x 1 GiB). Freeing c costs two
 * migrations: worth it at a host value of 5, not at 1. */
static PolCluster *tradeoff_cluster(void)
{
    PolCluster *c = pol_cluster_new();

    add_host(c, "a", 10240, 0, POL_HOST_OK);
    add_host(c, "b", 10240, 0, POL_HOST_OK);
    add_host(c, "c", 10240, 0, POL_HOST_OK);
    for (guint i = 0; i < 8; i++) {
        g_autofree char *x = g_strdup_printf("a%u", i);
        g_autofree char *y = g_strdup_printf("b%u", i);
        add_vm(c, x, "a", 1024, 0);
        add_vm(c, y, "b", 1024, 0);
    }
    add_vm(c, "c0", "c", 1024, 0);
    add_vm(c, "c1", "c", 1024, 0);
    return c;
}

static void test_host_value_tradeoff(void **state)
{
    g_autoptr(PolCluster) c = tradeoff_cluster();
    g_autoptr(PolPlan) cheap = NULL;
    g_autoptr(PolPlan) worth = NULL;
    PolOptions opts;

    pol_options_init(&opts);
    opts.host_value = 1;
    cheap = pol_plan_consolidate(c, &opts, NULL);
    assert_non_null(cheap);
    assert_int_equal(cheap->hosts_used, 3);
    assert_int_equal(cheap->migrations->len, 0);
    /* The front: 2 hosts for 2 migrations, 3 hosts for none; the chosen point marked. */
    assert_int_equal(cheap->front->len, 2);
    assert_int_equal(g_array_index(cheap->front, PolFrontPoint, 0).hosts, 2);
    assert_int_equal(g_array_index(cheap->front, PolFrontPoint, 0).migrations, 2);
    assert_int_equal(g_array_index(cheap->front, PolFrontPoint, 0).moved_mib, 2048);
    assert_int_equal(g_array_index(cheap->front, PolFrontPoint, 0).migration_bound, 2);
    assert_int_equal(cheap->front_chosen, 1);

    opts.host_value = 5;
    worth = pol_plan_consolidate(c, &opts, NULL);
    assert_non_null(worth);
    assert_int_equal(worth->hosts_used, 2);
    assert_int_equal(worth->migrations->len, 2);
    assert_int_equal(worth->migration_bound, 2);
    assert_int_equal(worth->moved_mib, 2048);
    assert_int_equal(worth->front_chosen, 0);
    assert_true(pol_plan_verify(c, worth, &opts, NULL));
}

/* With a cap of one migration, freeing c (two) is out: the plan keeps three hosts. */
static void test_max_migrations(void **state)
{
    g_autoptr(PolCluster) c = tradeoff_cluster();
    g_autoptr(PolPlan) plan = NULL;
    PolOptions opts;

    pol_options_init(&opts);
    opts.max_migrations = 1;
    plan = pol_plan_consolidate(c, &opts, NULL);
    assert_non_null(plan);
    assert_int_equal(plan->hosts_used, 3);
    assert_int_equal(plan->migrations->len, 0);
    assert_int_equal(plan->max_migrations, 1);
}

/* An evacuating host's three VMs must move: a cap of two fails naming them, and nothing is
 * returned. */
static void test_over_cap_names_vms(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolPlan) plan = NULL;
    g_autoptr(GError) error = NULL;
    PolOptions opts;

    add_host(c, "a", 10240, 0, POL_HOST_OK);
    add_host(c, "e", 10240, 0, POL_HOST_EVACUATING);
    add_vm(c, "e1", "e", 1024, 0);
    add_vm(c, "e2", "e", 1024, 0);
    add_vm(c, "e3", "e", 1024, 0);
    pol_options_init(&opts);
    opts.max_migrations = 2;
    plan = pol_plan_consolidate(c, &opts, &error);
    assert_null(plan);
    assert_true(g_error_matches(error, POL_ERROR, POL_ERROR_OVER_CAP));
    assert_non_null(strstr(error->message, "3 VMs must leave evacuating hosts: 'e1' on 'e', 'e2' on 'e', 'e3' on 'e'"));
}

/* c keeps its three VMs; a (2 x 1 GiB) or b (2 x 4 GiB) must go: two migrations either way,
 * the plan moves a's 2 GiB rather than b's 8. */
static void test_moved_memory_breaks_ties(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolPlan) plan = NULL;
    PolOptions opts;

    add_host(c, "a", 16384, 0, POL_HOST_OK);
    add_host(c, "b", 16384, 0, POL_HOST_OK);
    add_host(c, "c", 16384, 0, POL_HOST_OK);
    add_vm(c, "a1", "a", 1024, 0);
    add_vm(c, "a2", "a", 1024, 0);
    add_vm(c, "b1", "b", 4096, 0);
    add_vm(c, "b2", "b", 4096, 0);
    add_vm(c, "c1", "c", 4096, 0);
    add_vm(c, "c2", "c", 4096, 0);
    add_vm(c, "c3", "c", 4096, 0);
    pol_options_init(&opts);
    plan = pol_plan_consolidate(c, &opts, NULL);
    assert_non_null(plan);
    assert_int_equal(plan->hosts_used, 2);
    assert_int_equal(plan->migrations->len, 2);
    assert_int_equal(plan->moved_mib, 2048);
    for (guint i = 0; i < plan->migrations->len; i++)
        assert_string_equal(((PolMigration *)g_ptr_array_index(plan->migrations, i))->from, "a");
}

/* Hosts of 10 GiB: a {6}, b {6}, c {4, 4}. Two hosts suffice ({6, 4} twice) but keeping c and
 * a leaves rooms of 2 and 4 for b's 6: one of c's VMs moves to a first (an ejection, not a
 * repack), two migrations in all. The naive bound says 1 (b's VM); the kept hosts cannot take
 * a 6, so one of them must shed a VM: the bound is 2, and the plan meets it. */
static void test_ejection_meets_stronger_bound(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolPlan) plan = NULL;
    PolOptions opts;

    add_host(c, "a", 10240, 0, POL_HOST_OK);
    add_host(c, "b", 10240, 0, POL_HOST_OK);
    add_host(c, "c", 10240, 0, POL_HOST_OK);
    add_vm(c, "a6", "a", 6144, 0);
    add_vm(c, "b6", "b", 6144, 0);
    add_vm(c, "c4", "c", 4096, 0);
    add_vm(c, "c4b", "c", 4096, 0);
    pol_options_init(&opts);
    assert_int_equal(bound_at(c, &opts, 2), 2);
    plan = pol_plan_consolidate(c, &opts, NULL);
    assert_non_null(plan);
    assert_true(pol_plan_verify(c, plan, &opts, NULL));
    assert_int_equal(plan->hosts_used, 2);
    assert_int_equal(plan->migrations->len, 2);
    assert_int_equal(plan->extra_moves, 0);
    assert_int_equal(plan->migration_bound, 2);
}

/* A host already over a capacity: nothing is planned, the error names the host and the
 * dimension. */
static void test_over_capacity_rejected(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolPlan) plan = NULL;
    g_autoptr(GError) error = NULL;

    add_host(c, "a", 4096, 1, POL_HOST_OK);
    add_host(c, "b", 4096, 1, POL_HOST_OK);
    add_vm(c, "x", "a", 3072, 1);
    add_vm(c, "y", "a", 2048, 1);
    add_vm(c, "z", "b", 1024, 0);
    plan = pol_plan_consolidate(c, NULL, &error);
    assert_null(plan);
    assert_true(g_error_matches(error, POL_ERROR, POL_ERROR_INVALID));
    assert_non_null(strstr(error->message, "host 'a' memory (MiB) 5120 > 4096"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_migration_bound_exhaustive),
        cmocka_unit_test(test_host_value_tradeoff),
        cmocka_unit_test(test_max_migrations),
        cmocka_unit_test(test_over_cap_names_vms),
        cmocka_unit_test(test_moved_memory_breaks_ties),
        cmocka_unit_test(test_ejection_meets_stronger_bound),
        cmocka_unit_test(test_over_capacity_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
