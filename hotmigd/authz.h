/* hotmigd's authorization (docs/security.md): who a client certificate is, and what it may do.
 * The CA proves only that a certificate belongs to the cluster; this maps its identity to a
 * configured host ([host NAME] identity) or to the operator role ([hotmigd] operators). */
#pragma once

#include <gio/gio.h>

#include "common/config.h"

G_BEGIN_DECLS

typedef enum {
    HOTMIGD_ROLE_HOST = 1 << 0,     /* one of the cluster's hotmigds */
    HOTMIGD_ROLE_OPERATOR = 1 << 1, /* an operator's migrate-vm */
} HotmigdRole;

/* Who sent a request. */
typedef struct {
    char *identity; /* the certificate identity that matched, else its first one ("?" if none) */
    char *host;     /* the [host NAME] it is, NULL when it is no host */
    guint roles;    /* HotmigdRole bits; 0: a certificate of the CA that nobody configured */
} HotmigdAuthzClient;

void hotmigd_authz_client_free(HotmigdAuthzClient *peer);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotmigdAuthzClient, hotmigd_authz_client_free)

/* A peer with @roles and @identity (tests, the local socket). Owned. */
HotmigdAuthzClient *hotmigd_authz_client_new(const char *identity, const char *host, guint roles);

/* The name a lease taken by @peer is recorded under (its host name, else its identity):
 * only the same peer may act on that lease. Borrowed. */
const char *hotmigd_authz_client_owner(const HotmigdAuthzClient *peer);

typedef struct HotmigdAuthz HotmigdAuthz;

/* The identities and roles of @config ([host NAME] identity, default NAME; [hotmigd]
 * operators). Owned, never NULL. */
HotmigdAuthz *hotmigd_authz_new(const HmConfig *config);
void hotmigd_authz_free(HotmigdAuthz *authz);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotmigdAuthz, hotmigd_authz_free)

/* The identities of @cert (hm_cert_identities(), which the configuration check uses too): its
 * DNS and IP subject alternative names, and its subject's common name when it has no DNS name.
 * Owned array of owned strings; empty for NULL. */
GPtrArray *hotmigd_authz_cert_identities(GTlsCertificate *cert);

/* Who @cert (the client's verified certificate; NULL: none) is. Owned, never NULL. */
HotmigdAuthzClient *hotmigd_authz_identify(const HotmigdAuthz *authz, GTlsCertificate *cert);

G_END_DECLS
