/* The cluster's latest inventory as the daemon keeps it (daemon-state-priv.h): taken in a thread of its
 * own (hotmigd_inventory_collect()), in the background every interval, again after 1, 2, 4 ...
 * seconds while a host could not be read, and before every plan (hotmigd_inventory_refresh()).
 * Those who ask while one runs are served by the next one. */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/inventory-refresh.h"

#include "hotmigd/daemon-state-priv.h"

typedef struct {
    HotmigdInventoryRefreshFunc fn;
    gpointer data;
} InvWaiter;

static void inventory_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancel)
{
    Hotmigd *daemon = data;
    HotmigdInventoryOptions opts = {
        .migrate_opts = daemon->env.migrate_opts,
        .cpu_sample_ms = daemon->opts.cpu_sample_ms,
        .cancellable = cancel,
    };
    GError *error = NULL;
    HotmigdInventory *inv = hotmigd_inventory_collect(daemon->hosts, &opts, &error);

    if (inv)
        g_task_return_pointer(task, inv, (GDestroyNotify)hotmigd_inventory_free);
    else
        g_task_return_error(task, error);
}

static void inventory_start(Hotmigd *daemon);

/* Logs each host whose state as read (libvirt, hotmigd) differs from @old's (NULL: the first
 * inventory, where only a host not ok is logged), with the reason: a plan that finds no room
 * on a host can be traced to it. */
static void inventory_log_changes(const HotmigdInventory *old, const HotmigdInventory *inv)
{
    for (guint i = 0; i < inv->hosts->len; i++) {
        const HotmigdInvHost *host = g_ptr_array_index(inv->hosts, i);
        const HotmigdInvHost *before = NULL;

        for (guint j = 0; old && j < old->hosts->len && !before; j++) {
            const HotmigdInvHost *o = g_ptr_array_index(old->hosts, j);

            if (g_str_equal(o->name, host->name))
                before = o;
        }
        if (before ? before->state == host->state &&
                         g_strcmp0(before->state_reason, host->state_reason) == 0
                   : host->state == POL_HOST_OK)
            continue;
        if (host->state == POL_HOST_OK)
            g_message("Inventory: host '%s' is ok again", host->name);
        else
            g_message("Inventory: host '%s' is %s: %s", host->name,
                      pol_host_state_to_string(host->state),
                      host->state_reason ? host->state_reason : "no reason given");
    }
}

static void inventory_background_done(Hotmigd *daemon, const GError *error, gpointer data);

static gboolean inventory_retry_fire(gpointer data)
{
    Hotmigd *daemon = data;

    g_clear_pointer(&daemon->inventory_retry, g_source_unref);
    if (!daemon->inventory_running)
        hotmigd_inventory_refresh(daemon, inventory_background_done, NULL);
    return G_SOURCE_REMOVE;
}

/* A host that could not be read (its libvirt or its hotmigd did not answer: at a cluster's
 * start, the peers' daemons come up in any order) is read again after 1 s, then 2, 4... up to
 * the background interval, so that a peer that comes up is seen in seconds rather than at the
 * next background inventory. */
static void inventory_schedule_retry(Hotmigd *daemon, const HotmigdInventory *inv)
{
    gboolean unread = FALSE;

    for (guint i = 0; i < inv->hosts->len && !unread; i++)
        unread = ((const HotmigdInvHost *)g_ptr_array_index(inv->hosts, i))->state != POL_HOST_OK;
    if (!unread) {
        daemon->inventory_retry_s = 0;
        return;
    }
    if (!daemon->inventory_interval_s || daemon->inventory_retry ||
        g_cancellable_is_cancelled(daemon->cancel))
        return;
    daemon->inventory_retry_s =
        daemon->inventory_retry_s ? MIN(daemon->inventory_retry_s * 2, daemon->inventory_interval_s)
                                  : 1;
    if (daemon->inventory_retry_s >= daemon->inventory_interval_s)
        return; /* the background inventory comes as soon */
    daemon->inventory_retry = g_timeout_source_new_seconds(daemon->inventory_retry_s);
    g_source_set_callback(daemon->inventory_retry, inventory_retry_fire, daemon, NULL);
    g_source_attach(daemon->inventory_retry, g_main_context_get_thread_default());
}

static void inventory_done(GObject *source, GAsyncResult *result, gpointer data)
{
    Hotmigd *daemon = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) waiters = daemon->inventory_waiters;
    HotmigdInventory *inv = g_task_propagate_pointer(G_TASK(result), &error);

    daemon->inventory_running = FALSE;
    /* Those who asked while this one ran wait for the next one. */
    daemon->inventory_waiters = g_steal_pointer(&daemon->inventory_next);
    daemon->inventory_next = g_ptr_array_new_with_free_func(g_free);
    if (inv) {
        inventory_log_changes(daemon->inventory, inv);
        inventory_schedule_retry(daemon, inv);
        hotmigd_inventory_free(daemon->inventory);
        daemon->inventory = inv;
        g_debug("Inventory: %u hosts, %u VMs in %.0f ms", inv->hosts->len, inv->vms->len,
                inv->took_ms);
        if (daemon->inventory_taken)
            daemon->inventory_taken(daemon, inv, daemon->inventory_taken_data);
    }
    for (guint i = 0; i < waiters->len; i++) {
        InvWaiter *w = g_ptr_array_index(waiters, i);

        w->fn(daemon, error, w->data);
    }
    /* Asked for while this one ran (or by a waiter just served, which started it already). */
    if (daemon->inventory_waiters->len && !daemon->inventory_running &&
        !g_cancellable_is_cancelled(daemon->cancel))
        inventory_start(daemon);
}

static void inventory_start(Hotmigd *daemon)
{
    g_autoptr(GTask) task = NULL;

    daemon->inventory_running = TRUE;
    task = g_task_new(NULL, daemon->cancel, inventory_done, daemon);
    g_task_set_task_data(task, daemon, NULL);
    g_task_set_return_on_cancel(task, FALSE);
    g_task_run_in_thread(task, inventory_thread);
}

void hotmigd_inventory_refresh(Hotmigd *daemon, HotmigdInventoryRefreshFunc fn, gpointer data)
{
    InvWaiter *w = g_new0(InvWaiter, 1);

    w->fn = fn;
    w->data = data;
    if (daemon->inventory_running) {
        /* The one running may have read a host before we were asked: take the next one. */
        g_ptr_array_add(daemon->inventory_next, w);
        return;
    }
    g_ptr_array_add(daemon->inventory_waiters, w);
    inventory_start(daemon);
}

static void inventory_background_done(Hotmigd *daemon, const GError *error, gpointer data)
{
    if (error && !g_error_matches(error, ORCH_ERROR, ORCH_ERROR_CANCELLED))
        g_warning("The background inventory failed: %s", error->message);
}

static gboolean inventory_tick(gpointer data)
{
    Hotmigd *daemon = data;

    if (!daemon->inventory_running)
        hotmigd_inventory_refresh(daemon, inventory_background_done, NULL);
    return G_SOURCE_CONTINUE;
}

void hotmigd_inventory_refresh_start(Hotmigd *daemon, guint interval_s)
{
    daemon->inventory_interval_s = interval_s;
    daemon->inventory_timer = g_timeout_source_new_seconds(interval_s);
    g_source_set_callback(daemon->inventory_timer, inventory_tick, daemon, NULL);
    g_source_attach(daemon->inventory_timer, g_main_context_get_thread_default());
    hotmigd_inventory_refresh(daemon, inventory_background_done, NULL);
}

void hotmigd_inventory_refresh_stop(Hotmigd *daemon)
{
    GMainContext *ctx = g_main_context_get_thread_default();

    g_cancellable_cancel(daemon->cancel);
    if (daemon->inventory_timer) {
        g_source_destroy(daemon->inventory_timer);
        g_source_unref(daemon->inventory_timer);
    }
    if (daemon->inventory_retry) {
        g_source_destroy(daemon->inventory_retry);
        g_clear_pointer(&daemon->inventory_retry, g_source_unref);
    }
    /* The inventory running ends soon (cancelled); the servers still answer meanwhile. Those
     * waiting for it hear it was cancelled. */
    while (daemon->inventory_running)
        g_main_context_iteration(ctx, TRUE);
    if (daemon->inventory_waiters) {
        g_autoptr(GPtrArray) waiters = g_steal_pointer(&daemon->inventory_waiters);
        g_autoptr(GError) stopped =
            g_error_new(ORCH_ERROR, ORCH_ERROR_CANCELLED, "hotmigd is stopping");

        daemon->inventory_waiters = g_ptr_array_new_with_free_func(g_free);
        for (guint i = 0; i < waiters->len; i++) {
            InvWaiter *w = g_ptr_array_index(waiters, i);

            w->fn(daemon, stopped, w->data);
        }
    }
}
