/* The migrations the daemon runs for other hosts (migrations.c): POST and GET /v1/migrations.
 * For the daemon's files (daemon-state-priv.h). */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "engine/hotmigd-client.h"
#include "hotmigd/daemon-types.h"

G_BEGIN_DECLS

/* daemon->remotes, made empty. */
void hotmigd_migrations_init(Hotmigd *daemon);

/* HotmigdApiServices' migration_start and migration_get (@data: the daemon). */
char *hotmigd_migrations_start(gpointer data, const OrchHotmigdMigrationRequest *req,
                               GError **error);
OrchHotmigdMigration *hotmigd_migrations_get(gpointer data, const char *id, GError **error);

/* Every migration run here for another host, as elements of the array @b is in. */
void hotmigd_migrations_add_json(Hotmigd *daemon, JsonBuilder *b);

G_END_DECLS
