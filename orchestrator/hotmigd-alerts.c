/* hotmigd's wiring of the failure-prediction hook (alerts-daemon.c, alerts-input.c, the alert
 * listener in vfd-server.c) to the rest of the daemon: evacuations and migration statistics
 * from the scheduler, VF states from the pool. Kept out of hotmigd.c so that the daemon's main
 * only starts and stops it. */
#define G_LOG_DOMAIN "hotmigd"

#include "orchestrator/alerts-daemon-priv.h"

struct HotmigdAlerts {
    OrchAlerts *alerts;
    OrchAlertListener *listener;
    OrchAlertInputs *inputs;
    OrchVfdServer *server; /* borrowed */
    OrchVfdPool *pool;     /* borrowed */
    char *socket_path;
    char *exec;
};

/* No scheduler in this build: evacuations are refused (and the book lifts the host's
 * evacuating state at once). */
static gboolean hook_evacuate(gpointer data, const char *host, gint64 deadline, const char *reason,
                              char **ret_id, gboolean *ret_merged, char ***ret_late, GError **error)
{
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                "this hotmigd has no scheduler to run evacuations (not built in)");
    return FALSE;
}

static void hook_stats(gpointer data, OrchMetrics *metrics)
{
    HotmigdAlerts *hook = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) entries = orch_vfd_pool_list(hook->pool, NULL, &error);

    if (!entries) {
        g_warning("/metrics: cannot list the pool: %s", error->message);
        return;
    }
    metrics->have_vfs = TRUE;
    for (guint i = 0; i < entries->len; i++)
        metrics->vfs[((OrchVfdEntry *)g_ptr_array_index(entries, i))->state]++;
}

static const OrchAlertsOps hook_ops = {
    .evacuate = hook_evacuate,
    .stats = hook_stats,
};

HotmigdAlerts *hotmigd_alerts_start(const HmConfig *config, const char *name, OrchVfdPool *pool,
                                    OrchVfdServer *server, GError **error)
{
    g_autoptr(HotmigdAlerts) hook = g_new0(HotmigdAlerts, 1);
    guint port = hm_config_get_uint(config, HM_CONFIG_ALERTS_PORT);

    hook->pool = pool;
    hook->server = server;
    hook->alerts = orch_alerts_new(config, name, &hook_ops, hook, error);
    if (!hook->alerts)
        return NULL;
    if (!orch_alerts_knows_host(hook->alerts, name) && hm_config_get_hosts(config)->len > 0)
        g_warning(
            "This host '%s' is not one of the [host NAME] groups of the configuration: alerts about it are refused, and it acts for no other host (set [hotmigd] name)",
            name);
    if (port) {
        g_autofree char *why = NULL;

        /* Without a header the answer says whether there is a token at all. */
        if (!orch_alerts_authorized(hook->alerts, NULL, &why) && g_str_has_prefix(why, "no token"))
            g_warning("The alert listener refuses every webhook request: %s", why);
        hook->listener = orch_alert_listener_new(
            hm_config_get_string(config, HM_CONFIG_ALERTS_LISTEN), port, hook->alerts, error);
        if (!hook->listener)
            return NULL;
    }
    hook->inputs = orch_alert_inputs_new(config, hook->alerts, error);
    if (!hook->inputs)
        return NULL;
    orch_vfd_server_set_alerts(server, hook->alerts);
    hook->socket_path = g_strdup(hm_config_get_string(config, HM_CONFIG_ALERTS_SOCKET));
    hook->exec = g_strdup(hm_config_get_string(config, HM_CONFIG_ALERTS_EXEC));
    return g_steal_pointer(&hook);
}

void hotmigd_alerts_stop(HotmigdAlerts *hook)
{
    if (!hook)
        return;
    if (hook->server && hook->alerts)
        orch_vfd_server_set_alerts(hook->server, NULL);
    orch_alert_inputs_free(hook->inputs);
    orch_alert_listener_free(hook->listener);
    orch_alerts_unref(hook->alerts);
    g_free(hook->socket_path);
    g_free(hook->exec);
    g_free(hook);
}

char *hotmigd_alerts_describe(const HotmigdAlerts *hook)
{
    g_autoptr(GString) s = g_string_new("alerts: ");

    if (hook->listener)
        g_string_append_printf(s, "webhook and /metrics on port %u",
                               orch_alert_listener_get_port(hook->listener));
    else
        g_string_append(s, "no HTTP listener");
    g_string_append_printf(s, ", socket %s%s%s", *hook->socket_path ? "'" : "",
                           *hook->socket_path ? hook->socket_path : "none",
                           *hook->socket_path ? "'" : "");
    g_string_append_printf(s, ", command %s%s%s", *hook->exec ? "'" : "",
                           *hook->exec ? hook->exec : "none", *hook->exec ? "'" : "");
    return g_string_free(g_steal_pointer(&s), FALSE);
}
