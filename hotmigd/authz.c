/* hotmigd's authorization: certificate identities to hosts and roles (docs/security.md). */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/authz.h"

#include <string.h>

#include "common/cert.h"

struct HotmigdAuthz {
    GHashTable *hosts;     /* identity -> host name (owned strings) */
    GHashTable *operators; /* identity set */
};

void hotmigd_authz_client_free(HotmigdAuthzClient *peer)
{
    if (!peer)
        return;
    g_free(peer->identity);
    g_free(peer->host);
    g_free(peer);
}

HotmigdAuthzClient *hotmigd_authz_client_new(const char *identity, const char *host, guint roles)
{
    HotmigdAuthzClient *peer = g_new0(HotmigdAuthzClient, 1);

    peer->identity = g_strdup(identity ? identity : "?");
    peer->host = g_strdup(host);
    peer->roles = roles;
    return peer;
}

const char *hotmigd_authz_client_owner(const HotmigdAuthzClient *peer)
{
    g_return_val_if_fail(peer != NULL, NULL);
    return peer->host ? peer->host : peer->identity;
}

HotmigdAuthz *hotmigd_authz_new(const HmConfig *config)
{
    HotmigdAuthz *authz = g_new0(HotmigdAuthz, 1);
    GPtrArray *hosts = hm_config_get_hosts(config);
    g_auto(GStrv) operators = hm_config_get_list(config, HM_CONFIG_HOTMIGD_OPERATORS);

    authz->hosts = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    authz->operators = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    for (guint i = 0; i < hosts->len; i++) {
        const HmConfigHost *h = g_ptr_array_index(hosts, i);

        g_hash_table_replace(authz->hosts, g_strdup(h->identity ? h->identity : h->name),
                             g_strdup(h->name));
    }
    for (char **o = operators; *o; o++)
        g_hash_table_add(authz->operators, g_strdup(*o));
    return authz;
}

void hotmigd_authz_free(HotmigdAuthz *authz)
{
    if (!authz)
        return;
    g_hash_table_unref(authz->hosts);
    g_hash_table_unref(authz->operators);
    g_free(authz);
}

GPtrArray *hotmigd_authz_cert_identities(GTlsCertificate *cert)
{
    return hm_cert_identities(cert);
}

HotmigdAuthzClient *hotmigd_authz_identify(const HotmigdAuthz *authz, GTlsCertificate *cert)
{
    g_autoptr(GPtrArray) ids = hotmigd_authz_cert_identities(cert);
    const char *matched = NULL;
    const char *host = NULL;
    guint roles = 0;

    g_return_val_if_fail(authz != NULL, NULL);

    for (guint i = 0; i < ids->len; i++) {
        const char *id = g_ptr_array_index(ids, i);
        const char *h = g_hash_table_lookup(authz->hosts, id);

        if (h && !host) {
            host = h;
            roles |= HOTMIGD_ROLE_HOST;
            matched = matched ? matched : id;
        }
        if (g_hash_table_contains(authz->operators, id)) {
            roles |= HOTMIGD_ROLE_OPERATOR;
            matched = matched ? matched : id;
        }
    }
    return hotmigd_authz_client_new(matched    ? matched
                                    : ids->len ? g_ptr_array_index(ids, 0)
                                               : NULL,
                                    host, roles);
}
