/* `migrate-vm plan consolidate|drain HOST|balance --snapshot FILE [--json]`: offline planning
 * from a cluster snapshot, without touching libvirt (docs/policies.md). Without --snapshot the
 * plan is asked of this host's hotmigd, on its live inventory of the cluster (local.c);
 * nothing runs either way.
 *
 * Exit status: 0 planned; 1 no plan exists (no room, a VM that must move may not), or hotmigd
 * could not be asked; 2 bad usage, a bad snapshot, an unknown host; 4 bad configuration file. */
#include <stdio.h>

#include "engine/json.h"
#include "engine/plan.h"
#include "engine/snapshot.h"
#include "migrate-vm/commands.h"

/* The command line; -1: not given (the snapshot's defaults, or hotmigd's [scheduler]
 * settings). The option table below fills it, at file scope as GOption wants addresses. */
typedef struct {
    char *snapshot;
    char *config;
    char *socket;
    gboolean json, pretty, no_timing, pack_vcpus, keep_jobs;
    gint min_stay, max_moves;
    gdouble bandwidth, tolerance;
    PolPolicy policy;
    const char *host; /* drain: the host (borrowed from argv) */
} PlanCli;

static PlanCli plan_cli = {.min_stay = -1, .max_moves = -1, .bandwidth = -1, .tolerance = -1};

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
    {"config", 0, 0, G_OPTION_ARG_FILENAME, &plan_cli.config,
     "Without --snapshot: the configuration whose [hotmigd] socket to ask", "FILE"},
    {"socket", 0, 0, G_OPTION_ARG_FILENAME, &plan_cli.socket,
     "Without --snapshot: hotmigd's local socket (default: [hotmigd] socket)", "PATH"},
    {NULL, 0, 0, 0, NULL, NULL, NULL}};

/* Parses the command line into plan_cli; FALSE (a message printed) on bad usage. */
static gboolean plan_parse(int argc, char **argv)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new("consolidate|drain HOST|balance");
    g_autoptr(GError) error = NULL;
    PlanCli *c = &plan_cli;
    int policy;

    g_option_context_add_main_entries(ctx, plan_entries, NULL);
    g_option_context_set_summary(
        ctx, "Plans migrations from a cluster snapshot, or (without --snapshot) asks this host's\n"
             "hotmigd to plan on the live cluster; changes nothing.");
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "migrate-vm plan: %s\n", error->message);
        return FALSE;
    }
    policy = argc > 1 ? pol_policy_from_string(argv[1]) : -1;
    if (policy < 0 || argc != (policy == POL_POLICY_DRAIN ? 3 : 2)) {
        fprintf(stderr, "usage: migrate-vm plan consolidate|drain HOST|balance [--snapshot FILE] [--json]\n");
        return FALSE;
    }
    c->policy = policy;
    c->host = policy == POL_POLICY_DRAIN ? argv[2] : NULL;
    if (c->min_stay < -1 || c->max_moves < -1 || (c->bandwidth != -1 && !(c->bandwidth > 0)) ||
        (c->tolerance != -1 && !(c->tolerance >= 0 && c->tolerance <= 1))) {
        fprintf(stderr, "migrate-vm plan: --min-stay and --max-moves must be >= 0, --bandwidth > 0, --tolerance between 0 and 1\n");
        return FALSE;
    }
    if (c->snapshot && (c->config || c->socket)) {
        fprintf(stderr, "migrate-vm plan: --config and --socket ask hotmigd: not with --snapshot\n");
        return FALSE;
    }
    return TRUE;
}

/* Without --snapshot: the local API's "plan" arguments, asked of hotmigd. */
static int plan_ask_hotmigd(const PlanCli *c)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) args = NULL;
    g_autoptr(GError) local = NULL;
    g_autofree char *socket = local_socket(c->config, c->socket, &local);

    if (!socket) {
        fprintf(stderr, "migrate-vm plan: %s\n", local->message);
        return EXIT_CONFIG;
    }
    json_builder_begin_object(b);
    orch_json_member_string(b, "policy", pol_policy_to_string(c->policy));
    if (c->host)
        orch_json_member_string(b, "host", c->host);
    if (c->min_stay >= 0)
        orch_json_member_int(b, "min_stay", c->min_stay);
    if (c->max_moves >= 0)
        orch_json_member_int(b, "max_moves", c->max_moves);
    if (c->bandwidth > 0)
        orch_json_member_double(b, "bandwidth", c->bandwidth);
    if (c->tolerance >= 0)
        orch_json_member_double(b, "tolerance", c->tolerance);
    if (c->pack_vcpus)
        orch_json_member_bool(b, "pack_vcpus", TRUE);
    if (c->keep_jobs)
        orch_json_member_bool(b, "keep_jobs", TRUE);
    json_builder_end_object(b);
    args = json_builder_get_root(b);
    return local_plan(socket, args, c->json, c->pretty, !c->no_timing);
}

/* With --snapshot: the plan made here, on the snapshot. */
static int plan_offline(const PlanCli *c)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(PolCluster) cluster = NULL;
    g_autoptr(PolPlan) plan = NULL;
    g_autofree char *out = NULL;
    PolOptions opts;

    pol_options_init(&opts);
    opts.min_stay_s = c->min_stay >= 0 ? (guint)c->min_stay : 0;
    opts.pack_by_vcpus = c->pack_vcpus;
    opts.keep_jobs_together = c->keep_jobs;
    if (c->bandwidth > 0)
        opts.bandwidth_mib_s = c->bandwidth;
    if (c->tolerance >= 0)
        opts.balance_tolerance = c->tolerance;
    opts.max_moves = c->max_moves >= 0 ? (guint)c->max_moves : 0;

    cluster = orch_snapshot_load(c->snapshot, &error);
    if (!cluster) {
        fprintf(stderr, "migrate-vm plan: %s\n", error->message);
        return EXIT_USAGE;
    }
    switch (c->policy) {
    case POL_POLICY_CONSOLIDATE:
        plan = pol_plan_consolidate(cluster, &opts, &error);
        break;
    case POL_POLICY_DRAIN:
        plan = pol_plan_drain(cluster, c->host, &opts, &error);
        break;
    default:
        plan = pol_plan_balance(cluster, &opts, &error);
        break;
    }
    if (!plan) {
        fprintf(stderr, "migrate-vm plan: %s\n", error->message);
        return g_error_matches(error, POL_ERROR, POL_ERROR_NOT_FOUND) ? EXIT_USAGE : EXIT_FAILED;
    }
    out = c->json ? orch_plan_format_json(plan, c->pretty, !c->no_timing)
                  : orch_plan_format_table(plan);
    fputs(out, stdout);
    if (c->json)
        fputc('\n', stdout);
    return EXIT_OK;
}

int cmd_plan_main(int argc, char **argv)
{
    if (!plan_parse(argc, argv))
        return EXIT_USAGE;
    return plan_cli.snapshot ? plan_offline(&plan_cli) : plan_ask_hotmigd(&plan_cli);
}
