/* The view plans are made on: the inventory with what the daemon adds; see plan-view.h. */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/plan-view.h"

#include "hotmigd/daemon-state-priv.h"

void hotmigd_plan_view_clear(HotmigdPlanView *v)
{
    g_clear_pointer(&v->states, g_hash_table_unref);
    g_clear_pointer(&v->arriving, g_array_unref);
}

void hotmigd_plan_view_init(Hotmigd *daemon, GArray *arriving, HotmigdPlanView *v)
{
    GHashTableIter it;
    gpointer key, value;

    v->states = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_iter_init(&it, daemon->held);
    while (g_hash_table_iter_next(&it, &key, &value))
        g_hash_table_insert(v->states, key, GINT_TO_POINTER(((HotmigdHeld *)value)->state));
    g_hash_table_iter_init(&it, daemon->evacuations);
    while (g_hash_table_iter_next(&it, &key, NULL))
        g_hash_table_insert(v->states, key, GINT_TO_POINTER(POL_HOST_EVACUATING));
    v->arriving = arriving;
    v->view.states = v->states;
    v->view.moved = daemon->moved;
    v->view.arriving = v->arriving;
    v->view.now = hotmigd_now_s();
}

void hotmigd_plan_view_options(Hotmigd *daemon, PolOptions *opts)
{
    pol_options_init(opts);
    opts->min_stay_s = daemon->min_stay_s;
    opts->bandwidth_mib_s = daemon->bandwidth;
    opts->host_value = daemon->host_value;
    opts->cpu_allocation = daemon->cpu_allocation;
}

void hotmigd_plan_view_note_moved(Hotmigd *daemon, const char *vm)
{
    gint64 *when = g_new(gint64, 1);

    *when = hotmigd_now_s();
    g_hash_table_insert(daemon->moved, g_strdup(vm), when);
}
