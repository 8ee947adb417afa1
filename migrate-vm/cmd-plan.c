/* `migrate-vm plan consolidate|drain HOST|balance --snapshot FILE [--json]`: offline planning
 * from a cluster snapshot, without touching libvirt (docs/policies.md). Without --snapshot the
 * plan is asked of this host's hotmigd, on its live inventory of the cluster (local.c);
 * nothing runs either way.
 *
 * Exit status: 0 planned; 1 no plan exists (no room, a VM that must move may not, none within
 * --max-migrations), or hotmigd could not be asked; 2 bad usage, a bad snapshot (hosts already
 * over capacity included), an unknown host; 4 bad configuration file. */
#include <stdio.h>

#include "engine/snapshot.h"
#include "migrate-vm/commands.h"

/* An option not given: no one types this. */
#define PLAN_UNSET G_MININT

int cmd_plan_main(int argc, char **argv)
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
    /* PLAN_UNSET: not given (the snapshot's defaults, or hotmigd's [scheduler] settings); any
     * other negative value was given, and is refused. */
    gint min_stay = PLAN_UNSET, max_moves = PLAN_UNSET, host_value = PLAN_UNSET,
         max_migrations = PLAN_UNSET;
    gdouble bandwidth = PLAN_UNSET, tolerance = PLAN_UNSET;
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
        {"host-value", 0, 0, G_OPTION_ARG_INT, &host_value,
         "consolidate: a freed host is worth N migrations (default: [scheduler] host-value)", "N"},
        {"max-migrations", 0, 0, G_OPTION_ARG_INT, &max_migrations,
         "consolidate: at most N migrations (N >= 1)", "N"},
        {"config", 0, 0, G_OPTION_ARG_FILENAME, &config,
         "The configuration: its [scheduler] host-value, and without --snapshot its [hotmigd] socket",
         "FILE"},
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
    if (min_stay != PLAN_UNSET && min_stay < 0) {
        fprintf(stderr, "migrate-vm plan: --min-stay must be >= 0 seconds, not %d\n", min_stay);
        return 2;
    }
    if (max_moves != PLAN_UNSET && max_moves < 0) {
        fprintf(stderr, "migrate-vm plan: --max-moves must be >= 0, not %d\n", max_moves);
        return 2;
    }
    if (bandwidth != PLAN_UNSET && !(bandwidth > 0 && bandwidth <= 1e9)) {
        fprintf(stderr, "migrate-vm plan: --bandwidth must be > 0 MiB/s, not %g\n", bandwidth);
        return 2;
    }
    if (tolerance != PLAN_UNSET && !(tolerance >= 0 && tolerance <= 1)) {
        fprintf(stderr, "migrate-vm plan: --tolerance must be between 0 and 1, not %g\n", tolerance);
        return 2;
    }
    if (host_value != PLAN_UNSET && (host_value < 0 || host_value > POL_HOST_VALUE_MAX)) {
        fprintf(stderr, "migrate-vm plan: --host-value must be between 0 and %d migrations, not %d\n",
                POL_HOST_VALUE_MAX, host_value);
        return 2;
    }
    if (max_migrations != PLAN_UNSET && max_migrations < 1) {
        fprintf(stderr, "migrate-vm plan: --max-migrations must be at least 1, not %d\n",
                max_migrations);
        return 2;
    }
    if ((host_value != PLAN_UNSET || max_migrations != PLAN_UNSET) &&
        policy != POL_POLICY_CONSOLIDATE) {
        fprintf(stderr, "migrate-vm plan: --host-value and --max-migrations are for consolidate\n");
        return 2;
    }
    if (!snapshot) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        g_autoptr(JsonNode) args = NULL;
        g_autoptr(GError) local = NULL;
        g_autofree char *socket = local_socket(config, socket_opt, &local);

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
        if (min_stay != PLAN_UNSET) {
            json_builder_set_member_name(b, "min_stay");
            json_builder_add_int_value(b, min_stay);
        }
        if (max_moves != PLAN_UNSET) {
            json_builder_set_member_name(b, "max_moves");
            json_builder_add_int_value(b, max_moves);
        }
        if (host_value != PLAN_UNSET) {
            json_builder_set_member_name(b, "host_value");
            json_builder_add_int_value(b, host_value);
        }
        if (max_migrations != PLAN_UNSET) {
            json_builder_set_member_name(b, "max_migrations");
            json_builder_add_int_value(b, max_migrations);
        }
        if (bandwidth != PLAN_UNSET) {
            json_builder_set_member_name(b, "bandwidth");
            json_builder_add_double_value(b, bandwidth);
        }
        if (tolerance != PLAN_UNSET) {
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
        return local_plan(socket, args, json, pretty, !no_timing);
    }
    if (socket_opt) {
        fprintf(stderr, "migrate-vm plan: --socket asks hotmigd: not with --snapshot\n");
        return 2;
    }
    pol_options_init(&opts);
    {
        g_autoptr(HmConfig) cfg = hm_config_open(config, &error);
        if (!cfg) {
            fprintf(stderr, "migrate-vm plan: %s\n", error->message);
            return 4;
        }
        opts.host_value = (guint)hm_config_get_uint(cfg, HM_CONFIG_SCHEDULER_HOST_VALUE);
    }
    if (host_value != PLAN_UNSET)
        opts.host_value = (guint)host_value;
    opts.max_migrations = max_migrations != PLAN_UNSET ? (guint)max_migrations : 0;
    opts.min_stay_s = min_stay != PLAN_UNSET ? (guint)min_stay : 0;
    opts.pack_by_vcpus = pack_vcpus;
    opts.keep_jobs_together = keep_jobs;
    if (bandwidth != PLAN_UNSET)
        opts.bandwidth_mib_s = bandwidth;
    if (tolerance != PLAN_UNSET)
        opts.balance_tolerance = tolerance;
    opts.max_moves = max_moves != PLAN_UNSET ? (guint)max_moves : 0;

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
        return g_error_matches(error, POL_ERROR, POL_ERROR_NOT_FOUND) ||
                       g_error_matches(error, POL_ERROR, POL_ERROR_INVALID)
                   ? 2
                   : 1;
    }
    out = json ? orch_plan_format_json(plan, pretty, !no_timing) : orch_plan_format_table(plan);
    fputs(out, stdout);
    if (json)
        fputc('\n', stdout);
    return 0;
}
