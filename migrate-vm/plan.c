/* `migrate-vm plan consolidate|drain HOST|balance --snapshot FILE [--json]`: offline planning
 * from a cluster snapshot, without touching libvirt (docs/policies.md). Without --snapshot the
 * plan is asked of this host's hotmigd, on its live inventory of the cluster (migrate-vm/local.c);
 * nothing runs either way.
 *
 * Exit status: 0 planned; 1 no plan exists (no room, a VM that must move may not), or hotmigd
 * could not be asked; 2 bad usage, a bad snapshot, an unknown host; 4 bad configuration file. */
#include <stdio.h>

#include "engine/snapshot.h"
#include "migrate-vm/commands.h"

int orch_plan_cli_main(int argc, char **argv)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new("consolidate|drain HOST|balance");
    g_autoptr(GError) error = NULL;
    g_autoptr(PolCluster) cluster = NULL;
    g_autoptr(PolPlan) plan = NULL;
    g_autofree char *snapshot = NULL;
    g_autofree char *out = NULL;
    g_autofree char *config = NULL;
    g_autofree char *socket_opt = NULL;
    gboolean json = FALSE, pretty = FALSE, no_timing = FALSE, pack_vcpus = FALSE, keep_jobs = FALSE;
    /* -1: not given (the snapshot's defaults, or hotmigd's [scheduler] settings) */
    gint min_stay = -1, max_moves = -1;
    gdouble bandwidth = -1, tolerance = -1;
    PolOptions opts;
    int policy;
    GOptionEntry entries[] = {
        {"snapshot", 0, 0, G_OPTION_ARG_FILENAME, &snapshot,
         "The cluster snapshot (JSON); without it, this host's hotmigd plans on the live cluster",
         "FILE"},
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
        {"config", 0, 0, G_OPTION_ARG_FILENAME, &config,
         "Without --snapshot: the configuration whose [hotmigd] socket to ask", "FILE"},
        {"socket", 0, 0, G_OPTION_ARG_FILENAME, &socket_opt,
         "Without --snapshot: hotmigd's local socket (default: [hotmigd] socket)", "PATH"},
        {NULL, 0, 0, 0, NULL, NULL, NULL}};

    g_option_context_add_main_entries(ctx, entries, NULL);
    g_option_context_set_summary(
        ctx, "Plans migrations from a cluster snapshot, or (without --snapshot) asks this host's\n"
             "hotmigd to plan on the live cluster; changes nothing.");
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "migrate-vm plan: %s\n", error->message);
        return 2;
    }
    policy = argc > 1 ? pol_policy_from_string(argv[1]) : -1;
    if (policy < 0 || argc != (policy == POL_POLICY_DRAIN ? 3 : 2)) {
        fprintf(stderr, "usage: migrate-vm plan consolidate|drain HOST|balance [--snapshot FILE] [--json]\n");
        return 2;
    }
    if (min_stay < -1 || max_moves < -1 || (bandwidth != -1 && !(bandwidth > 0)) ||
        (tolerance != -1 && !(tolerance >= 0 && tolerance <= 1))) {
        fprintf(stderr, "migrate-vm plan: --min-stay and --max-moves must be >= 0, --bandwidth > 0, --tolerance between 0 and 1\n");
        return 2;
    }
    if (!snapshot) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        g_autoptr(JsonNode) args = NULL;
        g_autoptr(GError) local = NULL;
        g_autofree char *socket = orch_daemon_socket(config, socket_opt, &local);

        if (!socket) {
            fprintf(stderr, "migrate-vm plan: %s\n", local->message);
            return 4;
        }
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "policy");
        json_builder_add_string_value(b, pol_policy_to_string(policy));
        if (policy == POL_POLICY_DRAIN) {
            json_builder_set_member_name(b, "host");
            json_builder_add_string_value(b, argv[2]);
        }
        if (min_stay >= 0) {
            json_builder_set_member_name(b, "min_stay");
            json_builder_add_int_value(b, min_stay);
        }
        if (max_moves >= 0) {
            json_builder_set_member_name(b, "max_moves");
            json_builder_add_int_value(b, max_moves);
        }
        if (bandwidth > 0) {
            json_builder_set_member_name(b, "bandwidth");
            json_builder_add_double_value(b, bandwidth);
        }
        if (tolerance >= 0) {
            json_builder_set_member_name(b, "tolerance");
            json_builder_add_double_value(b, tolerance);
        }
        if (pack_vcpus) {
            json_builder_set_member_name(b, "pack_vcpus");
            json_builder_add_boolean_value(b, TRUE);
        }
        if (keep_jobs) {
            json_builder_set_member_name(b, "keep_jobs");
            json_builder_add_boolean_value(b, TRUE);
        }
        json_builder_end_object(b);
        args = json_builder_get_root(b);
        return orch_daemon_plan(socket, args, json, pretty, !no_timing);
    }
    if (config || socket_opt) {
        fprintf(stderr, "migrate-vm plan: --config and --socket ask hotmigd: not with --snapshot\n");
        return 2;
    }
    pol_options_init(&opts);
    opts.min_stay_s = min_stay >= 0 ? (guint)min_stay : 0;
    opts.pack_by_vcpus = pack_vcpus;
    opts.keep_jobs_together = keep_jobs;
    if (bandwidth > 0)
        opts.bandwidth_mib_s = bandwidth;
    if (tolerance >= 0)
        opts.balance_tolerance = tolerance;
    opts.max_moves = max_moves >= 0 ? (guint)max_moves : 0;

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
