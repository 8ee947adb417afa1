/* `migrate-vm plan consolidate|drain HOST|balance --snapshot FILE [--json]`: offline planning
 * from a cluster snapshot, without touching libvirt (docs/policies.md). Without --snapshot the
 * plan is asked of this host's hotmigd, on its live inventory of the cluster (local.c);
 * nothing runs either way.
 *
 * Exit status: 0 planned; 1 no plan exists (no room, a VM that must move may not, none within
 * --max-migrations), or hotmigd could not be asked; 2 bad usage, a bad snapshot (hosts already
 * over capacity included), an unknown host; 4 bad configuration file. */
#include <stdio.h>

#include "engine/plan-json.h"
#include "engine/snapshot.h"
#include "migrate-vm/commands.h"

/* An option not given: no one types this. */
#define PLAN_UNSET G_MININT

/* The command line as given. PLAN_UNSET: not given (the snapshot's defaults, or hotmigd's
 * [scheduler] settings); any other negative value was given, and is refused. */
typedef struct {
    char *snapshot;
    char *config;
    char *socket;
    gboolean json, pretty, no_timing, pack_vcpus, keep_jobs;
    gint min_stay, max_moves, host_value, max_migrations;
    gdouble bandwidth, tolerance;
    int policy;
    const char *host; /* drain's HOST (argv, borrowed) */
} PlanCli;

/* Filled by the option table below, at file scope as GOption wants addresses. */
static PlanCli plan_cli;

static GOptionEntry plan_entries[] = {
    {"snapshot", 0, 0, G_OPTION_ARG_FILENAME, &plan_cli.snapshot,
     "The cluster snapshot (JSON); without it, this host's hotmigd plans on the live cluster",
     "FILE"},
    {"json", 0, 0, G_OPTION_ARG_NONE, &plan_cli.json, "Print the plan as JSON", NULL},
    {"pretty", 0, 0, G_OPTION_ARG_NONE, &plan_cli.pretty, "Indent the JSON", NULL},
    {"no-timing", 0, 0, G_OPTION_ARG_NONE, &plan_cli.no_timing,
     "Leave plan_ms out: the same snapshot gives the same bytes", NULL},
    {"min-stay", 0, 0, G_OPTION_ARG_INT, &plan_cli.min_stay,
     "Do not move a VM that moved less than SECONDS ago (moved_ago_s)", "SECONDS"},
    {"pack-vcpus", 0, 0, G_OPTION_ARG_NONE, &plan_cli.pack_vcpus,
     "Pack by allocated vCPUs instead of vCPUs x cpu_util", NULL},
    {"keep-jobs", 0, 0, G_OPTION_ARG_NONE, &plan_cli.keep_jobs,
     "Keep the VMs of one job on one host", NULL},
    {"bandwidth", 0, 0, G_OPTION_ARG_DOUBLE, &plan_cli.bandwidth,
     "Migration bandwidth for the predicted durations (default 1250)", "MIB_S"},
    {"tolerance", 0, 0, G_OPTION_ARG_DOUBLE, &plan_cli.tolerance,
     "balance: stop when host loads are within this (default 0.05)", "FRACTION"},
    {"max-moves", 0, 0, G_OPTION_ARG_INT, &plan_cli.max_moves, "balance: at most N migrations",
     "N"},
    {"host-value", 0, 0, G_OPTION_ARG_INT, &plan_cli.host_value,
     "consolidate: a freed host is worth N migrations (default: [scheduler] host-value)", "N"},
    {"max-migrations", 0, 0, G_OPTION_ARG_INT, &plan_cli.max_migrations,
     "consolidate: at most N migrations (N >= 1)", "N"},
    {"config", 0, 0, G_OPTION_ARG_FILENAME, &plan_cli.config,
     "The configuration: its [scheduler] host-value, and without --snapshot its [hotmigd] socket",
     "FILE"},
    {"socket", 0, 0, G_OPTION_ARG_FILENAME, &plan_cli.socket,
     "Without --snapshot: hotmigd's local socket (default: [hotmigd] socket)", "PATH"},
    {NULL, 0, 0, 0, NULL, NULL, NULL}};

static void plan_cli_clear(PlanCli *cli)
{
    g_free(cli->snapshot);
    g_free(cli->config);
    g_free(cli->socket);
    *cli = (PlanCli){0};
}

/* Parses the command line into plan_cli: FALSE (a message printed) on bad usage. */
static gboolean plan_cli_parse(int argc, char **argv)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new("consolidate|drain HOST|balance");
    g_autoptr(GError) error = NULL;

    plan_cli = (PlanCli){.min_stay = PLAN_UNSET,
                         .max_moves = PLAN_UNSET,
                         .host_value = PLAN_UNSET,
                         .max_migrations = PLAN_UNSET,
                         .bandwidth = PLAN_UNSET,
                         .tolerance = PLAN_UNSET};
    g_option_context_add_main_entries(ctx, plan_entries, NULL);
    g_option_context_set_summary(
        ctx, "Plans migrations from a cluster snapshot, or (without --snapshot) asks this host's\n"
             "hotmigd to plan on the live cluster; changes nothing.");
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "migrate-vm plan: %s\n", error->message);
        return FALSE;
    }
    plan_cli.policy = argc > 1 ? pol_policy_from_string(argv[1]) : -1;
    if (plan_cli.policy < 0 || argc != (plan_cli.policy == POL_POLICY_DRAIN ? 3 : 2)) {
        fprintf(stderr, "usage: migrate-vm plan consolidate|drain HOST|balance [--snapshot FILE] [--json]\n");
        return FALSE;
    }
    plan_cli.host = plan_cli.policy == POL_POLICY_DRAIN ? argv[2] : NULL;
    return TRUE;
}

/* The values given are in range and go with the policy: FALSE (a message printed) if not. */
static gboolean plan_cli_check(const PlanCli *cli)
{
    if (cli->min_stay != PLAN_UNSET && cli->min_stay < 0) {
        fprintf(stderr, "migrate-vm plan: --min-stay must be >= 0 seconds, not %d\n", cli->min_stay);
        return FALSE;
    }
    if (cli->max_moves != PLAN_UNSET && cli->max_moves < 0) {
        fprintf(stderr, "migrate-vm plan: --max-moves must be >= 0, not %d\n", cli->max_moves);
        return FALSE;
    }
    if (cli->bandwidth != PLAN_UNSET && !(cli->bandwidth > 0 && cli->bandwidth <= 1e9)) {
        fprintf(stderr, "migrate-vm plan: --bandwidth must be > 0 MiB/s, not %g\n", cli->bandwidth);
        return FALSE;
    }
    if (cli->tolerance != PLAN_UNSET && !(cli->tolerance >= 0 && cli->tolerance <= 1)) {
        fprintf(stderr, "migrate-vm plan: --tolerance must be between 0 and 1, not %g\n", cli->tolerance);
        return FALSE;
    }
    if (cli->host_value != PLAN_UNSET &&
        (cli->host_value < 0 || cli->host_value > POL_HOST_VALUE_MAX)) {
        fprintf(stderr, "migrate-vm plan: --host-value must be between 0 and %d migrations, not %d\n",
                POL_HOST_VALUE_MAX, cli->host_value);
        return FALSE;
    }
    if (cli->max_migrations != PLAN_UNSET && cli->max_migrations < 1) {
        fprintf(stderr, "migrate-vm plan: --max-migrations must be at least 1, not %d\n",
                cli->max_migrations);
        return FALSE;
    }
    if ((cli->host_value != PLAN_UNSET || cli->max_migrations != PLAN_UNSET) &&
        cli->policy != POL_POLICY_CONSOLIDATE) {
        fprintf(stderr, "migrate-vm plan: --host-value and --max-migrations are for consolidate\n");
        return FALSE;
    }
    return TRUE;
}

static void plan_arg_int(JsonBuilder *b, const char *name, gint value)
{
    if (value == PLAN_UNSET)
        return;
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, value);
}

static void plan_arg_double(JsonBuilder *b, const char *name, gdouble value)
{
    if (value == PLAN_UNSET)
        return;
    json_builder_set_member_name(b, name);
    json_builder_add_double_value(b, value);
}

static void plan_arg_flag(JsonBuilder *b, const char *name, gboolean value)
{
    if (!value)
        return;
    json_builder_set_member_name(b, name);
    json_builder_add_boolean_value(b, TRUE);
}

/* Without --snapshot: the local API's "plan" arguments from @cli, asked of hotmigd. */
static int plan_ask_hotmigd(const PlanCli *cli)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) args = NULL;
    g_autoptr(GError) local = NULL;
    g_autofree char *socket = local_socket(cli->config, cli->socket, &local);

    if (!socket) {
        fprintf(stderr, "migrate-vm plan: %s\n", local->message);
        return 4;
    }
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "policy");
    json_builder_add_string_value(b, pol_policy_to_string(cli->policy));
    if (cli->host) {
        json_builder_set_member_name(b, "host");
        json_builder_add_string_value(b, cli->host);
    }
    plan_arg_int(b, "min_stay", cli->min_stay);
    plan_arg_int(b, "max_moves", cli->max_moves);
    plan_arg_int(b, "host_value", cli->host_value);
    plan_arg_int(b, "max_migrations", cli->max_migrations);
    plan_arg_double(b, "bandwidth", cli->bandwidth);
    plan_arg_double(b, "tolerance", cli->tolerance);
    plan_arg_flag(b, "pack_vcpus", cli->pack_vcpus);
    plan_arg_flag(b, "keep_jobs", cli->keep_jobs);
    json_builder_end_object(b);
    args = json_builder_get_root(b);
    return local_plan(socket, args, cli->json, cli->pretty, !cli->no_timing);
}

/* The planner's options: the defaults, [scheduler] host-value and cpu-allocation of the
 * configuration, then the command line. FALSE (a message printed) when the configuration does
 * not load. */
static gboolean plan_options(const PlanCli *cli, PolOptions *opts)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfig) cfg = hm_config_open(cli->config, &error);

    pol_options_init(opts);
    if (!cfg) {
        cmd_print_lines("migrate-vm plan", error->message);
        return FALSE;
    }
    opts->host_value = (guint)hm_config_get_uint(cfg, HM_CONFIG_SCHEDULER_HOST_VALUE);
    opts->cpu_allocation = (guint)hm_config_get_uint(cfg, HM_CONFIG_SCHEDULER_CPU_ALLOCATION);
    if (cli->host_value != PLAN_UNSET)
        opts->host_value = (guint)cli->host_value;
    opts->max_migrations = cli->max_migrations != PLAN_UNSET ? (guint)cli->max_migrations : 0;
    opts->min_stay_s = cli->min_stay != PLAN_UNSET ? (guint)cli->min_stay : 0;
    opts->pack_by_vcpus = cli->pack_vcpus;
    opts->keep_jobs_together = cli->keep_jobs;
    if (cli->bandwidth != PLAN_UNSET)
        opts->bandwidth_mib_s = cli->bandwidth;
    if (cli->tolerance != PLAN_UNSET)
        opts->balance_tolerance = cli->tolerance;
    opts->max_moves = cli->max_moves != PLAN_UNSET ? (guint)cli->max_moves : 0;
    return TRUE;
}

/* With --snapshot: plans on the snapshot's cluster and prints the plan. */
static int plan_offline(const PlanCli *cli)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(PolCluster) cluster = NULL;
    g_autoptr(PolPlan) plan = NULL;
    g_autofree char *out = NULL;
    PolOptions opts;

    if (cli->socket) {
        fprintf(stderr, "migrate-vm plan: --socket asks hotmigd: not with --snapshot\n");
        return 2;
    }
    if (!plan_options(cli, &opts))
        return 4;
    cluster = orch_snapshot_load(cli->snapshot, &error);
    if (!cluster) {
        fprintf(stderr, "migrate-vm plan: %s\n", error->message);
        return 2;
    }
    switch (cli->policy) {
    case POL_POLICY_CONSOLIDATE:
        plan = pol_plan_consolidate(cluster, &opts, &error);
        break;
    case POL_POLICY_DRAIN:
        plan = pol_plan_drain(cluster, cli->host, &opts, &error);
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
    out = cli->json ? orch_plan_format_json(plan, cli->pretty, !cli->no_timing)
                    : orch_plan_format_table(plan);
    fputs(out, stdout);
    if (cli->json)
        fputc('\n', stdout);
    return 0;
}

int cmd_plan_main(int argc, char **argv)
{
    int status;

    if (!plan_cli_parse(argc, argv) || !plan_cli_check(&plan_cli))
        status = 2;
    else if (!plan_cli.snapshot)
        status = plan_ask_hotmigd(&plan_cli);
    else
        status = plan_offline(&plan_cli);
    plan_cli_clear(&plan_cli);
    return status;
}
