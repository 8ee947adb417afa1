/* OrchOptions: their defaults, the [migrate] configuration they are made from (the one place
 * that maps the configuration to a migration's options: migrate-vm and hotmigd both start from
 * it), their words for the report, and the hotmigd client they open. */
#include "engine/engine.h"

#include <string.h>

#include "engine/hotmigd-client.h"

/* The seconds of @key as milliseconds. */
static guint config_ms(const HmConfig *config, HmConfigKey key)
{
    return (guint)hm_config_get_uint(config, key) * 1000;
}

/* The numbers of [migrate] that every migration has (timeouts, plug attempts). */
static void options_take_limits(OrchOptions *opts, const HmConfig *config)
{
    opts->agent_timeout_ms = config_ms(config, HM_CONFIG_MIGRATE_AGENT_TIMEOUT);
    opts->prepare_timeout_ms = config_ms(config, HM_CONFIG_MIGRATE_PREPARE_TIMEOUT);
    opts->unplug_timeout_ms = config_ms(config, HM_CONFIG_MIGRATE_UNPLUG_TIMEOUT);
    opts->resume_timeout_ms = config_ms(config, HM_CONFIG_MIGRATE_RESUME_TIMEOUT);
    opts->plug_attempts = (guint)hm_config_get_uint(config, HM_CONFIG_MIGRATE_PLUG_ATTEMPTS);
}

void orch_options_init(OrchOptions *opts)
{
    /* The defaults are the configuration's (common/config.c), written once. */
    g_autoptr(HmConfig) defaults = hm_config_new();

    memset(opts, 0, sizeof(*opts));
    options_take_limits(opts, defaults);
    opts->hotmigd_timeout_ms = 10000;
}

void orch_options_take_config(OrchOptions *opts, const HmConfig *config)
{
    int action = orch_timeout_action_from_string(
        hm_config_get_string(config, HM_CONFIG_MIGRATE_TIMEOUT_ACTION));

    g_return_if_fail(opts && config);
    options_take_limits(opts, config);
    g_free(opts->agent_channel);
    opts->agent_channel = g_strdup(hm_config_get_string(config, HM_CONFIG_MIGRATE_AGENT_CHANNEL));
    g_free(opts->alias_prefix);
    opts->alias_prefix =
        g_strdup(hm_config_get_string(config, HM_CONFIG_MIGRATE_VF_ALIAS_PREFIX));
    opts->persistent = hm_config_get_bool(config, HM_CONFIG_MIGRATE_PERSISTENT);
    opts->undefine_source = hm_config_get_bool(config, HM_CONFIG_MIGRATE_UNDEFINE_SOURCE);
    opts->bandwidth_mib = hm_config_get_uint(config, HM_CONFIG_MIGRATE_BANDWIDTH);
    opts->parallel = (guint)hm_config_get_uint(config, HM_CONFIG_MIGRATE_PARALLEL);
    opts->auto_converge = hm_config_get_bool(config, HM_CONFIG_MIGRATE_AUTO_CONVERGE);
    opts->postcopy = hm_config_get_bool(config, HM_CONFIG_MIGRATE_POSTCOPY);
    opts->postcopy_after_ms = config_ms(config, HM_CONFIG_MIGRATE_POSTCOPY_AFTER);
    opts->migrate_timeout_ms = config_ms(config, HM_CONFIG_MIGRATE_TIMEOUT);
    /* The configuration checked the word. */
    opts->timeout_action = action >= 0 ? action : ORCH_TIMEOUT_SUSPEND;
    g_free(opts->tls_cert);
    opts->tls_cert = g_strdup(hm_config_get_string(config, HM_CONFIG_MIGRATE_CLIENT_CERT));
    g_free(opts->tls_key);
    opts->tls_key = g_strdup(hm_config_get_string(config, HM_CONFIG_MIGRATE_CLIENT_KEY));
    g_free(opts->tls_ca);
    opts->tls_ca = g_strdup(hm_config_get_string(config, HM_CONFIG_MIGRATE_CA_CERT));
    /* One directory for journals and locks, hotmigd's and migrate-vm's alike: the per-domain
     * lock keeps them apart only if both take it in the same place (issue 15). */
    g_free(opts->state_dir);
    opts->state_dir = g_strdup(hm_config_get_string(config, HM_CONFIG_HOTMIGD_STATE_DIR));
}

char *orch_options_format_migration(const OrchOptions *opts)
{
    g_autoptr(GString) out = g_string_new("live, p2p");

    g_return_val_if_fail(opts != NULL, NULL);
    if (opts->persistent)
        g_string_append(out, ", persistent");
    if (opts->undefine_source)
        g_string_append(out, ", undefinesource");
    if (opts->migrate_uri)
        g_string_append_printf(out, ", migrateuri %s", opts->migrate_uri);
    if (opts->bandwidth_mib)
        g_string_append_printf(out, ", bandwidth %" G_GUINT64_FORMAT " MiB/s", opts->bandwidth_mib);
    if (opts->parallel)
        g_string_append_printf(out, ", parallel %u", opts->parallel);
    if (opts->auto_converge)
        g_string_append(out, ", auto-converge");
    if (opts->postcopy)
        g_string_append(out, ", postcopy");
    if (opts->postcopy && opts->postcopy_after_ms)
        g_string_append_printf(out, ", postcopy-after %u s", opts->postcopy_after_ms / 1000);
    if (opts->postcopy && opts->postcopy_after_precopy)
        g_string_append(out, ", postcopy-after-precopy");
    if (opts->tls)
        g_string_append(out, ", tls");
    if (opts->migrate_timeout_ms)
        g_string_append_printf(out, ", timeout %u s then %s", opts->migrate_timeout_ms / 1000,
                               orch_timeout_action_to_string(opts->timeout_action));
    return g_string_free(g_steal_pointer(&out), FALSE);
}

OrchHotmigdClient *orch_options_open_hotmigd(const OrchOptions *opts, const char *url,
                                             const char *whose, GError **error)
{
    g_autoptr(GError) local = NULL;
    OrchHotmigdClient *vfd;

    if (!url) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "No hotmigd URL for the %s: give --hotmigd URL or a [host NAME] group with a "
                    "hotmigd key",
                    whose);
        return NULL;
    }
    vfd = orch_connector_open_hotmigd(opts, url, &local);
    if (!vfd)
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "Cannot use the %s's hotmigd: ",
                                   whose);
    return vfd;
}

/* The strings an OrchOptions owns, listed once for clearing and copying. */
static const gsize options_strings[] = {
    G_STRUCT_OFFSET(OrchOptions, domain),        G_STRUCT_OFFSET(OrchOptions, source_uri),
    G_STRUCT_OFFSET(OrchOptions, dest_uri),      G_STRUCT_OFFSET(OrchOptions, migrate_uri),
    G_STRUCT_OFFSET(OrchOptions, alias_prefix),  G_STRUCT_OFFSET(OrchOptions, target_vf),
    G_STRUCT_OFFSET(OrchOptions, agent_channel), G_STRUCT_OFFSET(OrchOptions, state_dir),
    G_STRUCT_OFFSET(OrchOptions, hotmigd_url),   G_STRUCT_OFFSET(OrchOptions, source_hotmigd_url),
    G_STRUCT_OFFSET(OrchOptions, tls_cert),      G_STRUCT_OFFSET(OrchOptions, tls_key),
    G_STRUCT_OFFSET(OrchOptions, tls_ca),
};

void orch_options_clear(OrchOptions *opts)
{
    for (gsize i = 0; i < G_N_ELEMENTS(options_strings); i++)
        g_clear_pointer(&G_STRUCT_MEMBER(char *, opts, options_strings[i]), g_free);
}

void orch_options_copy(OrchOptions *dst, const OrchOptions *src)
{
    *dst = *src;
    for (gsize i = 0; i < G_N_ELEMENTS(options_strings); i++)
        G_STRUCT_MEMBER(char *, dst, options_strings[i]) =
            g_strdup(G_STRUCT_MEMBER(const char *, src, options_strings[i]));
}
