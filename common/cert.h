/* hm-common: the names a TLS certificate carries, by which hotmig knows a host or an operator
 * (docs/security.md). */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The identities of @cert: its DNS subject alternative names and IP addresses, or its common
 * name when it has no DNS name. A DNS name holding a NUL or not UTF-8 is left out. Owned array
 * of owned strings, empty (never NULL) for a NULL @cert. */
GPtrArray *hm_cert_identities(GTlsCertificate *cert);

G_END_DECLS
