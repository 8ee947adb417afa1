/* migrate-vm's migration (what runs without a subcommand, main.c): one migration of DOMAIN to
 * DEST_URI, --recover, --dry-run. The command line and the configuration make the engine's
 * options (options_build()); the engine runs the phases (engine/migration.c), this file shows
 * the progress, handles SIGINT/SIGTERM/SIGHUP and prints the report. Exit status: main.c. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "engine/engine.h"
#include "engine/snapshot.h"
#include "engine/virt.h"
#include "migrate-vm/commands.h"

enum {
    EXIT_MIGRATED = EXIT_OK,
    EXIT_ROLLBACK_FAILED = 3,
    EXIT_CANCELLED = 5,
    EXIT_BUSY = 6,
    EXIT_UNFINISHED = 7,
    EXIT_PREFLIGHT = 8,
    EXIT_REFUSED = 9, /* a process used what a migration cannot carry; nothing was done */
    EXIT_PHASE_BASE = 10, /* + OrchPhase: that phase failed and was undone */
};
G_STATIC_ASSERT(EXIT_PHASE_BASE + ORCH_PHASE_LAST <= 20);

/* ---- progress ------------------------------------------------------------------------------ */

typedef enum {
    PROGRESS_NONE,
    PROGRESS_LINES,   /* timestamped lines (not a terminal, or --verbose) */
    PROGRESS_BAR,     /* one line per phase, redrawn in place (a terminal) */
    PROGRESS_JOURNAL, /* structured journald entries (stderr is the journal) */
} ProgressMode;

typedef struct {
    ProgressMode mode;
    GMutex lock;
    int phase;             /* the phase the bar line shows, -1: none */
    const char *domain;    /* borrowed */
    char migration_id[37]; /* a UUID for the log entries of this run */
} Progress;

#define BAR_WIDTH 16

static void progress_bar_draw(Progress *p, OrchPhase phase, const char *message)
{
    char bar[BAR_WIDTH + 1];
    int filled = (int)((phase + 1) * BAR_WIDTH / ORCH_PHASE_LAST);

    for (int i = 0; i < BAR_WIDTH; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    if (p->phase >= 0 && p->phase != (int)phase)
        fputc('\n', stderr); /* keep the finished phase's last line */
    p->phase = phase;
    /* \r and "erase line": redraw in place; cut to a typical terminal's width. */
    fprintf(stderr, "\r\033[K[%s] %d/%d %-9s %.50s", bar, phase + 1, ORCH_PHASE_LAST,
            orch_phase_to_string(phase), message);
    fflush(stderr);
}

static void progress_report(OrchPhase phase, const char *message, gpointer opaque)
{
    Progress *p = opaque;

    g_mutex_lock(&p->lock);
    switch (p->mode) {
    case PROGRESS_NONE:
        break;
    case PROGRESS_BAR:
        progress_bar_draw(p, phase, message);
        break;
    case PROGRESS_LINES: {
        g_autoptr(GDateTime) now = g_date_time_new_now_local();
        g_autofree char *stamp = g_date_time_format(now, "%H:%M:%S.%f");

        stamp[12] = '\0'; /* milliseconds */
        fprintf(stderr, "%s %-9s %s\n", stamp, orch_phase_to_string(phase), message);
        break;
    }
    case PROGRESS_JOURNAL:
        g_log_structured(G_LOG_DOMAIN, G_LOG_LEVEL_INFO, HM_LOG_FIELD_MIGRATION_ID, p->migration_id,
                         HM_LOG_FIELD_DOMAIN, p->domain, HM_LOG_FIELD_PHASE,
                         orch_phase_to_string(phase), "MESSAGE", "%s %s: %s", p->domain,
                         orch_phase_to_string(phase), message);
        break;
    }
    g_mutex_unlock(&p->lock);
}

static void progress_end(Progress *p)
{
    g_mutex_lock(&p->lock);
    if (p->mode == PROGRESS_BAR && p->phase >= 0)
        fputc('\n', stderr);
    p->phase = -1;
    g_mutex_unlock(&p->lock);
}

/* ---- options ------------------------------------------------------------------------------- */

/* The command line as given; UNSET / FALSE / NULL: not given (the configuration decides). */
#define UNSET G_MININT
typedef struct {
    char *config_path;
    char *state_dir;
    char *connect;
    char *migrate_uri;
    char *agent_channel;
    char *alias_prefix;
    char *target_vf;
    char *hotmigd;
    gboolean dry_run;
    gboolean live, p2p; /* accepted for virsh compatibility: always on */
    gboolean persistent, undefine_source, no_agent, no_standby, force;
    gboolean postcopy, auto_converge, postcopy_after_precopy, tls;
    /* --no-X: off, whatever the configuration's X says */
    gboolean no_persistent, no_undefine_source, no_postcopy, no_auto_converge;
    gboolean timeout_suspend, timeout_postcopy, timeout_abort;
    gint64 bandwidth;
    gint parallel, parallel_connections, postcopy_after, timeout;
    gint agent_timeout, prepare_timeout, unplug_timeout, resume_timeout, plug_attempts;
    gboolean verbose, quiet, json, version, recover;
    char **args;
} Cli;

static void cli_clear(Cli *cli)
{
    g_free(cli->config_path);
    g_free(cli->state_dir);
    g_free(cli->connect);
    g_free(cli->migrate_uri);
    g_free(cli->agent_channel);
    g_free(cli->alias_prefix);
    g_free(cli->target_vf);
    g_free(cli->hotmigd);
    g_strfreev(cli->args);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Cli, cli_clear)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Cli, cli_clear) /* clears what the pointer points to */

#define CLI_INIT                                                                                   \
    {                                                                                              \
        .bandwidth = UNSET, .parallel = UNSET, .parallel_connections = UNSET,                     \
        .postcopy_after = UNSET, .timeout = UNSET,                                                 \
        .agent_timeout = UNSET, .prepare_timeout = UNSET, .unplug_timeout = UNSET,                 \
        .resume_timeout = UNSET, .plug_attempts = UNSET,                                           \
    }

static gboolean usage_error(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static gboolean usage_error(GError **error, const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error_literal(error, ORCH_ERROR, ORCH_ERROR_INVALID, msg);
    return FALSE;
}

/* A count of seconds from the command line (@given, UNSET when absent: the configuration's
 * stays in *@ret_ms). */
static gboolean take_seconds(const char *option, gint given, guint min, guint *ret_ms,
                             GError **error)
{
    if (given == UNSET)
        return TRUE;
    if (given < (gint)min || given > 24 * 3600)
        return usage_error(error, "%s must be between %u and 86400 seconds, not %d", option, min,
                           given);
    *ret_ms = (guint)given * 1000;
    return TRUE;
}

/* How the user asked for @key's value, for messages: "--OPTION" when the command line gave it
 * (@given), else "KEY = VALUE (FILE:LINE)" from the configuration (owned). */
static char *origin(gboolean given, const char *option, const HmConfig *config, HmConfigKey key)
{
    g_autofree char *value = NULL;

    if (given)
        return g_strdup(option);
    switch (hm_config_key_type(key)) {
    case HM_CONFIG_TYPE_BOOL:
        value = g_strdup(hm_config_get_bool(config, key) ? "true" : "false");
        break;
    case HM_CONFIG_TYPE_UINT:
        value = g_strdup_printf("%" G_GUINT64_FORMAT, hm_config_get_uint(config, key));
        break;
    default:
        value = g_strdup(hm_config_get_string(config, key));
        break;
    }
    if (!hm_config_get_line(config, key))
        return g_strdup_printf("%s = %s (default)", hm_config_key_name(key), value);
    return g_strdup_printf("%s = %s (%s:%u)", hm_config_key_name(key), value,
                           hm_config_get_path(config), hm_config_get_line(config, key));
}

/* Rejects what libvirt and QEMU would refuse, before anything is touched, naming the options
 * (or configuration lines) that clash. @opts is complete. */
static gboolean check_combinations(const Cli *cli, const HmConfig *config, const OrchOptions *opts,
                                   GError **error)
{
    gboolean action_given = cli->timeout_suspend || cli->timeout_postcopy || cli->timeout_abort;
    g_autofree char *postcopy_after = origin(cli->postcopy_after != UNSET, "--postcopy-after",
                                             config, HM_CONFIG_MIGRATE_POSTCOPY_AFTER);
    g_autofree char *action =
        origin(action_given, "--timeout-postcopy", config, HM_CONFIG_MIGRATE_TIMEOUT_ACTION);
    g_autofree char *postcopy =
        origin(cli->postcopy, "--postcopy", config, HM_CONFIG_MIGRATE_POSTCOPY);
    g_autofree char *parallel =
        origin(cli->parallel != UNSET || cli->parallel_connections != UNSET, "--parallel",
               config, HM_CONFIG_MIGRATE_PARALLEL);
    static const char *const migrate_schemes[] = {"tcp", "rdma", "unix", NULL};
    g_autofree char *scheme = opts->migrate_uri ? g_uri_parse_scheme(opts->migrate_uri) : NULL;

    if (opts->postcopy_after_ms && !opts->postcopy)
        return usage_error(error, "%s needs --postcopy (or postcopy = true)%s", postcopy_after,
                           cli->no_postcopy ? ", which --no-postcopy turns off" : "");
    if (opts->timeout_action == ORCH_TIMEOUT_POSTCOPY && !opts->postcopy)
        return usage_error(error, "%s needs --postcopy (or postcopy = true)%s", action,
                           cli->no_postcopy ? ", which --no-postcopy turns off: give "
                                              "--timeout-suspend or --timeout-abort"
                                            : "");
    if (opts->postcopy && opts->parallel)
        return usage_error(error,
                           "%s and %s exclude each other: QEMU does not combine post-copy with "
                           "parallel (multifd) connections",
                           postcopy, parallel);
    if (opts->postcopy_after_ms && opts->migrate_timeout_ms &&
        opts->postcopy_after_ms >= opts->migrate_timeout_ms &&
        opts->timeout_action != ORCH_TIMEOUT_POSTCOPY) {
        g_autofree char *timeout =
            origin(cli->timeout != UNSET, "--timeout", config, HM_CONFIG_MIGRATE_TIMEOUT);

        return usage_error(error, "%s (%u s) must come before %s (%u s)", postcopy_after,
                           opts->postcopy_after_ms / 1000, timeout,
                           opts->migrate_timeout_ms / 1000);
    }
    /* libvirt's QEMU driver takes these three; it would refuse another only once the VFs are
     * unplugged. */
    if (opts->migrate_uri && (!scheme || !g_strv_contains(migrate_schemes, scheme)))
        return usage_error(error,
                           "--migrateuri '%s': libvirt takes tcp://HOST[:PORT], "
                           "rdma://HOST[:PORT] or unix:///PATH",
                           opts->migrate_uri);
    return TRUE;
}

/* A boolean of [migrate] (already in *@value) that --OPTION turns on and --no-OPTION off,
 * whatever the configuration says. */
static gboolean take_switch(const char *option, gboolean yes, gboolean no, gboolean *value,
                            GError **error)
{
    if (yes && no)
        return usage_error(error, "--%s and --no-%s exclude each other", option, option);
    if (yes || no)
        *value = yes;
    return TRUE;
}

/* The destination's hotmigd: --hotmigd, else the [host NAME] group whose uri is the
 * destination URI (its hotmigd key, else its URI's server), else the destination URI's server;
 * with [migrate] hotmigd-port when derived. */
static char *hotmigd_url_find(const Cli *cli, const HmConfig *config, const char *dest_uri,
                              GError **error)
{
    GPtrArray *hosts = hm_config_get_hosts(config);
    const char *uri = dest_uri ? dest_uri : "qemu:///system";
    g_autoptr(GUri) parsed = NULL;
    const char *server;

    if (cli && cli->hotmigd) {
        if (!g_str_has_prefix(cli->hotmigd, "https://") ||
            !g_uri_is_valid(cli->hotmigd, G_URI_FLAGS_NONE, NULL)) {
            usage_error(error, "--hotmigd '%s' is not an https:// URL", cli->hotmigd);
            return NULL;
        }
        return g_strdup(cli->hotmigd);
    }
    for (guint i = 0; i < hosts->len; i++) {
        const HmConfigHost *host = g_ptr_array_index(hosts, i);

        if (!g_str_equal(host->uri, uri) && !g_str_equal(host->name, uri))
            continue;
        if (host->hotmigd)
            return g_strdup(host->hotmigd);
        uri = host->uri;
        break;
    }
    parsed = g_uri_parse(uri, G_URI_FLAGS_NONE, NULL);
    if (!parsed) {
        usage_error(error,
                    "Cannot tell where the hotmigd of destination '%s' listens: not a URI; give "
                    "--hotmigd URL or a [host NAME] group with that uri",
                    dest_uri);
        return NULL;
    }
    /* A URI without a server (qemu:///system) names this host, as for libvirt. */
    server = g_uri_get_host(parsed) && *g_uri_get_host(parsed) ? g_uri_get_host(parsed)
                                                                 : "localhost";
    return g_strdup_printf("https://%s%s%s:%" G_GUINT64_FORMAT, strchr(server, ':') ? "[" : "",
                           server, strchr(server, ':') ? "]" : "",
                           hm_config_get_uint(config, HM_CONFIG_MIGRATE_HOTMIGD_PORT));
}

/* The domain and the hosts: DOMAIN DEST_URI (a [host NAME] may stand for its URI), or
 * --recover [DOMAIN]; --connect, else [migrate] connect. */
static gboolean options_take_hosts(const Cli *cli, const HmConfig *config, OrchOptions *opts,
                                   GError **error)
{
    const char *connect =
        cli->connect ? cli->connect : hm_config_get_string(config, HM_CONFIG_MIGRATE_CONNECT);

    if (cli->dry_run && cli->recover)
        return usage_error(error, "--dry-run and --recover exclude each other: a recovery acts at "
                                  "once (it finishes or undoes the journaled migrations)");
    if (cli->quiet && cli->verbose)
        return usage_error(error, "--quiet and --verbose exclude each other");
    /* A [host NAME] may stand for its URI, for the source as for the destination. */
    if (*connect && !strstr(connect, ":/") && hm_config_find_host(config, connect))
        connect = hm_config_find_host(config, connect)->uri;
    if (cli->recover) {
        if (cli->args && g_strv_length(cli->args) > 1)
            return usage_error(error, "--recover takes at most one DOMAIN (see --help)");
        opts->domain = g_strdup(cli->args ? cli->args[0] : NULL);
    } else {
        if (!cli->args || g_strv_length(cli->args) != 2)
            return usage_error(error, "expected DOMAIN and DEST (a libvirt URI or a [host NAME] of the configuration; see --help)");
        opts->domain = g_strdup(cli->args[0]);
        opts->dest_uri = g_strdup(cli->args[1]);
        if (hm_config_find_host(config, opts->dest_uri) && !strstr(opts->dest_uri, ":/")) {
            g_free(opts->dest_uri);
            opts->dest_uri = g_strdup(hm_config_find_host(config, cli->args[1])->uri);
        }
    }
    opts->source_uri = *connect ? g_strdup(connect) : NULL;
    return TRUE;
}

/* The numbers the command line gives, checked, over the configuration's. */
static gboolean options_take_numbers(const Cli *cli, OrchOptions *opts, GError **error)
{
    if (cli->bandwidth != UNSET && (cli->bandwidth < 0 || cli->bandwidth > G_MAXUINT32))
        return usage_error(error,
                           "--bandwidth must be between 0 and %u MiB/s, not %" G_GINT64_FORMAT,
                           G_MAXUINT32, cli->bandwidth);
    if (cli->bandwidth != UNSET)
        opts->bandwidth_mib = (guint64)cli->bandwidth;
    /* --parallel-connections N is virsh's spelling of --parallel N. */
    if (cli->parallel != UNSET && cli->parallel_connections != UNSET &&
        cli->parallel != cli->parallel_connections)
        return usage_error(error, "--parallel %d and --parallel-connections %d disagree",
                           cli->parallel, cli->parallel_connections);
    if (cli->parallel == UNSET && cli->parallel_connections != UNSET &&
        (cli->parallel_connections < 1 || cli->parallel_connections > 255))
        return usage_error(error,
                           "--parallel-connections must be between 1 and 255 connections, not %d",
                           cli->parallel_connections);
    if (cli->parallel != UNSET && (cli->parallel < 1 || cli->parallel > 255))
        return usage_error(error, "--parallel must be between 1 and 255 connections, not %d",
                           cli->parallel);
    if (cli->parallel != UNSET)
        opts->parallel = (guint)cli->parallel;
    else if (cli->parallel_connections != UNSET)
        opts->parallel = (guint)cli->parallel_connections;
    if (cli->plug_attempts != UNSET && (cli->plug_attempts < 1 || cli->plug_attempts > 100))
        return usage_error(error, "--plug-attempts must be between 1 and 100, not %d",
                           cli->plug_attempts);
    if (cli->plug_attempts != UNSET)
        opts->plug_attempts = (guint)cli->plug_attempts;
    return take_seconds("--agent-timeout", cli->agent_timeout, 1, &opts->agent_timeout_ms,
                        error) &&
           take_seconds("--prepare-timeout", cli->prepare_timeout, 1, &opts->prepare_timeout_ms,
                        error) &&
           take_seconds("--unplug-timeout", cli->unplug_timeout, 1, &opts->unplug_timeout_ms,
                        error) &&
           take_seconds("--resume-timeout", cli->resume_timeout, 1, &opts->resume_timeout_ms,
                        error) &&
           take_seconds("--timeout", cli->timeout, 1, &opts->migrate_timeout_ms, error) &&
           take_seconds("--postcopy-after", cli->postcopy_after, 1, &opts->postcopy_after_ms,
                        error);
}

/* Fills @opts from the configuration (orch_options_take_config()), then the command line on
 * top. */
static gboolean options_build(const Cli *cli, const HmConfig *config, OrchOptions *opts,
                              GError **error)
{
    int actions = !!cli->timeout_suspend + !!cli->timeout_postcopy + !!cli->timeout_abort;

    orch_options_take_config(opts, config);
    if (!options_take_hosts(cli, config, opts, error))
        return FALSE;
    /* [hotmigd] state-dir (orch_options_take_config()), unless told otherwise. */
    if (cli->state_dir && *cli->state_dir) {
        g_free(opts->state_dir);
        opts->state_dir = g_strdup(cli->state_dir);
    } else if (g_getenv("HOTMIG_STATE_DIR") && *g_getenv("HOTMIG_STATE_DIR")) {
        g_free(opts->state_dir);
        opts->state_dir = g_strdup(g_getenv("HOTMIG_STATE_DIR"));
    }
    opts->migrate_uri = g_strdup(cli->migrate_uri);
    opts->target_vf = g_strdup(cli->target_vf);
    if (cli->agent_channel) {
        g_free(opts->agent_channel);
        opts->agent_channel = g_strdup(cli->agent_channel);
    }
    if (cli->alias_prefix) {
        g_free(opts->alias_prefix);
        opts->alias_prefix = g_strdup(cli->alias_prefix);
    }
    opts->no_agent = cli->no_agent;
    opts->no_standby = cli->no_standby;
    opts->force = cli->force;
    if (!take_switch("persistent", cli->persistent, cli->no_persistent, &opts->persistent,
                     error) ||
        !take_switch("undefinesource", cli->undefine_source, cli->no_undefine_source,
                     &opts->undefine_source, error) ||
        !take_switch("postcopy", cli->postcopy, cli->no_postcopy, &opts->postcopy, error) ||
        !take_switch("auto-converge", cli->auto_converge, cli->no_auto_converge,
                     &opts->auto_converge, error) ||
        !options_take_numbers(cli, opts, error))
        return FALSE;
    /* --no-postcopy also drops the configuration's switch time: it only applies to post-copy. */
    if (cli->no_postcopy && cli->postcopy_after == UNSET)
        opts->postcopy_after_ms = 0;
    opts->tls = cli->tls;
    if (cli->postcopy_after_precopy) {
        if (!opts->postcopy)
            return usage_error(error, "--postcopy-after-precopy needs --postcopy (or postcopy = "
                                      "true)%s",
                               cli->no_postcopy ? ", which --no-postcopy turns off" : "");
        if (cli->postcopy_after != UNSET)
            return usage_error(error,
                               "--postcopy-after-precopy and --postcopy-after exclude each other");
        opts->postcopy_after_precopy = TRUE;
        opts->postcopy_after_ms = 0; /* the first pass decides, not the configuration's time */
    }

    if (actions > 1)
        return usage_error(
            error, "--timeout-suspend, --timeout-postcopy and --timeout-abort exclude each other");
    if (actions && !opts->migrate_timeout_ms)
        return usage_error(error, "--timeout-%s needs --timeout (or timeout in the configuration)",
                           cli->timeout_suspend    ? "suspend"
                           : cli->timeout_postcopy ? "postcopy"
                                                   : "abort");
    if (actions)
        opts->timeout_action = cli->timeout_suspend    ? ORCH_TIMEOUT_SUSPEND
                               : cli->timeout_postcopy ? ORCH_TIMEOUT_POSTCOPY
                                                       : ORCH_TIMEOUT_ABORT;
    return check_combinations(cli, config, opts, error);
}

/* ---- cancellation ------------------------------------------------------------------------- */

/* SIGINT, SIGTERM and SIGHUP are blocked in every thread and taken by this one, which cancels
 * the migration: the orchestrator aborts the libvirt job and undoes what was done. SIGHUP is an
 * SSH session or terminal that went away mid-migration: undone like Ctrl-C, not left with the
 * VF unplugged and the processes quiesced. */
static gpointer signal_thread(gpointer data)
{
    GCancellable *cancellable = data;
    sigset_t set;
    int sig;

    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    for (;;) {
        if (sigwait(&set, &sig) != 0)
            continue;
        if (g_cancellable_is_cancelled(cancellable)) {
            fprintf(stderr, "migrate-vm: already cancelling (undoing the migration); "
                            "kill -9 leaves it for 'migrate-vm --recover'\n");
            continue;
        }
        fprintf(stderr, "migrate-vm: %s: cancelling the migration and undoing it\n",
                g_strsignal(sig));
        g_cancellable_cancel(cancellable);
    }
    return NULL;
}

static void signals_take(GCancellable *cancellable)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any other thread starts */
    /* The thread lives until the process ends: it keeps its own reference. */
    g_thread_unref(g_thread_new("signals", signal_thread, g_object_ref(cancellable)));
}

/* ---- recovery ----------------------------------------------------------------------------- */

static int recover_main(const Cli *cli, const OrchOptions *opts)
{
    g_autoptr(GPtrArray) results = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *out = NULL;
    gboolean ok = orch_recover(opts, &results, &error);

    out =
        cli->json ? orch_recovery_format_json(results, TRUE) : orch_recovery_format_table(results);
    fputs(out, stdout);
    if (cli->json)
        fputc('\n', stdout);
    fflush(stdout);
    if (ok)
        return EXIT_MIGRATED;
    fprintf(stderr, "migrate-vm: error: %s\n", error->message);
    return EXIT_ROLLBACK_FAILED;
}

/* ---- pre-flight ------------------------------------------------------------------------------ */

static int dry_run_main(const Cli *cli, OrchOptions *opts)
{
    g_autoptr(GPtrArray) checks = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *out = NULL;
    gboolean ok = orch_preflight(opts, &checks, &error);

    out = cli->json ? orch_checks_format_json(checks, TRUE) : orch_checks_format_table(checks);
    fputs(out, stdout);
    if (cli->json)
        fputc('\n', stdout);
    fflush(stdout);
    if (ok)
        return EXIT_MIGRATED;
    fprintf(stderr, "migrate-vm: %s\n", error->message);
    return EXIT_PREFLIGHT;
}

/* ---- configuration ------------------------------------------------------------------------ */

gboolean cmd_migrate_check_config(const HmConfig *config, GError **error)
{
    g_auto(Cli) cli = CLI_INIT;
    g_auto(OrchOptions) opts = {0};

    orch_options_init(&opts);
    cli.args = g_strsplit("DOMAIN DEST_URI", " ", -1);
    return options_build(&cli, config, &opts, error);
}

/* ---- the command line ---------------------------------------------------------------------- */

static const char help_description[] =
    "Subcommands:\n"
    "  migrate-vm --dry-run DOMAIN DEST\n"
    "                                   check, changing nothing, whether DOMAIN could move now\n"
    "  migrate-vm --recover [DOMAIN]    finish or undo interrupted migrations (after kill -9,\n"
    "                                   a crash, a reboot) from their journal\n"
    "  migrate-vm config check [--skip-files] [FILE]\n"
    "                                   check a configuration file, what it means too, and report\n"
    "                                   every problem (default $" HM_CONFIG_ENV ", else " HM_CONFIG_PATH_DEFAULT
    ")\n"
    "  migrate-vm config sample         print the commented sample configuration\n"
    "  migrate-vm plan consolidate|drain HOST|balance [--snapshot FILE]\n"
    "                                   plan migrations (from a snapshot, or asking hotmigd)\n"
    "  migrate-vm drain HOST [--deadline SEC] [--wait]\n"
    "                                   have this host's hotmigd move every VM off HOST\n"
    "  migrate-vm run PLAN_FILE [--wait] have hotmigd run a plan\n"
    "  migrate-vm status [ID] [--json]  hosts and schedules as this host's hotmigd sees them\n"
    "\n"
    "Values not given on the command line come from the configuration file; --no-persistent,\n"
    "--no-undefinesource, --no-auto-converge and --no-postcopy turn off what it turns on.\n"
    "\n"
    "Exit status:\n"
    "  0   migrated: the domain runs on the destination with its VFs, processes resumed\n"
    "  1   failed for another reason (see the message)\n"
    "  2   bad usage: options, arguments, or a combination libvirt refuses; nothing was done\n"
    "  3   a phase failed and undoing it failed too (or --recover failed): the report says\n"
    "      what the domain lacks; the journal is kept for --recover\n"
    "  4   the configuration file is unreadable or invalid; nothing was done\n"
    "  5   cancelled by SIGINT, SIGTERM or SIGHUP; what was done is undone\n"
    "  6   another migrate-vm is migrating or recovering this domain; nothing was done\n"
    "  7   an earlier migration of this domain was interrupted: run --recover first\n"
    "  8   a --dry-run check failed (each check is one line on stdout); nothing was done\n"
    "  9   a process in the guest used what a migration cannot carry (memory windows, ODP,\n"
    "      device memory, rdma_cm...): refused, nothing was done; --force moves anyway\n"
    "  10  connect failed (a host, or the domain on the source); nothing was done\n"
    "  11  inspect failed (the domain XML)\n"
    "  12  target-vf: the destination's hotmigd is unreachable or has no suitable free VF\n"
    "  13  prepare: the agent did not answer or the processes did not quiesce\n"
    "  14  unplug: the guest did not release the VF in time\n"
    "  15  migrate: libvirt failed (or --timeout-abort)\n"
    "  16  plug: the destination refused the VF (the domain was migrated back)\n"
    "  17  resume: the agent did not resume the processes\n"
    "  Codes 10-17: the phase failed and was undone; the domain runs where it did.\n"
    "\n"
    "DEST: the destination's libvirt URI, or the NAME of a [host NAME] of the configuration\n"
    "(likewise --connect for the source).\n"
    "\n"
    "Examples:\n"
    "  migrate-vm --connect qemu+tls://hostA/system vm7 qemu+tls://hostB/system --verbose\n"
    "  migrate-vm --connect hostA vm7 hostB     (with [host hostA] and [host hostB] groups)\n"
    "\n"
    "See migrate-vm(1).";

/* The command line as given: the option table below fills it, at file scope as GOption wants
 * addresses; cmd_migrate_main() takes it over (and frees it). */
static Cli cli_given = CLI_INIT;

static GOptionEntry option_entries[] = {
    /* virsh migrate's options, in its order */
    {"live", 0, 0, G_OPTION_ARG_NONE, &cli_given.live,
     "Live migration (always: the guest keeps running)", NULL},
    {"p2p", 0, 0, G_OPTION_ARG_NONE, &cli_given.p2p,
     "Peer-to-peer migration (always: the source libvirtd talks to the destination)", NULL},
    {"persistent", 0, 0, G_OPTION_ARG_NONE, &cli_given.persistent,
     "Persist the domain on the destination", NULL},
    {"no-persistent", 0, 0, G_OPTION_ARG_NONE, &cli_given.no_persistent,
     "Do not, whatever the configuration's 'persistent' says", NULL},
    {"undefinesource", 0, 0, G_OPTION_ARG_NONE, &cli_given.undefine_source,
     "Undefine the domain on the source once migrated", NULL},
    {"no-undefinesource", 0, 0, G_OPTION_ARG_NONE, &cli_given.no_undefine_source,
     "Do not, whatever the configuration's 'undefinesource' says", NULL},
    {"auto-converge", 0, 0, G_OPTION_ARG_NONE, &cli_given.auto_converge,
     "Throttle the guest's vCPUs when the copy does not converge", NULL},
    {"no-auto-converge", 0, 0, G_OPTION_ARG_NONE, &cli_given.no_auto_converge,
     "Do not, whatever the configuration's 'auto-converge' says", NULL},
    {"postcopy", 0, 0, G_OPTION_ARG_NONE, &cli_given.postcopy,
     "Allow post-copy (then see --postcopy-after, --timeout-postcopy); a failure after "
     "the switch cannot be undone",
     NULL},
    {"no-postcopy", 0, 0, G_OPTION_ARG_NONE, &cli_given.no_postcopy,
     "Pre-copy only, whatever the configuration's 'postcopy' and 'postcopy-after' say",
     NULL},
    {"postcopy-after", 0, 0, G_OPTION_ARG_INT, &cli_given.postcopy_after,
     "Switch to post-copy after SEC seconds of pre-copy (needs --postcopy)", "SEC"},
    {"postcopy-after-precopy", 0, 0, G_OPTION_ARG_NONE, &cli_given.postcopy_after_precopy,
     "Switch to post-copy once the first pass of pre-copy is done (needs --postcopy)", NULL},
    {"tls", 0, 0, G_OPTION_ARG_NONE, &cli_given.tls,
     "Encrypt the migration data with TLS (qemu.conf migrate_tls_x509_cert_dir, default /etc/pki/qemu)",
     NULL},
    {"connect", 'c', 0, G_OPTION_ARG_STRING, &cli_given.connect,
     "Source hypervisor connection URI (default: config 'connect', else libvirt's)", "URI"},
    {"migrateuri", 0, 0, G_OPTION_ARG_STRING, &cli_given.migrate_uri,
     "Hypervisor migration data URI, e.g. tcp://10.0.0.2:49152", "URI"},
    {"bandwidth", 0, 0, G_OPTION_ARG_INT64, &cli_given.bandwidth,
     "Migration bandwidth limit in MiB/s (0: unlimited)", "MIB"},
    {"parallel", 0, 0, G_OPTION_ARG_INT, &cli_given.parallel,
     "Migrate over N parallel connections (QEMU multifd, 1-255)", "N"},
    {"parallel-connections", 0, 0, G_OPTION_ARG_INT, &cli_given.parallel_connections,
     "The same, as virsh spells it", "N"},
    {"timeout", 0, 0, G_OPTION_ARG_INT, &cli_given.timeout,
     "When the memory copy takes longer than SEC seconds, take the timeout action "
     "(default: suspend the guest, as virsh)",
     "SEC"},
    {"timeout-suspend", 0, 0, G_OPTION_ARG_NONE, &cli_given.timeout_suspend,
     "On --timeout pause the guest so the copy completes (it resumes on the destination)",
     NULL},
    {"timeout-postcopy", 0, 0, G_OPTION_ARG_NONE, &cli_given.timeout_postcopy,
     "On --timeout switch to post-copy (needs --postcopy)", NULL},
    {"timeout-abort", 0, 0, G_OPTION_ARG_NONE, &cli_given.timeout_abort,
     "On --timeout abort the migration and undo: the domain stays on the source", NULL},
    {"verbose", 'v', 0, G_OPTION_ARG_NONE, &cli_given.verbose,
     "Print progress on stderr (a bar on a terminal, timestamped lines otherwise)", NULL},
    /* hotmig's own */
    {"no-agent", 0, 0, G_OPTION_ARG_NONE, &cli_given.no_agent,
     "Do not ask the guest agent to quiesce and resume (RDMA users see the VF vanish)",
     NULL},
    {"no-standby", 0, 0, G_OPTION_ARG_NONE, &cli_given.no_standby,
     "The RDMA connections pause for the whole move: no standby device carries them while the "
     "VF is away",
     NULL},
    {"force", 0, 0, G_OPTION_ARG_NONE, &cli_given.force,
     "Move even when a process used what a migration cannot carry (memory windows, ODP, "
     "device memory, rdma_cm): it is paused and may fail after the move; and move an "
     "OpenStack Nova instance behind Nova's back",
     NULL},
    {"agent-channel", 0, 0, G_OPTION_ARG_STRING, &cli_given.agent_channel,
     "Name of the guest agent's virtio-serial channel (default org.hotmig.agent.0)",
     "NAME"},
    {"target-vf", 0, 0, G_OPTION_ARG_STRING, &cli_given.target_vf,
     "Destination VF to plug (PCI address), instead of choosing a free one", "ADDR"},
    {"vf-alias-prefix", 0, 0, G_OPTION_ARG_STRING, &cli_given.alias_prefix,
     "Treat NICs whose alias has this prefix as VFs (the lab's stand-ins; default ua-hmvf)",
     "PREFIX"},
    {"agent-timeout", 0, 0, G_OPTION_ARG_INT, &cli_given.agent_timeout,
     "Seconds the agent has to answer the handshake (default: [migrate] agent-timeout)", "SEC"},
    {"prepare-timeout", 0, 0, G_OPTION_ARG_INT, &cli_given.prepare_timeout,
     "Seconds processes have to quiesce (default: [migrate] prepare-timeout)", "SEC"},
    {"unplug-timeout", 0, 0, G_OPTION_ARG_INT, &cli_given.unplug_timeout,
     "Seconds the guest has to release a VF (default: [migrate] unplug-timeout)", "SEC"},
    {"resume-timeout", 0, 0, G_OPTION_ARG_INT, &cli_given.resume_timeout,
     "Seconds to wait for the new RDMA device and the processes (default: [migrate] "
     "resume-timeout)",
     "SEC"},
    {"plug-attempts", 0, 0, G_OPTION_ARG_INT, &cli_given.plug_attempts,
     "Tries to plug a VF on the destination before migrating back (default: [migrate] "
     "plug-attempts)",
     "N"},
    {"hotmigd", 0, 0, G_OPTION_ARG_STRING, &cli_given.hotmigd,
     "The destination's hotmigd (default: from its [host NAME] group, else "
     "https://DEST-SERVER:16680)",
     "URL"},
    {"dry-run", 'n', 0, G_OPTION_ARG_NONE, &cli_given.dry_run,
     "Check whether the migration could run now, one line per check, and change nothing",
     NULL},
    {"recover", 0, 0, G_OPTION_ARG_NONE, &cli_given.recover,
     "Finish or undo the interrupted migrations of DOMAIN (default: of every domain) "
     "from their journal, and exit",
     NULL},
    {"state-dir", 0, 0, G_OPTION_ARG_FILENAME, &cli_given.state_dir,
     "Migration journals and locks (default $HOTMIG_STATE_DIR, else [hotmigd] state-dir, as hotmigd's)",
     "DIR"},
    {"config", 0, 0, G_OPTION_ARG_FILENAME, &cli_given.config_path,
     "Configuration file (default $HOTMIG_CONFIG, else " HM_CONFIG_PATH_DEFAULT
     " when it exists)",
     "FILE"},
    {"quiet", 'q', 0, G_OPTION_ARG_NONE, &cli_given.quiet,
     "No progress, not even the bar on a terminal", NULL},
    {"json", 0, 0, G_OPTION_ARG_NONE, &cli_given.json,
     "Print the report as JSON on stdout (for scripts)", NULL},
    {"version", 'V', 0, G_OPTION_ARG_NONE, &cli_given.version, "Print the version and exit",
     NULL},
    {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_STRING_ARRAY, &cli_given.args, NULL, NULL},
    {NULL, 0, 0, 0, NULL, NULL, NULL},
};

/* Parses the command line into cli_given; FALSE (a message printed) on bad usage. */
static gboolean options_parse(int *argc, char ***argv)
{
    g_autoptr(GOptionContext) ctx =
        g_option_context_new("DOMAIN DEST - live-migrate a domain that holds VFs");
    g_autoptr(GError) error = NULL;

    g_option_context_set_summary(
        ctx, "Quiesces the guest's RDMA users through the hotmig agent, unplugs the domain's\n"
             "SR-IOV VFs, live-migrates it (peer-to-peer) and plugs VFs on the destination.\n"
             "A failed phase is undone: the domain stays on the source with its VFs.");
    g_option_context_set_description(ctx, help_description);
    g_option_context_add_main_entries(ctx, option_entries, NULL);
    if (!g_option_context_parse(ctx, argc, argv, &error)) {
        fprintf(stderr, "migrate-vm: %s\n", error->message);
        return FALSE;
    }
    return TRUE;
}

/* How progress is shown: journald entries when stderr is the journal, a bar on a terminal,
 * lines with --verbose, else nothing. */
static void progress_start(Progress *progress, const Cli *cli, OrchOptions *opts)
{
    g_autofree char *id = g_uuid_string_random();

    g_mutex_init(&progress->lock);
    progress->domain = opts->domain;
    g_strlcpy(progress->migration_id, id, sizeof(progress->migration_id));
    if (g_log_writer_is_journald(fileno(stderr)))
        progress->mode = PROGRESS_JOURNAL;
    else if (cli->quiet)
        progress->mode = PROGRESS_NONE;
    else if (isatty(fileno(stderr)) && g_getenv("TERM") && !g_str_equal(g_getenv("TERM"), "dumb"))
        progress->mode = PROGRESS_BAR;
    else if (cli->verbose)
        progress->mode = PROGRESS_LINES;
    if (progress->mode != PROGRESS_NONE) {
        opts->progress = progress_report;
        opts->progress_opaque = progress;
    }
}

/* The report on stdout: JSON with --json, else the table (unless nothing got past connecting:
 * then the error says it all). */
static void report_print(const Cli *cli, const OrchReport *report, gboolean ok)
{
    if (cli->json) {
        g_autofree char *out = orch_report_format_json(report, TRUE);
        printf("%s\n", out);
    } else if (ok || report->phases[ORCH_PHASE_CONNECT].status == ORCH_STATUS_OK) {
        g_autofree char *out = orch_report_format_table(report);
        fputs(out, stdout);
    }
    fflush(stdout);
}

/* The error, once, where it is finally handled: a journald entry with the migration's fields,
 * or a line on stderr. */
static void failure_log(const Progress *progress, const OrchOptions *opts,
                        const OrchReport *report, const GError *error)
{
    if (progress->mode == PROGRESS_JOURNAL)
        g_log_structured(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, HM_LOG_FIELD_MIGRATION_ID,
                         progress->migration_id, HM_LOG_FIELD_DOMAIN, opts->domain,
                         HM_LOG_FIELD_PHASE, orch_phase_to_string(report->failed_phase), "MESSAGE",
                         "error: %s", error->message);
    else
        fprintf(stderr, "migrate-vm: error: %s\n", error->message);
}

/* The exit status of a failed migration (main.c's list). */
static int failure_exit_status(const OrchReport *report, const GError *error)
{
    if (g_error_matches(error, ORCH_ERROR, ORCH_ERROR_ROLLBACK))
        return EXIT_ROLLBACK_FAILED;
    if (g_error_matches(error, ORCH_ERROR, ORCH_ERROR_CANCELLED))
        return EXIT_CANCELLED;
    if (g_error_matches(error, ORCH_ERROR, ORCH_ERROR_BUSY))
        return EXIT_BUSY;
    if (g_error_matches(error, ORCH_ERROR, ORCH_ERROR_UNFINISHED))
        return EXIT_UNFINISHED;
    if (g_error_matches(error, ORCH_ERROR, ORCH_ERROR_REFUSED))
        return EXIT_REFUSED;
    if (g_error_matches(error, ORCH_ERROR, ORCH_ERROR_INVALID) &&
        report->phases[ORCH_PHASE_CONNECT].status != ORCH_STATUS_OK)
        return EXIT_USAGE;
    /* The failed phase, undone: the unplug's undo plugs the VF back and marks it so. */
    if (report->failed_phase < ORCH_PHASE_LAST &&
        (report->phases[report->failed_phase].status == ORCH_STATUS_FAILED ||
         report->phases[report->failed_phase].status == ORCH_STATUS_UNDONE))
        return EXIT_PHASE_BASE + report->failed_phase;
    return EXIT_FAILED;
}

/* One migration with @opts: cancellable by SIGINT/SIGTERM/SIGHUP, progress shown, report printed. */
static int migrate_run(const Cli *cli, OrchOptions *opts)
{
    g_autoptr(GCancellable) cancellable = g_cancellable_new();
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;
    Progress progress = {.phase = -1};
    gboolean ok;

    opts->cancellable = cancellable;
    signals_take(cancellable);
    progress_start(&progress, cli, opts);
    ok = orch_migrate(opts, &report, &error);
    progress_end(&progress);
    report_print(cli, report, ok);
    if (ok)
        return EXIT_MIGRATED;
    failure_log(&progress, opts, report, error);
    return failure_exit_status(report, error);
}

int cmd_migrate_main(int argc, char **argv)
{
    g_autoptr(Cli) cli = &cli_given;
    g_auto(OrchOptions) opts = {0};
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfig) config = NULL;

    orch_options_init(&opts);
    if (!options_parse(&argc, &argv))
        return EXIT_USAGE;
    if (cli->version) {
        printf("migrate-vm %s\n", HOTMIG_VERSION);
        return EXIT_MIGRATED;
    }
    hm_log_setup("migrate-vm", cli->verbose);
    config = hm_config_open(cli->config_path, &error);
    if (!config) {
        cmd_print_lines("migrate-vm", error->message);
        return EXIT_CONFIG;
    }
    if (!options_build(cli, config, &opts, &error)) {
        fprintf(stderr, "migrate-vm: %s\n", error->message);
        return EXIT_USAGE;
    }
    if (cli->recover)
        return recover_main(cli, &opts);
    opts.hotmigd_url = hotmigd_url_find(cli, config, opts.dest_uri, &error);
    if (!opts.hotmigd_url) {
        fprintf(stderr, "migrate-vm: %s\n", error->message);
        return EXIT_USAGE;
    }
    /* The source's hotmigd ends the leases the domain leaves behind; best effort. */
    opts.source_hotmigd_url = hotmigd_url_find(NULL, config, opts.source_uri, NULL);
    if (cli->dry_run)
        return dry_run_main(cli, &opts);
    return migrate_run(cli, &opts);
}
