/* Snapshot parsing and plan formatting (engine/snapshot.c): good snapshots, bad ones
 * rejected with the field named, and the same snapshot always giving the same plan bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/plan-json.h"
#include "engine/snapshot.h"

#define GOOD                                                                                   \
    "{\"hosts\":[{\"name\":\"h1\",\"cpus\":16,\"memory_mib\":8192,\"vfs\":4},"                  \
    "{\"name\":\"h2\",\"cpus\":16,\"memory_mib\":8192,\"vfs\":4,\"running_vms\":1},"           \
    "{\"name\":\"h3\",\"cpus\":16,\"memory_mib\":8192,\"vfs\":4,\"state\":\"ok\"}],"            \
    "\"vms\":[{\"name\":\"a\",\"host\":\"h1\",\"vcpus\":4,\"memory_mib\":2048,\"cpu_util\":0.5,\"vfs\":1},"  \
    "{\"name\":\"b\",\"host\":\"h2\",\"vcpus\":4,\"memory_mib\":2048,\"cpu_util\":0.25,\"vfs\":1}," \
    "{\"name\":\"c\",\"host\":\"h3\",\"vcpus\":2,\"memory_mib\":4096,\"cpu_util\":1,\"vfs\":0,\"cpu_measured\":true}]}"

static PolCluster *parse(const char *text, GError **error)
{
    return orch_snapshot_parse(text, strlen(text), "t.json", error);
}

static void test_good_snapshot(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(PolCluster) c = parse(GOOD, &error);
    g_autoptr(PolPlan) plan = NULL;
    g_autofree char *json = NULL;

    assert_non_null(c);
    assert_int_equal(pol_cluster_get_n_hosts(c), 3);
    assert_int_equal(pol_cluster_get_n_vms(c), 3);
    plan = pol_plan_consolidate(c, NULL, &error);
    assert_non_null(plan);
    assert_int_equal(plan->hosts_used, 1);
    json = orch_plan_format_json(plan, FALSE, TRUE);
    assert_non_null(strstr(json, "\"migrations\":[{\"vm\":"));
    assert_non_null(strstr(json, "\"hosts_used\":1"));
    assert_non_null(strstr(json, "\"lower_bound\":1"));
    assert_non_null(strstr(json, "\"plan_ms\":"));
}

/* The same snapshot gives byte-identical plans (timing left out), also through a re-parse. */
static void test_plans_byte_identical(void **state)
{
    g_autofree char *first = NULL;

    for (int policy = 0; policy < POL_POLICY_LAST; policy++) {
        for (int round = 0; round < 3; round++) {
            g_autoptr(PolCluster) c = parse(GOOD, NULL);
            g_autoptr(PolPlan) plan = NULL;
            g_autofree char *json = NULL;

            plan = policy == POL_POLICY_CONSOLIDATE ? pol_plan_consolidate(c, NULL, NULL)
                   : policy == POL_POLICY_DRAIN     ? pol_plan_drain(c, "h2", NULL, NULL)
                                                    : pol_plan_balance(c, NULL, NULL);
            assert_non_null(plan);
            json = orch_plan_format_json(plan, TRUE, FALSE);
            assert_null(strstr(json, "plan_ms"));
            if (round == 0) {
                g_free(first);
                first = g_steal_pointer(&json);
            } else {
                assert_string_equal(json, first);
            }
        }
    }
}

static void expect_error(const char *text, const char *what)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(PolCluster) c = parse(text, &error);

    assert_null(c);
    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_INVALID));
    if (!strstr(error->message, what))
        fail_msg("'%s' does not name '%s'", error->message, what);
    assert_non_null(strstr(error->message, "snapshot 't.json'"));
}

static void test_bad_snapshots(void **state)
{
    expect_error("", "not JSON");
    expect_error("{\"hosts\":[", "not JSON");
    expect_error("[1,2]", "top level");
    expect_error("{\"vms\":[]}", "hosts: missing");
    expect_error("{\"hosts\":{},\"vms\":[]}", "hosts: must be an array");
    expect_error("{\"hosts\":[],\"vms\":[3]}", "vms[0]: must be an object");
    expect_error("{\"hosts\":[{\"cpus\":1,\"memory_mib\":1}],\"vms\":[]}", "hosts[0].name: missing");
    expect_error("{\"hosts\":[{\"name\":\"h\",\"cpus\":-1,\"memory_mib\":1}],\"vms\":[]}",
                 "hosts[0].cpus: must be between");
    expect_error("{\"hosts\":[{\"name\":\"h\",\"cpus\":1.5,\"memory_mib\":1}],\"vms\":[]}",
                 "hosts[0].cpus: must be an integer");
    expect_error("{\"hosts\":[{\"name\":\"h\",\"cpus\":1,\"memory_mib\":\"8G\"}],\"vms\":[]}",
                 "hosts[0].memory_mib");
    expect_error("{\"hosts\":[{\"name\":\"h\",\"cpus\":1,\"memory_mib\":1,\"state\":\"asleep\"}],\"vms\":[]}",
                 "hosts[0].state");
    expect_error("{\"hosts\":[{\"name\":\"h\",\"cpus\":1,\"memory_mib\":1},{\"name\":\"h\",\"cpus\":1,\"memory_mib\":1}],\"vms\":[]}",
                 "hosts[1]: host 'h' is listed twice");
    expect_error("{\"hosts\":[{\"name\":\"h\",\"cpus\":1,\"memory_mib\":1}],"
                 "\"vms\":[{\"name\":\"v\",\"host\":\"zz\",\"vcpus\":1,\"memory_mib\":1}]}",
                 "vms[0]: VM 'v': unknown host 'zz'");
    expect_error("{\"hosts\":[{\"name\":\"h\",\"cpus\":1,\"memory_mib\":1}],"
                 "\"vms\":[{\"name\":\"v\",\"host\":\"h\",\"vcpus\":1,\"memory_mib\":-2048}]}",
                 "vms[0].memory_mib: must be between 0 and");
    expect_error("{\"hosts\":[{\"name\":\"h\",\"cpus\":1,\"memory_mib\":1}],"
                 "\"vms\":[{\"name\":\"v\",\"host\":\"h\",\"vcpus\":0,\"memory_mib\":1}]}",
                 "vms[0].vcpus");
    expect_error("{\"hosts\":[{\"name\":\"h\",\"cpus\":1,\"memory_mib\":1}],"
                 "\"vms\":[{\"name\":\"v\",\"host\":\"h\",\"vcpus\":1,\"memory_mib\":1,\"cpu_util\":1.5}]}",
                 "vms[0].cpu_util: must be between 0 and 1");
    expect_error("{\"hosts\":[{\"name\":\"h\",\"cpus\":1,\"memory_mib\":1}],"
                 "\"vms\":[{\"name\":\"v\",\"host\":\"h\",\"vcpus\":1,\"memory_mib\":1,\"vfs\":-1}]}",
                 "vms[0].vfs");
    expect_error("{\"hosts\":[{\"name\":\"h\",\"cpus\":1,\"memory_mib\":1}],"
                 "\"vms\":[{\"name\":\"v\",\"host\":\"h\",\"vcpus\":1,\"memory_mib\":1,\"pinned\":\"yes\"}]}",
                 "vms[0].pinned");
    expect_error("{\"hosts\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
                 "nests deeper");
    /* Unknown members are refused: a misspelt "pined" must not move a pinned VM. */
    expect_error("{\"hosts\":[{\"name\":\"h\",\"cpus\":1,\"memory_mib\":1}],"
                 "\"vms\":[{\"name\":\"v\",\"host\":\"h\",\"vcpus\":1,\"memory_mib\":1,\"pined\":true}]}",
                 "vms[0].pined: unknown member (did you mean \"pinned\"?)");
    expect_error("{\"hosts\":[{\"name\":\"h\",\"cpus\":1,\"memory_mib\":1,\"numa\":2}],\"vms\":[]}",
                 "hosts[0].numa: unknown member (known: name, cpus,");
    expect_error("{\"hosts\":[],\"vms\":[],\"host\":1}", "(top level).host: unknown member (did you mean \"hosts\"?)");
    expect_error("{\"hosts\":[],\"vms\":[],\"vm\":[]}",
                 "(top level).vm: unknown member (did you mean \"vms\"?)");
}

static void test_oversized_file(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("hm-snapshot-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "big.json", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(PolCluster) c = NULL;
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), ORCH_SNAPSHOT_MAX_BYTES + 1), 0);
    fclose(f);
    c = orch_snapshot_load(path, &error);
    assert_null(c);
    assert_non_null(strstr(error->message, path));
    unlink(path);
    rmdir(dir);

    g_clear_error(&error);
    c = orch_snapshot_load("/nonexistent/snapshot.json", &error);
    assert_null(c);
    assert_non_null(strstr(error->message, "/nonexistent/snapshot.json"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_snapshot),
        cmocka_unit_test(test_plans_byte_identical),
        cmocka_unit_test(test_bad_snapshots),
        cmocka_unit_test(test_oversized_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
