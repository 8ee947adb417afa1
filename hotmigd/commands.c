/* The daemon's commands that the local API binds (daemon.h, engine/local-protocol.h): a plan, a
 * plan run, a drain and a snapshot, each on a fresh inventory, and `status`. */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/commands.h"

#include "engine/json.h"
#include "engine/plan-json.h"
#include "hotmigd/daemon-state-priv.h"
#include "hotmigd/inventory-refresh.h"
#include "hotmigd/migrations.h"
#include "hotmigd/plan-view.h"
#include "hotmigd/schedules.h"

typedef struct {
    Hotmigd *daemon;
    HotmigdDone done;
    gpointer data;
    HotmigdPlanRequest plan_req;
    char *host;
    char *reason;
    gint64 deadline;
    PolPlan *plan;
} Call;

static Call *call_new(Hotmigd *daemon, HotmigdDone done, gpointer data)
{
    Call *c = g_new0(Call, 1);

    c->daemon = daemon;
    c->done = done;
    c->data = data;
    return c;
}

static void call_free(Call *c)
{
    g_free(c->host);
    g_free(c->reason);
    pol_plan_free(c->plan);
    g_free(c);
}

/* Answers @c with @result (taken) and frees it. */
static void call_done(Call *c, JsonNode *result)
{
    c->done(result, NULL, c->data);
    call_free(c);
}

static void call_fail(Call *c, const GError *error)
{
    c->done(NULL, g_error_copy(error), c->data);
    call_free(c);
}

static void plan_after_inventory(Hotmigd *daemon, const GError *error, gpointer data)
{
    Call *c = data;
    const HotmigdPlanRequest *req = &c->plan_req;
    g_autoptr(GError) local = NULL;
    g_autoptr(PolCluster) cluster = NULL;
    g_autoptr(PolPlan) plan = NULL;
    g_autofree char *json = NULL;
    PolOptions opts;

    if (error) {
        call_fail(c, error);
        return;
    }
    if (!(cluster = hotmigd_schedules_cluster(daemon, &local))) {
        call_fail(c, local);
        return;
    }
    hotmigd_plan_view_options(daemon, &opts);
    if (req->min_stay_s >= 0)
        opts.min_stay_s = (guint)req->min_stay_s;
    if (req->bandwidth > 0)
        opts.bandwidth_mib_s = req->bandwidth;
    if (req->tolerance >= 0)
        opts.balance_tolerance = req->tolerance;
    if (req->max_moves >= 0)
        opts.max_moves = (guint)req->max_moves;
    if (req->host_value >= 0)
        opts.host_value = (guint)req->host_value;
    if (req->max_migrations >= 0)
        opts.max_migrations = (guint)req->max_migrations;
    opts.pack_by_vcpus = req->pack_vcpus;
    opts.keep_jobs_together = req->keep_jobs;
    switch (req->policy) {
    case POL_POLICY_CONSOLIDATE:
        plan = pol_plan_consolidate(cluster, &opts, &local);
        break;
    case POL_POLICY_DRAIN:
        opts.min_stay_s = 0;
        plan = pol_plan_drain(cluster, c->host, &opts, &local);
        break;
    default:
        plan = pol_plan_balance(cluster, &opts, &local);
        break;
    }
    if (!plan) {
        g_autoptr(GError) e = g_error_new(
            ORCH_ERROR,
            g_error_matches(local, POL_ERROR, POL_ERROR_NOT_FOUND) ? ORCH_ERROR_NOT_FOUND
                                                                   : ORCH_ERROR_CONFLICT,
            "no %s plan: %s", pol_policy_to_string(req->policy), local->message);

        call_fail(c, e);
        return;
    }
    json = orch_plan_format_json(plan, FALSE, TRUE);
    call_done(c, json_from_string(json, NULL));
}

void hotmigd_plan_async(Hotmigd *daemon, const HotmigdPlanRequest *req, HotmigdDone done,
                        gpointer data)
{
    Call *c = call_new(daemon, done, data);
    g_autoptr(GError) error = NULL;

    c->plan_req = *req;
    c->host = g_strdup(req->host);
    c->plan_req.host = c->host;
    if (req->policy == POL_POLICY_DRAIN &&
        !hotmigd_run_move_env_check_host(&daemon->env, req->host, &error)) {
        call_fail(c, error);
        return;
    }
    hotmigd_inventory_refresh(daemon, plan_after_inventory, c);
}

static void run_after_inventory(Hotmigd *daemon, const GError *error, gpointer data)
{
    Call *c = data;
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *id = NULL;

    if (error) {
        call_fail(c, error);
        return;
    }
    if (!(id = hotmigd_schedules_run_plan(daemon, c->plan, c->reason, &local))) {
        call_fail(c, local);
        return;
    }
    json_builder_begin_object(b);
    orch_json_member_string(b, "id", id);
    orch_json_member_int(b, "moves", c->plan->migrations->len);
    json_builder_end_object(b);
    call_done(c, json_builder_get_root(b));
}

void hotmigd_run_async(Hotmigd *daemon, PolPlan *plan, const char *reason, HotmigdDone done,
                       gpointer data)
{
    Call *c = call_new(daemon, done, data);

    c->plan = plan;
    c->reason = g_strdup(reason ? reason : "migrate-vm run");
    hotmigd_inventory_refresh(daemon, run_after_inventory, c);
}

static void drain_after_inventory(Hotmigd *daemon, const GError *error, gpointer data)
{
    Call *c = data;
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *id = NULL;
    g_auto(GStrv) late = NULL;
    gboolean merged = FALSE;

    if (error) {
        call_fail(c, error);
        return;
    }
    if (!hotmigd_schedules_evacuate(daemon, c->host, c->deadline, c->reason, TRUE, &id, &merged,
                                    &late, &local)) {
        call_fail(c, local);
        return;
    }
    json_builder_begin_object(b);
    orch_json_member_string(b, "id", id);
    orch_json_member_bool(b, "merged", merged);
    json_builder_set_member_name(b, "late");
    json_builder_begin_array(b);
    for (guint i = 0; late[i]; i++)
        json_builder_add_string_value(b, late[i]);
    json_builder_end_array(b);
    json_builder_end_object(b);
    call_done(c, json_builder_get_root(b));
}

void hotmigd_drain_async(Hotmigd *daemon, const char *host, gint64 deadline, const char *reason,
                         HotmigdDone done, gpointer data)
{
    Call *c = call_new(daemon, done, data);
    g_autoptr(GError) error = NULL;

    c->host = g_strdup(host);
    c->deadline = deadline;
    c->reason = g_strdup(reason ? reason : "migrate-vm drain");
    if (!hotmigd_run_move_env_check_host(&daemon->env, host, &error)) {
        call_fail(c, error);
        return;
    }
    /* One runs already: no need to look at the cluster first. */
    if (hotmigd_schedules_evacuation_reason(daemon, host)) {
        drain_after_inventory(daemon, NULL, c);
        return;
    }
    hotmigd_inventory_refresh(daemon, drain_after_inventory, c);
}

static char *snapshot_json(Hotmigd *daemon)
{
    g_auto(HotmigdPlanView) view = {0};

    hotmigd_schedules_view_init(daemon, &view);
    return hotmigd_inventory_format_snapshot(daemon->inventory, &view.view, TRUE);
}

static void snapshot_after_inventory(Hotmigd *daemon, const GError *error, gpointer data)
{
    Call *c = data;
    g_autofree char *json = NULL;

    if (error) {
        call_fail(c, error);
        return;
    }
    json = snapshot_json(daemon);
    call_done(c, json_from_string(json, NULL));
}

void hotmigd_snapshot_async(Hotmigd *daemon, HotmigdDone done, gpointer data)
{
    hotmigd_inventory_refresh(daemon, snapshot_after_inventory, call_new(daemon, done, data));
}

static void hosts_json(Hotmigd *daemon, JsonBuilder *b)
{
    const HotmigdInventory *inv = daemon->inventory;
    g_auto(HotmigdPlanView) view = {0};
    g_autoptr(GHashTable) by_state =
        g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)g_ptr_array_unref);
    static const char *const order[] = {"ok", "quarantined", "evacuating", "down", "unknown"};

    hotmigd_schedules_view_init(daemon, &view);
    json_builder_set_member_name(b, "hosts");
    json_builder_begin_array(b);
    for (guint i = 0; i < daemon->hosts->len; i++) {
        const HmConfigHost *h = g_ptr_array_index(daemon->hosts, i);
        const HotmigdInvHost *ih = NULL;
        const HotmigdHeld *held = g_hash_table_lookup(daemon->held, h->name);
        const char *evac = hotmigd_schedules_evacuation_reason(daemon, h->name);
        const char *state = "unknown";
        const char *reason = NULL;
        GPtrArray *names;

        for (guint k = 0; inv && k < inv->hosts->len && !ih; k++) {
            const HotmigdInvHost *x = g_ptr_array_index(inv->hosts, k);

            if (g_str_equal(x->name, h->name))
                ih = x;
        }
        if (ih) {
            state = pol_host_state_to_string(hotmigd_inventory_host_state(inv, ih, &view.view));
            reason = ih->state_reason;
        } else if (evac) {
            state = "evacuating";
        } else if (held) {
            state = pol_host_state_to_string(held->state);
        }
        if (evac && (!ih || ih->state != POL_HOST_DOWN))
            reason = evac;
        else if (held && (!ih || ih->state == POL_HOST_OK))
            reason = held->reason;
        json_builder_begin_object(b);
        orch_json_member_string(b, "name", h->name);
        orch_json_member_string(b, "state", state);
        orch_json_member_string(b, "reason", reason);
        orch_json_member_bool(b, "self", g_str_equal(h->name, daemon->name));
        orch_json_member_string(b, "uri", h->uri);
        orch_json_member_string(b, "hotmigd", h->hotmigd);
        if (ih) {
            orch_json_member_int(b, "cpus", ih->cpus);
            orch_json_member_int(b, "memory_mib", (gint64)ih->memory_mib);
            orch_json_member_int(b, "vfs", ih->vfs_total);
            orch_json_member_int(b, "vfs_free", ih->vfs_free);
            orch_json_member_int(b, "vms", ih->vms);
        }
        json_builder_end_object(b);
        names = g_hash_table_lookup(by_state, state);
        if (!names) {
            names = g_ptr_array_new();
            g_hash_table_insert(by_state, (gpointer)state, names);
        }
        g_ptr_array_add(names, h->name);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "by_state");
    json_builder_begin_object(b);
    for (guint i = 0; i < G_N_ELEMENTS(order); i++) {
        GPtrArray *names = g_hash_table_lookup(by_state, order[i]);

        if (!names)
            continue;
        json_builder_set_member_name(b, order[i]);
        json_builder_begin_array(b);
        for (guint k = 0; k < names->len; k++)
            json_builder_add_string_value(b, g_ptr_array_index(names, k));
        json_builder_end_array(b);
    }
    json_builder_end_object(b);
}

JsonNode *hotmigd_status(Hotmigd *daemon, const char *id, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    g_return_val_if_fail(daemon != NULL, NULL);
    if (id)
        return hotmigd_schedules_get_json(daemon, id, error);
    json_builder_begin_object(b);
    orch_json_member_string(b, "host", daemon->name);
    orch_json_member_string(b, "version", HOTMIG_VERSION);
    orch_json_member_time(b, "inventory_taken", daemon->inventory ? daemon->inventory->taken : 0);
    json_builder_set_member_name(b, "warnings");
    json_builder_begin_array(b);
    for (guint i = 0; daemon->inventory && i < daemon->inventory->warnings->len; i++)
        json_builder_add_string_value(b, g_ptr_array_index(daemon->inventory->warnings, i));
    json_builder_end_array(b);
    hosts_json(daemon, b);
    json_builder_set_member_name(b, "schedules");
    json_builder_begin_array(b);
    hotmigd_schedules_add_json(daemon, b);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "migrations");
    json_builder_begin_array(b);
    hotmigd_migrations_add_json(daemon, b);
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}
