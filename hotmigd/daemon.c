/* hotmigd's daemon object (hotmigd/daemon.h): made, reloaded and stopped here, with the VF pool,
 * the HTTPS server and the local API's listener; the daemon's commands bound to the local API
 * and to the HTTPS API's services. The cluster work is in the files under it (daemon-state-priv.h):
 * the inventory (inventory-refresh.c), the schedules (schedules.c), the migrations run for
 * other hosts (migrations.c), the local API's commands (commands.c). Everything here runs on
 * the daemon's main context. */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/daemon.h"

#include <errno.h>

#include "hotmigd/commands.h"
#include "hotmigd/daemon-state-priv.h"
#include "hotmigd/inventory-refresh.h"
#include "hotmigd/migrations.h"
#include "hotmigd/schedules.h"

/* How long binding a VF to vfio-pci may take (the kernel probes it synchronously). */
#define HOTMIGD_VFIO_TIMEOUT_MS 10000
/* How long libvirtd has to list its domains (which domain uses which VF) before a request that
 * needs it gets 503: the daemon serves one request at a time. */
#define HOTMIGD_LIBVIRT_TIMEOUT_MS 10000
/* The background inventory: how often (plans take a fresh one anyway). */
#define HOTMIGD_INVENTORY_INTERVAL_S 60

/* ---- simple things ------------------------------------------------------------------------- */

const char *hotmigd_get_name(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, NULL);
    return daemon->name;
}

const HmConfig *hotmigd_get_config(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, NULL);
    return daemon->config;
}

gboolean hotmigd_has_host(Hotmigd *daemon, const char *host)
{
    g_return_val_if_fail(daemon != NULL, FALSE);
    return hotmigd_run_move_env_find_host(&daemon->env, host) != NULL;
}

void hotmigd_set_evacuation_done(Hotmigd *daemon, HotmigdEvacuationDone cb, gpointer data)
{
    g_return_if_fail(daemon != NULL);
    daemon->evacuation_done = cb;
    daemon->evacuation_done_data = data;
}

void hotmigd_set_inventory_taken(Hotmigd *daemon, HotmigdInventoryTaken cb, gpointer data)
{
    g_return_if_fail(daemon != NULL);
    daemon->inventory_taken = cb;
    daemon->inventory_taken_data = data;
}

void hotmigd_get_stats(Hotmigd *daemon, HotmigdStats *ret_stats)
{
    g_return_if_fail(daemon && ret_stats);
    *ret_stats = daemon->stats;
}

guint hotmigd_get_port(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, 0);
    return daemon->server ? hotmigd_server_get_port(daemon->server) : 0;
}

/* For the alert wiring (hotmigd/alerts-hook.c). */
HotmigdPool *hotmigd_get_pool(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, NULL);
    return daemon->pool;
}

HotmigdServer *hotmigd_get_server(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, NULL);
    return daemon->server;
}

const char *hotmigd_get_socket_path(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, NULL);
    return hm_config_get_string(daemon->config, HM_CONFIG_HOTMIGD_SOCKET);
}

static void held_free(HotmigdHeld *held)
{
    g_free(held->reason);
    g_free(held);
}

gboolean hotmigd_set_host_state(Hotmigd *daemon, const char *host, PolHostState state,
                                const char *reason, GError **error)
{
    HotmigdHeld *held;

    g_return_val_if_fail(daemon != NULL, FALSE);
    if (!hotmigd_run_move_env_check_host(&daemon->env, host, error))
        return FALSE;
    if (state != POL_HOST_OK && state != POL_HOST_QUARANTINED) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "host '%s': only ok and quarantined can be set, not '%s'", host,
                    pol_host_state_to_string(state));
        return FALSE;
    }
    if (state == POL_HOST_OK) {
        if (g_hash_table_remove(daemon->held, host))
            g_message("Host '%s' is no longer held (%s)", host, reason ? reason : "lifted");
        return TRUE;
    }
    held = g_new0(HotmigdHeld, 1);
    held->state = state;
    held->reason = g_strdup(reason);
    g_hash_table_insert(daemon->held, g_strdup(host), held);
    g_message("Host '%s' held %s: it takes no VM in the plans (%s)", host,
              pol_host_state_to_string(state), reason ? reason : "no reason given");
    return TRUE;
}

/* ---- creating ------------------------------------------------------------------------------ */

static void config_host_free(HmConfigHost *host)
{
    g_free(host->name);
    g_free(host->uri);
    g_free(host->hotmigd);
    g_free(host);
}

/* The [host NAME] groups with their hotmigd URLs: the group's, else https://SERVER:PORT with
 * SERVER from its libvirt URI and PORT [migrate] hotmigd-port. */
static GPtrArray *daemon_hosts(const HmConfig *config)
{
    GPtrArray *groups = hm_config_get_hosts(config);
    GPtrArray *hosts = g_ptr_array_new_with_free_func((GDestroyNotify)config_host_free);

    for (guint i = 0; i < groups->len; i++) {
        const HmConfigHost *g = g_ptr_array_index(groups, i);
        HmConfigHost *h = g_new0(HmConfigHost, 1);

        h->name = g_strdup(g->name);
        h->uri = g_strdup(g->uri);
        h->line = g->line;
        h->hotmigd = hm_config_host_hotmigd_url(config, g);
        g_ptr_array_add(hosts, h);
    }
    return hosts;
}

static void options_free(OrchOptions *o)
{
    orch_options_clear(o);
    g_free(o);
}

/* [scheduler]: the limits the schedules share, min-stay, the bandwidth plans assume. */
static void daemon_scheduler_settings(Hotmigd *daemon, const HmConfig *config)
{
    daemon->limits.per_host_out = hm_config_get_uint(config, HM_CONFIG_SCHEDULER_PER_HOST_OUT);
    daemon->limits.per_host_in = hm_config_get_uint(config, HM_CONFIG_SCHEDULER_PER_HOST_IN);
    daemon->limits.total = hm_config_get_uint(config, HM_CONFIG_SCHEDULER_TOTAL);
    daemon->min_stay_s = hm_config_get_uint(config, HM_CONFIG_SCHEDULER_MIN_STAY);
    daemon->bandwidth = (double)hm_config_get_uint(config, HM_CONFIG_SCHEDULER_BANDWIDTH);
    daemon->host_value = (guint)hm_config_get_uint(config, HM_CONFIG_SCHEDULER_HOST_VALUE);
    daemon->cpu_allocation = (guint)hm_config_get_uint(config, HM_CONFIG_SCHEDULER_CPU_ALLOCATION);
}

/* What migrations run here start from: [migrate] and [hotmigd] state-dir of @c, into @o. */
static void daemon_migrate_options(Hotmigd *daemon, const HmConfig *c, OrchOptions *o)
{
    orch_options_init(o);
    orch_options_take_config(o, c); /* [hotmigd] state-dir included */
    o->connector = daemon->opts.connector;
}

static gboolean daemon_open_pool(Hotmigd *daemon, GError **error)
{
    const HmConfig *config = daemon->config;
    const char *run_dir = hm_config_get_string(config, HM_CONFIG_HOTMIGD_RUN_DIR);
    g_autofree char *lease_dir = g_build_filename(run_dir, "leases", NULL);
    g_auto(GStrv) pfs = hm_config_get_list(config, HM_CONFIG_POOL_PFS);
    g_auto(GStrv) vfs = hm_config_get_list(config, HM_CONFIG_POOL_VFS);
    g_auto(GStrv) standins = hm_config_get_list(config, HM_CONFIG_POOL_STANDINS);
    HotmigdPoolConfig pool_config = {
        .host_name = g_get_host_name(),
        .lease_dir = lease_dir,
        .lease_ttl_s = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_LEASE_TTL),
        .lease_ttl_max_s = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_LEASE_TTL_MAX),
        .pfs = (const char *const *)pfs,
        .vfs = (const char *const *)vfs,
        .standins = (const char *const *)standins,
    };
    gpointer host;

    if (g_mkdir_with_parents(run_dir, 0755) < 0) {
        int errsv = errno;

        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "Cannot create the run directory '%s': %s", run_dir, g_strerror(errsv));
        return FALSE;
    }
    host = hotmigd_host_new(hm_config_get_string(config, HM_CONFIG_HOTMIGD_SYSFS_ROOT),
                            hm_config_get_string(config, HM_CONFIG_HOTMIGD_CONNECT),
                            HOTMIGD_VFIO_TIMEOUT_MS, HOTMIGD_LIBVIRT_TIMEOUT_MS);
    hotmigd_host_set_standin_guids(host,
                                   hm_config_get_string(config, HM_CONFIG_POOL_STANDIN_GUIDS));
    daemon->pool = hotmigd_pool_new(&pool_config, &hotmigd_host_ops, host, error);
    if (!daemon->pool)
        return FALSE;
    g_message("Pool of %s: %u PFs, %u VFs, %u stand-ins; leases in '%s'",
              hotmigd_pool_host_name(daemon->pool), g_strv_length(pfs), g_strv_length(vfs),
              g_strv_length(standins), lease_dir);
    return TRUE;
}

static gboolean daemon_listen_https(Hotmigd *daemon, GError **error)
{
    const HmConfig *config = daemon->config;
    /* "*": every address; empty: this host's own URL's address, else loopback (never every
     * address by default: issue 15). */
    g_autofree char *listen = hm_config_listen_address(config);
    HotmigdServerConfig server_config = {
        .listen = listen,
        .max_connections = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_MAX_CONNECTIONS),
        .handshake_timeout_s = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_HANDSHAKE_TIMEOUT),
        .idle_timeout_s = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_IDLE_TIMEOUT),
        .port = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_PORT),
        .cert = hm_config_get_string(config, HM_CONFIG_HOTMIGD_SERVER_CERT),
        .key = hm_config_get_string(config, HM_CONFIG_HOTMIGD_SERVER_KEY),
        .ca = hm_config_get_string(config, HM_CONFIG_HOTMIGD_CA_CERT),
    };
    g_autoptr(GError) local = NULL;

    daemon->authz = hotmigd_authz_new(config);
    daemon->file_roots = hm_config_get_list(config, HM_CONFIG_HOTMIGD_FILE_ROOTS);
    server_config.authz = daemon->authz;
    server_config.file_roots = (const char *const *)daemon->file_roots;
    daemon->server = hotmigd_server_new(&server_config, daemon->pool, &local);
    if (!daemon->server) {
        /* Certificates that do not load are not a bad configuration file (exit 1, not 4). */
        local->code = ORCH_ERROR_FAILED;
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    hotmigd_server_set_services(daemon->server, &daemon->services);
    return TRUE;
}

/* The daemon's commands, bound to the local API (hotmigd/local-api.h) and, the snapshot, to the
 * HTTPS API's services (hotmigd/api.h). */
static void local_plan(gpointer owner, const HotmigdPlanRequest *req, HotmigdDone done,
                       gpointer data)
{
    hotmigd_plan_async(owner, req, done, data);
}

static void local_run(gpointer owner, PolPlan *plan, const char *reason, HotmigdDone done,
                      gpointer data)
{
    hotmigd_run_async(owner, plan, reason, done, data);
}

static void local_drain(gpointer owner, const char *host, gint64 deadline, const char *reason,
                        HotmigdDone done, gpointer data)
{
    hotmigd_drain_async(owner, host, deadline, reason, done, data);
}

static void local_snapshot(gpointer owner, HotmigdDone done, gpointer data)
{
    hotmigd_snapshot_async(owner, done, data);
}

static JsonNode *local_status(gpointer owner, const char *id, GError **error)
{
    return hotmigd_status(owner, id, error);
}

static guint local_watch(gpointer owner, const char *id, HotmigdWatchFunc fn, gpointer data,
                         GError **error)
{
    return hotmigd_watch(owner, id, fn, data, error);
}

static const HotmigdLocalApiOps local_ops = {
    .plan = local_plan,
    .run = local_run,
    .drain = local_drain,
    .snapshot = local_snapshot,
    .status = local_status,
    .watch = local_watch,
};

typedef struct {
    HotmigdApiSnapshotDone done;
    gpointer data;
} SnapshotCall;

static void service_snapshot_done(JsonNode *result, GError *error, gpointer data)
{
    SnapshotCall *c = data;
    g_autoptr(JsonNode) node = result;

    c->done(node ? json_to_string(node, TRUE) : NULL, error, c->data);
    g_free(c);
}

static void service_snapshot(gpointer data, HotmigdApiSnapshotDone done, gpointer done_data)
{
    SnapshotCall *c = g_new0(SnapshotCall, 1);

    c->done = done;
    c->data = done_data;
    hotmigd_snapshot_async(data, service_snapshot_done, c);
}

static gboolean daemon_listen_local(Hotmigd *daemon, GError **error)
{
    const char *path = hm_config_get_string(daemon->config, HM_CONFIG_HOTMIGD_SOCKET);
    g_autofree char *dir = g_path_get_dirname(path);
    g_autoptr(GError) local = NULL;

    if (g_mkdir_with_parents(dir, 0755) < 0) {
        int errsv = errno;

        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "Cannot create the directory of the local socket '%s': %s", path,
                    g_strerror(errsv));
        return FALSE;
    }
    daemon->local = hotmigd_local_api_new(&local_ops, daemon, path, &local);
    if (!daemon->local) {
        local->code = ORCH_ERROR_FAILED;
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    return TRUE;
}

gboolean hotmigd_recovering(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, FALSE);
    return daemon->recovery != NULL;
}

Hotmigd *hotmigd_new(HmConfig *config, const HotmigdOptions *opts, GError **error)
{
    g_autoptr(Hotmigd) daemon = g_new0(Hotmigd, 1);
    const char *name;
    guint interval;

    g_return_val_if_fail(config != NULL, NULL);
    daemon->config = config;
    if (opts)
        daemon->opts = *opts;
    name = hm_config_get_string(config, HM_CONFIG_HOTMIGD_NAME);
    daemon->name = g_strdup(*name ? name : g_get_host_name());
    daemon->hosts = daemon_hosts(config);
    daemon->cancel = g_cancellable_new();
    daemon->inventory_waiters = g_ptr_array_new_with_free_func(g_free);
    daemon->inventory_next = g_ptr_array_new_with_free_func(g_free);
    daemon->held =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)held_free);
    daemon->moved = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    hotmigd_schedules_init(daemon);
    hotmigd_migrations_init(daemon);
    if (!daemon->opts.cpu_sample_ms)
        daemon->opts.cpu_sample_ms = HOTMIGD_INVENTORY_CPU_SAMPLE_MS_DEFAULT;
    daemon_migrate_options(daemon, config, &daemon->migrate_opts);
    daemon->reloaded_opts = g_ptr_array_new_with_free_func((GDestroyNotify)options_free);
    daemon_scheduler_settings(daemon, config);
    daemon->share = pol_schedule_share_new();
    daemon->env = (HotmigdMoveEnv){
        .self = daemon->name,
        .hosts = daemon->hosts,
        .migrate_opts = &daemon->migrate_opts,
        .migrate = daemon->opts.migrate ? daemon->opts.migrate : orch_migrate,
        .recover = daemon->opts.recover,
        .recover_retry_ms = daemon->opts.recover_retry_ms,
        .poll_ms = daemon->opts.remote_poll_ms,
        .share = daemon->share,
    };
    daemon->services = (HotmigdApiServices){
        .data = daemon,
        .migration_start = hotmigd_migrations_start,
        .migration_get = hotmigd_migrations_get,
        .snapshot = service_snapshot,
    };
    if (daemon->hosts->len && !hotmigd_has_host(daemon, daemon->name))
        g_warning(
            "This host's name '%s' is not one of the [host NAME] groups: set [hotmigd] name; it runs no migration",
            daemon->name);
    if (!daemon->opts.no_pool && !daemon_open_pool(daemon, error))
        return NULL;
    if (!daemon->opts.no_https && !daemon_listen_https(daemon, error))
        return NULL;
    if (!daemon_listen_local(daemon, error))
        return NULL;
    interval = daemon->opts.inventory_interval_s ? daemon->opts.inventory_interval_s
                                                 : HOTMIGD_INVENTORY_INTERVAL_S;
    if (daemon->hosts->len && interval != G_MAXUINT)
        hotmigd_inventory_refresh_start(daemon, interval);
    daemon->recovery =
        hotmigd_recovery_start(&daemon->migrate_opts, daemon->opts.recover, &daemon->recovery);
    return g_steal_pointer(&daemon);
}

guint hotmigd_reload(Hotmigd *daemon, HmConfig *config)
{
    g_autoptr(HmConfig) fresh = config;
    OrchOptions *opts;
    guint pending = 0;

    g_return_val_if_fail(daemon != NULL && config != NULL, 0);

    /* What applies now: [migrate] for the migrations that start from now on (a running one
     * keeps its copy), [scheduler] for the schedules' next moves. */
    opts = g_new0(OrchOptions, 1);
    daemon_migrate_options(daemon, fresh, opts);
    /* The journals stay where recovery looks for them: state-dir waits for a restart. */
    g_free(opts->state_dir);
    opts->state_dir = g_strdup(hm_config_get_string(daemon->config, HM_CONFIG_HOTMIGD_STATE_DIR));
    g_ptr_array_add(daemon->reloaded_opts, opts);
    daemon->env.migrate_opts = opts;
    daemon_scheduler_settings(daemon, fresh);
    /* The rest is read once, at the start: name what changed and stays as it was. */
    for (int k = 0; k < HM_CONFIG_KEY_LAST; k++) {
        const char *group = hm_config_key_group(k);

        if (g_str_equal(group, "migrate") || g_str_equal(group, "scheduler") ||
            k == HM_CONFIG_ALERTS_TOKEN_FILE || hm_config_key_equal(daemon->config, fresh, k))
            continue;
        g_warning("Reload: [%s] %s changed; it takes effect when hotmigd restarts (a restart "
                  "ends the migrations it runs)",
                  group, hm_config_key_name(k));
        pending++;
    }
    if (!hm_config_hosts_equal(daemon->config, fresh)) {
        g_warning("Reload: the [host NAME] groups changed; they take effect when hotmigd restarts "
                  "(a restart ends the migrations it runs)");
        pending++;
    }
    g_message("Reloaded '%s': [migrate] and [scheduler] apply from now on%s",
              hm_config_get_path(fresh) ? hm_config_get_path(fresh) : "the defaults",
              pending ? "; other changes wait for a restart (see above)" : "");
    return pending;
}

void hotmigd_free(Hotmigd *daemon)
{
    if (!daemon)
        return;
    daemon->evacuation_done = NULL; /* stopping is not the end of an evacuation */
    if (daemon->recovery)           /* left to run; what it does not finish, the next start does */
        hotmigd_recovery_forget(daemon->recovery);
    hotmigd_inventory_refresh_stop(daemon);
    hotmigd_schedules_stop(daemon);
    if (daemon->remotes)
        g_ptr_array_set_size(daemon->remotes, 0);
    g_clear_pointer(&daemon->local, hotmigd_local_api_free);
    g_clear_pointer(&daemon->server, hotmigd_server_free);
    g_clear_pointer(&daemon->authz, hotmigd_authz_free);
    g_clear_pointer(&daemon->file_roots, g_strfreev);
    g_clear_pointer(&daemon->pool, hotmigd_pool_free);
    hotmigd_inventory_free(daemon->inventory);
    g_clear_pointer(&daemon->inventory_waiters, g_ptr_array_unref);
    g_clear_pointer(&daemon->inventory_next, g_ptr_array_unref);
    g_clear_pointer(&daemon->held, g_hash_table_unref);
    g_clear_pointer(&daemon->moved, g_hash_table_unref);
    g_clear_pointer(&daemon->evacuations, g_hash_table_unref);
    g_clear_pointer(&daemon->scheds, g_ptr_array_unref);
    g_clear_pointer(&daemon->remotes, g_ptr_array_unref);
    g_clear_pointer(&daemon->share, pol_schedule_share_free); /* after the schedules */
    g_clear_pointer(&daemon->hosts, g_ptr_array_unref);
    g_clear_object(&daemon->cancel);
    orch_options_clear(&daemon->migrate_opts);
    g_clear_pointer(&daemon->reloaded_opts, g_ptr_array_unref);
    g_clear_pointer(&daemon->config, hm_config_free);
    g_free(daemon->name);
    g_free(daemon);
}
