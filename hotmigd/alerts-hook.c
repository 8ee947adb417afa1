/* hotmigd's wiring of the failure-prediction hook (hotmigd/alerts.c, alerts-input.c, the alert
 * listener in hotmigd/server.c) to the daemon (hotmigd/daemon.h): evacuations, quarantines and
 * migration statistics from its scheduler, VF states counted by its pool's worker thread,
 * /v1/alerts on its HTTPS server. Kept out of hotmigd/main.c so that main() only starts and stops it. */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/alerts-hook.h"

#include "hotmigd/alerts.h"
#include "hotmigd/daemon.h"
#include "hotmigd/inventory.h"

struct HotmigdAlertsHook {
    Hotmigd *daemon; /* borrowed */
    HotmigdAlerts *alerts;
    OrchAlertListener *listener;
    OrchAlertInputs *inputs;
};

static gboolean hook_evacuate(gpointer data, const char *host, gint64 deadline, const char *reason,
                              char **ret_id, gboolean *ret_merged, char ***ret_late, GError **error)
{
    HotmigdAlertsHook *hook = data;

    return hotmigd_evacuate(hook->daemon, host, deadline, reason, ret_id, ret_merged, ret_late,
                            error);
}

static gboolean hook_set_state(gpointer data, const char *host, PolHostState state,
                               const char *reason, GError **error)
{
    HotmigdAlertsHook *hook = data;

    return hotmigd_set_host_state(hook->daemon, host, state, reason, error);
}

static void hook_stats(gpointer data, HotmigdMetrics *metrics)
{
    HotmigdAlertsHook *hook = data;
    HotmigdStats stats = {0};

    hotmigd_get_stats(hook->daemon, &stats);
    metrics->migrations[HOTMIGD_METRICS_MIGRATION_OK] = stats.migrations_ok;
    metrics->migrations[HOTMIGD_METRICS_MIGRATION_FAILED] = stats.migrations_failed;
    metrics->migrations[HOTMIGD_METRICS_MIGRATION_SKIPPED] = stats.migrations_skipped;
    memcpy(metrics->phase_seconds_sum, stats.phase_seconds_sum, sizeof(stats.phase_seconds_sum));
    memcpy(metrics->phase_count, stats.phase_count, sizeof(stats.phase_count));
}

/* The pool is used by the HTTPS server's worker thread only (hotmigd/api.c): the VFs are
 * counted there, in turn with the pool's requests; /metrics waits for the count, paused, and
 * the main loop goes on. Nothing here may touch the hook when @done is called: at a stop the
 * worker delivers its last replies after the hook is gone. */
static void hook_vfs(gpointer data, HotmigdApiCountsFunc done, gpointer done_data)
{
    HotmigdAlertsHook *hook = data;
    HotmigdPool *pool = hotmigd_get_pool(hook->daemon);
    HotmigdServer *server = hotmigd_get_server(hook->daemon);

    if (!pool)
        done(NULL, "this hotmigd has no VF pool", done_data);
    else if (!server)
        done(NULL, "this hotmigd serves no HTTPS API, whose worker thread counts the pool",
             done_data);
    else
        hotmigd_api_worker_count_vfs(hotmigd_server_get_worker(server), pool, done, done_data);
}

static void hook_evacuation_done(Hotmigd *daemon, const char *host, gboolean ok, gpointer data)
{
    HotmigdAlertsHook *hook = data;

    hotmigd_alerts_evacuation_done(hook->alerts, host, ok);
}

static void hook_inventory_taken(Hotmigd *daemon, const HotmigdInventory *inventory, gpointer data)
{
    HotmigdAlertsHook *hook = data;

    for (guint i = 0; i < inventory->hosts->len; i++) {
        const HotmigdInvHost *host = g_ptr_array_index(inventory->hosts, i);

        /* A host whose libvirt does not answer is down; its hotmigd was not asked. */
        if (host->hotmigd_asked && hotmigd_alerts_knows_host(hook->alerts, host->name))
            hotmigd_alerts_set_answers(hook->alerts, host->name, host->hotmigd_answered);
    }
}

/* The alert book's transports: the plain-HTTP listener and /v1/alerts of the HTTPS server. */
static gboolean listener_authorized(gpointer owner, const char *authorization, char **ret_why)
{
    return hotmigd_alerts_authorized(owner, authorization, ret_why);
}

static void listener_webhook(gpointer owner, const char *body, gsize len, const char *peer,
                             HotmigdApiReplyFunc done, gpointer data)
{
    hotmigd_alerts_webhook(owner, body, len, peer, done, data);
}

static void listener_metrics(gpointer owner, HotmigdMetricsDone done, gpointer data)
{
    hotmigd_alerts_metrics(owner, done, data);
}

static const OrchAlertListenerOps listener_ops = {
    .authorized = listener_authorized,
    .webhook = listener_webhook,
    .metrics = listener_metrics,
    .metrics_content_type = HOTMIGD_METRICS_CONTENT_TYPE,
    .webhook_max_bytes = ORCH_ALERT_WEBHOOK_MAX_BYTES,
};

static HotmigdApiReply *server_alerts(gpointer data, const char *method, const char *body,
                                      gsize len, const char *peer, const HotmigdAuthzClient *who)
{
    return hotmigd_alerts_api_handle(data, method, body, len, peer, who ? who->host : NULL);
}

static const HotmigdAlertsOps hook_ops = {
    .evacuate = hook_evacuate,
    .set_state = hook_set_state,
    .stats = hook_stats,
    .vfs = hook_vfs,
};

void hotmigd_alerts_hook_reload(HotmigdAlertsHook *hook, const HmConfig *config)
{
    g_autofree char *why = NULL;

    g_return_if_fail(hook != NULL && config != NULL);
    hotmigd_alerts_reload_token(hook->alerts,
                                hm_config_get_string(config, HM_CONFIG_ALERTS_TOKEN_FILE));
    if (hook->listener && !hotmigd_alerts_authorized(hook->alerts, NULL, &why) &&
        g_str_has_prefix(why, "no token"))
        g_warning("The alert listener refuses every webhook request: %s", why);
}

HotmigdAlertsHook *hotmigd_alerts_hook_start(Hotmigd *daemon, GError **error)
{
    g_autoptr(HotmigdAlertsHook) hook = g_new0(HotmigdAlertsHook, 1);
    const HmConfig *config = hotmigd_get_config(daemon);
    const char *name = hotmigd_get_name(daemon);
    const char *socket_path = hm_config_get_string(config, HM_CONFIG_ALERTS_SOCKET);
    const char *exec = hm_config_get_string(config, HM_CONFIG_ALERTS_EXEC);
    guint port = hm_config_get_uint(config, HM_CONFIG_ALERTS_PORT);
    /* The HTTPS server's limits: the listener may face the network as well. */
    const OrchServerLimits limits = {
        .max_connections = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_MAX_CONNECTIONS),
        .handshake_timeout_s = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_HANDSHAKE_TIMEOUT),
        .idle_timeout_s = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_IDLE_TIMEOUT),
    };
    g_autofree char *where = NULL;

    hook->daemon = daemon;
    hook->alerts = hotmigd_alerts_new(config, name, &hook_ops, hook, error);
    if (!hook->alerts)
        return NULL;
    if (!hotmigd_alerts_knows_host(hook->alerts, name) && hm_config_get_hosts(config)->len > 0)
        g_warning(
            "This host '%s' is not one of the [host NAME] groups of the configuration: alerts about it are refused, and it acts for no other host (set [hotmigd] name)",
            name);
    if (port) {
        g_autofree char *why = NULL;

        /* Without a header the answer says whether there is a token at all. */
        if (!hotmigd_alerts_authorized(hook->alerts, NULL, &why) &&
            g_str_has_prefix(why, "no token"))
            g_warning("The alert listener refuses every webhook request: %s", why);
        hook->listener =
            orch_alert_listener_new(hm_config_get_string(config, HM_CONFIG_ALERTS_LISTEN), port,
                                    &limits, &listener_ops, hook->alerts, error);
        if (!hook->listener)
            return NULL;
    }
    hook->inputs = orch_alert_inputs_new(config, hook->alerts, error);
    if (!hook->inputs)
        return NULL;
    if (hotmigd_get_server(daemon))
        hotmigd_server_set_alerts(hotmigd_get_server(daemon), server_alerts, hook->alerts);
    hotmigd_set_evacuation_done(daemon, hook_evacuation_done, hook);
    hotmigd_set_inventory_taken(daemon, hook_inventory_taken, hook);

    where = port ? g_strdup_printf("http://%s:%u",
                                   *hm_config_get_string(config, HM_CONFIG_ALERTS_LISTEN)
                                       ? hm_config_get_string(config, HM_CONFIG_ALERTS_LISTEN)
                                       : "*",
                                   orch_alert_listener_get_port(hook->listener))
                 : g_strdup("no HTTP listener");
    g_message("Alerts for %s: webhook and /metrics on %s, socket %s%s%s, command %s%s%s", name,
              where, *socket_path ? "'" : "", *socket_path ? socket_path : "none",
              *socket_path ? "'" : "", *exec ? "'" : "", *exec ? exec : "none", *exec ? "'" : "");
    return g_steal_pointer(&hook);
}

void hotmigd_alerts_hook_stop(HotmigdAlertsHook *hook)
{
    if (!hook)
        return;
    if (hook->alerts) {
        hotmigd_set_evacuation_done(hook->daemon, NULL, NULL);
        hotmigd_set_inventory_taken(hook->daemon, NULL, NULL);
        if (hotmigd_get_server(hook->daemon))
            hotmigd_server_set_alerts(hotmigd_get_server(hook->daemon), NULL, NULL);
    }
    orch_alert_inputs_free(hook->inputs);
    orch_alert_listener_free(hook->listener);
    hotmigd_alerts_unref(hook->alerts);
    g_free(hook);
}
