/* Fuzz target for cluster snapshots (engine/snapshot.c): whatever bytes arrive as a
 * snapshot must be rejected with an error or read without crashing, leaking or tripping a
 * sanitizer; every cluster read must plan (consolidate, balance, drain of its first host) to
 * a plan that replays without overcommitting, or fail cleanly, and format as JSON.
 *
 * libFuzzer: see tests/fuzz/snapshot.cmake (clang, -DHM_FUZZ=ON). Without libFuzzer the corpus
 * in tests/fuzz/corpus/snapshot/ is replayed by snapshot-fuzz-replay as a normal CTest. */
#include <stddef.h>
#include <stdint.h>

#include "engine/plan-json.h"
#include "engine/snapshot.h"
#include "policies/policies-priv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_BYTES (1024 * 1024)

static void check_plan(const PolCluster *c, PolPlan *plan, GError *error, const PolOptions *opts)
{
    g_autoptr(GError) verr = NULL;
    g_autofree char *json = NULL;
    g_autofree char *table = NULL;

    g_assert((plan == NULL) == (error != NULL));
    if (!plan)
        return;
    if (!pol_plan_verify(c, plan, opts, &verr))
        g_error("plan does not verify: %s", verr->message);
    /* No hosts_used >= lower_bound here: the bound holds for placements that fit, and a
     * snapshot may start overcommitted (a VM larger than any host stays where it is). The
     * unit tests assert it on clusters that fit. */
    json = orch_plan_format_json(plan, FALSE, FALSE);
    table = orch_plan_format_table(plan);
    g_assert(json && table);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(PolCluster) c = NULL;
    g_autoptr(GError) error = NULL;
    PolOptions opts;

    if (size > FUZZ_MAX_BYTES)
        return 0;
    c = orch_snapshot_parse((const char *)data, size, "fuzz", &error);
    g_assert((c == NULL) == (error != NULL));
    if (!c)
        return 0;
    pol_options_init(&opts);
    opts.min_stay_s = 60;
    for (int policy = 0; policy < POL_POLICY_LAST; policy++) {
        g_autoptr(PolPlan) plan = NULL;
        g_autoptr(GError) perr = NULL;

        opts.keep_jobs_together = policy == POL_POLICY_CONSOLIDATE;
        if (policy == POL_POLICY_CONSOLIDATE)
            plan = pol_plan_consolidate(c, &opts, &perr);
        else if (policy == POL_POLICY_BALANCE)
            plan = pol_plan_balance(c, &opts, &perr);
        else if (pol_cluster_get_n_hosts(c) > 0)
            plan = pol_plan_drain(c, ((PolHost *)g_ptr_array_index(c->hosts, 0))->name, &opts,
                                  &perr);
        else
            continue;
        check_plan(c, plan, perr, &opts);
    }
    return 0;
}
