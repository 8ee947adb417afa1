/* The cluster's latest inventory as the daemon keeps it (inventory-refresh.c): daemon->inventory,
 * taken in a thread, in the background and on demand. For the daemon's files (daemon-state-priv.h). */
#pragma once

#include <glib.h>

#include "hotmigd/daemon-types.h"

G_BEGIN_DECLS

typedef void (*HotmigdInventoryRefreshFunc)(Hotmigd *daemon, const GError *error, gpointer data);

/* Calls @fn once a fresh inventory is in daemon->inventory (one started after this call), with
 * the error when it could not be taken (the daemon stops). */
void hotmigd_inventory_refresh(Hotmigd *daemon, HotmigdInventoryRefreshFunc fn, gpointer data);

/* Takes the inventory every @interval_s seconds in the background, the first one now. */
void hotmigd_inventory_refresh_start(Hotmigd *daemon, guint interval_s);

/* The daemon stops: no more inventories; waits for the one running (the main context is
 * iterated meanwhile), then those waiting hear ORCH_ERROR_CANCELLED. */
void hotmigd_inventory_refresh_stop(Hotmigd *daemon);

G_END_DECLS
