/* hotmigd's wiring of the failure-prediction hook (alerts-hook.c, part of the executable): the
 * alert book (alerts.h) fed by the daemon (daemon.h) and acting through it. */
#pragma once

#include <glib.h>

#include "hotmigd/daemon.h"

G_BEGIN_DECLS

typedef struct HotmigdAlertsHook HotmigdAlertsHook;

/* Starts the hook of @daemon (borrowed; must outlive it): the book, /v1/alerts on its HTTPS
 * server, the alert listener ([alerts] listen, port; none for port 0), the socket and the
 * command; evacuations, quarantines and statistics go to the daemon, VF states are counted
 * by its HTTPS server's worker thread (the only one that uses the pool). Logs where it listens.
 * Fails naming what could not start (ORCH_ERROR_INVALID: a bad configuration). Owned result. */
HotmigdAlertsHook *hotmigd_alerts_hook_start(Hotmigd *daemon, GError **error);
void hotmigd_alerts_hook_stop(HotmigdAlertsHook *hook);

/* A reload: the bearer token is read again from @config's [alerts] token-file (a rotated token
 * applies at once; one that cannot be read is a warning and every webhook request is then
 * refused, as at the start). The listener, socket and command keep their settings. */
void hotmigd_alerts_hook_reload(HotmigdAlertsHook *hook, const HmConfig *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotmigdAlertsHook, hotmigd_alerts_hook_stop)

G_END_DECLS
