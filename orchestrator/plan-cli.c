/* `migrate-vm plan consolidate|drain HOST|balance --snapshot FILE [--json]`: offline planning
 * from a cluster snapshot, without touching libvirt (docs/policies.md).
 *
 * Exit status: 0 planned; 1 no plan exists (no room, a VM that must move may not); 2 bad
 * usage or a bad snapshot. */
#include <stdio.h>

#include "orchestrator/snapshot-priv.h"

int orch_plan_cli_main(int argc, char **argv)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new("consolidate|drain HOST|balance");
    g_autoptr(GError) error = NULL;
    g_autoptr(PolCluster) cluster = NULL;
    g_autoptr(PolPlan) plan = NULL;
    g_autofree char *snapshot = NULL;
    g_autofree char *out = NULL;
    gboolean json = FALSE, pretty = FALSE, no_timing = FALSE, pack_vcpus = FALSE, keep_jobs = FALSE;
    gint min_stay = 0, max_moves = 0;
    gdouble bandwidth = POL_BANDWIDTH_MIB_S_DEFAULT, tolerance = POL_BALANCE_TOLERANCE_DEFAULT;
    PolOptions opts;
    int policy;
    GOptionEntry entries[] = {
        {"snapshot", 0, 0, G_OPTION_ARG_FILENAME, &snapshot, "The cluster snapshot (JSON)", "FILE"},
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print the plan as JSON", NULL},
        {"pretty", 0, 0, G_OPTION_ARG_NONE, &pretty, "Indent the JSON", NULL},
        {"no-timing", 0, 0, G_OPTION_ARG_NONE, &no_timing,
         "Leave plan_ms out: the same snapshot gives the same bytes", NULL},
        {"min-stay", 0, 0, G_OPTION_ARG_INT, &min_stay,
         "Do not move a VM that moved less than SECONDS ago (moved_ago_s)", "SECONDS"},
        {"pack-vcpus", 0, 0, G_OPTION_ARG_NONE, &pack_vcpus,
         "Pack by allocated vCPUs instead of vCPUs x cpu_util", NULL},
        {"keep-jobs", 0, 0, G_OPTION_ARG_NONE, &keep_jobs,
         "Keep the VMs of one job on one host", NULL},
        {"bandwidth", 0, 0, G_OPTION_ARG_DOUBLE, &bandwidth,
         "Migration bandwidth for the predicted durations (default 1250)", "MIB_S"},
        {"tolerance", 0, 0, G_OPTION_ARG_DOUBLE, &tolerance,
         "balance: stop when host loads are within this (default 0.05)", "FRACTION"},
        {"max-moves", 0, 0, G_OPTION_ARG_INT, &max_moves, "balance: at most N migrations", "N"},
        {NULL, 0, 0, 0, NULL, NULL, NULL}};

    g_option_context_add_main_entries(ctx, entries, NULL);
    g_option_context_set_summary(ctx, "Plans migrations from a cluster snapshot; changes nothing.");
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "migrate-vm plan: %s\n", error->message);
        return 2;
    }
    policy = argc > 1 ? pol_policy_from_string(argv[1]) : -1;
    if (policy < 0 || argc != (policy == POL_POLICY_DRAIN ? 3 : 2)) {
        fprintf(stderr, "usage: migrate-vm plan consolidate|drain HOST|balance --snapshot FILE [--json]\n");
        return 2;
    }
    if (!snapshot) {
        fprintf(stderr, "migrate-vm plan: --snapshot FILE is required\n");
        return 2;
    }
    if (min_stay < 0 || max_moves < 0 || !(bandwidth > 0) || !(tolerance >= 0 && tolerance <= 1)) {
        fprintf(stderr, "migrate-vm plan: --min-stay and --max-moves must be >= 0, --bandwidth > 0, --tolerance between 0 and 1\n");
        return 2;
    }
    pol_options_init(&opts);
    opts.min_stay_s = (guint)min_stay;
    opts.pack_by_vcpus = pack_vcpus;
    opts.keep_jobs_together = keep_jobs;
    opts.bandwidth_mib_s = bandwidth;
    opts.balance_tolerance = tolerance;
    opts.max_moves = (guint)max_moves;

    cluster = orch_snapshot_load(snapshot, &error);
    if (!cluster) {
        fprintf(stderr, "migrate-vm plan: %s\n", error->message);
        return 2;
    }
    switch (policy) {
    case POL_POLICY_CONSOLIDATE:
        plan = pol_plan_consolidate(cluster, &opts, &error);
        break;
    case POL_POLICY_DRAIN:
        plan = pol_plan_drain(cluster, argv[2], &opts, &error);
        break;
    default:
        plan = pol_plan_balance(cluster, &opts, &error);
        break;
    }
    if (!plan) {
        fprintf(stderr, "migrate-vm plan: %s\n", error->message);
        return g_error_matches(error, POL_ERROR, POL_ERROR_NOT_FOUND) ? 2 : 1;
    }
    out = json ? orch_plan_format_json(plan, pretty, !no_timing) : orch_plan_format_table(plan);
    fputs(out, stdout);
    if (json)
        fputc('\n', stdout);
    return 0;
}
