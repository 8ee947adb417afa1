/* The migrations this daemon runs for other hosts (daemon-state-priv.h): a schedule elsewhere asks
 * this host's hotmigd to move a VM of it (POST /v1/migrations) and follows it
 * (GET /v1/migrations/ID). Each runs in a thread of its own (run.c's HotmigdMove); the last
 * ones finished are kept for those asking after it ended. */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/migrations.h"

#include "hotmigd/daemon-state-priv.h"
#include "hotmigd/plan-view.h"
#include "hotmigd/schedules.h"

/* Finished migrations kept for GET /v1/migrations/ID. */
#define HOTMIGD_KEEP_MIGRATIONS 256

/* A migration run here for another host's schedule (POST /v1/migrations). */
typedef struct {
    Hotmigd *daemon;
    OrchHotmigdMigration info;
    HotmigdMove *job; /* while it runs */
} Remote;

static void remote_free(Remote *r)
{
    hotmigd_run_move_free(r->job);
    g_free(r->info.id);
    g_free(r->info.domain);
    g_free(r->info.source);
    g_free(r->info.destination);
    g_free(r->info.reason);
    g_free(r->info.plan);
    g_free(r->info.error);
    g_free(r->info.report);
    g_free(r);
}

static void remote_done(HotmigdMove *move, const HotmigdMoveResult *result, gpointer data)
{
    Remote *r = data;
    Hotmigd *daemon = r->daemon;

    r->info.state = result->ok ? ORCH_HOTMIGD_MIGRATION_DONE : ORCH_HOTMIGD_MIGRATION_FAILED;
    r->info.error = g_strdup(result->detail);
    r->info.report = g_strdup(result->report);
    r->info.finished = hotmigd_now_s();
    g_clear_pointer(&r->job, hotmigd_run_move_free);
    if (result->ok)
        hotmigd_plan_view_note_moved(daemon, r->info.domain);
    g_message("Migration %s of '%s' to '%s' (%s) %s%s%s", r->info.id, r->info.domain,
              r->info.destination, r->info.reason, result->ok ? "done" : "failed",
              result->detail ? ": " : "", result->detail ? result->detail : "");
    /* Forget the oldest finished ones. */
    for (guint i = 0; daemon->remotes->len > HOTMIGD_KEEP_MIGRATIONS && i < daemon->remotes->len;) {
        Remote *old = g_ptr_array_index(daemon->remotes, i);

        if (old->job)
            i++;
        else
            g_ptr_array_remove_index(daemon->remotes, i);
    }
}

/* Is @domain being migrated by this daemon (for another host, or in a schedule here)? */
static gboolean domain_busy(Hotmigd *daemon, const char *domain)
{
    for (guint i = 0; i < daemon->remotes->len; i++) {
        Remote *r = g_ptr_array_index(daemon->remotes, i);

        if (r->job && g_str_equal(r->info.domain, domain))
            return TRUE;
    }
    return hotmigd_schedules_moving(daemon, domain);
}

char *hotmigd_migrations_start(gpointer data, const OrchHotmigdMigrationRequest *req,
                               GError **error)
{
    Hotmigd *daemon = data;
    Remote *r;

    if (!hotmigd_run_move_env_check_host(&daemon->env, req->destination, error))
        return NULL;
    if (!hotmigd_run_move_env_find_host(&daemon->env, daemon->name)) {
        g_set_error(
            error, ORCH_ERROR, ORCH_ERROR_INVALID,
            "this host's name '%s' ([hotmigd] name) is not one of its [host NAME] groups: it cannot run migrations",
            daemon->name);
        return NULL;
    }
    if (g_str_equal(req->destination, daemon->name)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "destination '%s' is this host: a migration goes to another one",
                    req->destination);
        return NULL;
    }
    if (domain_busy(daemon, req->domain)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_CONFLICT,
                    "domain '%s' is being migrated by this hotmigd already", req->domain);
        return NULL;
    }
    r = g_new0(Remote, 1);
    r->daemon = daemon;
    r->info.id = hotmigd_new_id("migration");
    r->info.domain = g_strdup(req->domain);
    r->info.source = g_strdup(daemon->name);
    r->info.destination = g_strdup(req->destination);
    r->info.reason = g_strdup(req->reason);
    r->info.plan = g_strdup(req->plan);
    r->info.state = ORCH_HOTMIGD_MIGRATION_RUNNING;
    r->info.started = hotmigd_now_s();
    g_ptr_array_add(daemon->remotes, r);
    r->job = hotmigd_run_move_start(&daemon->env, req->domain, daemon->name, req->destination,
                                    req->reason, req->plan, remote_done, r);
    return g_strdup(r->info.id);
}

OrchHotmigdMigration *hotmigd_migrations_get(gpointer data, const char *id, GError **error)
{
    Hotmigd *daemon = data;

    for (guint i = 0; i < daemon->remotes->len; i++) {
        Remote *r = g_ptr_array_index(daemon->remotes, i);
        OrchHotmigdMigration *copy;

        if (!g_str_equal(r->info.id, id))
            continue;
        copy = g_new0(OrchHotmigdMigration, 1);
        *copy = r->info;
        copy->id = g_strdup(r->info.id);
        copy->domain = g_strdup(r->info.domain);
        copy->source = g_strdup(r->info.source);
        copy->destination = g_strdup(r->info.destination);
        copy->reason = g_strdup(r->info.reason);
        copy->plan = g_strdup(r->info.plan);
        copy->error = g_strdup(r->info.error);
        copy->report = g_strdup(r->info.report);
        return copy;
    }
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND, "no migration '%.64s' here", id);
    return NULL;
}

void hotmigd_migrations_init(Hotmigd *daemon)
{
    daemon->remotes = g_ptr_array_new_with_free_func((GDestroyNotify)remote_free);
}

void hotmigd_migrations_add_json(Hotmigd *daemon, JsonBuilder *b)
{
    for (guint i = 0; i < daemon->remotes->len; i++) {
        const Remote *r = g_ptr_array_index(daemon->remotes, i);
        g_autofree char *json = hotmigd_api_migration_format_json(&r->info);
        g_autoptr(JsonNode) node = json_from_string(json, NULL);

        json_builder_add_value(b, g_steal_pointer(&node));
    }
}
