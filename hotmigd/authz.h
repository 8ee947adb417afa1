/* hotmigd's authorization (docs/security.md): who a client certificate is, and what it may do.
 * The CA proves only that a certificate belongs to the cluster; this maps its identity to a
 * configured host ([host NAME] identity) or to the operator role ([hotmigd] operators). */
#pragma once

#include <gio/gio.h>

#include "common/config.h"

G_BEGIN_DECLS

typedef enum {
    ORCH_ROLE_HOST = 1 << 0,     /* one of the cluster's hotmigds */
    ORCH_ROLE_OPERATOR = 1 << 1, /* an operator's migrate-vm */
} OrchRole;

/* Who sent a request. */
typedef struct {
    char *identity; /* the certificate identity that matched, else its first one ("?" if none) */
    char *host;     /* the [host NAME] it is, NULL when it is no host */
    guint roles;    /* OrchRole bits; 0: a certificate of the CA that nobody configured */
} OrchPeer;

void orch_peer_free(OrchPeer *peer);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchPeer, orch_peer_free)

/* A peer with @roles and @identity (tests, the local socket). Owned. */
OrchPeer *orch_peer_new(const char *identity, const char *host, guint roles);

/* The name a lease taken by @peer is recorded under (its host name, else its identity):
 * only the same peer may act on that lease. Borrowed. */
const char *orch_peer_owner(const OrchPeer *peer);

typedef struct OrchAuthz OrchAuthz;

/* The identities and roles of @config ([host NAME] identity, default NAME; [hotmigd]
 * operators). Owned, never NULL. */
OrchAuthz *orch_authz_new(const HmConfig *config);
void orch_authz_free(OrchAuthz *authz);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchAuthz, orch_authz_free)

/* The identities of @cert (hm_cert_identities(), which the configuration check uses too): its
 * DNS and IP subject alternative names, and its subject's common name when it has no DNS name.
 * Owned array of owned strings; empty for NULL. */
GPtrArray *orch_cert_identities(GTlsCertificate *cert);

/* Who @cert (the client's verified certificate; NULL: none) is. Owned, never NULL. */
OrchPeer *orch_authz_identify(const OrchAuthz *authz, GTlsCertificate *cert);

G_END_DECLS
