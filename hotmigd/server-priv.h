/* server.c's internals, for tests only (hotmigd-tls-test). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* How many client certificates accepted by the HTTPS servers of this process are not
 * finalized yet: one per connection in its handshake or request, none once they are all
 * closed and their messages gone. */
guint hotmigd_server_certificates_alive(void);
/* How many they accepted in all (each counted once). */
guint hotmigd_server_certificates_seen(void);

G_END_DECLS
