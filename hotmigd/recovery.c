/* The start's recovery (recovery.h): the journals a killed hotmigd (or migrate-vm) left are
 * recovered by a thread of their own, with copies of what it needs: a stop does not wait for it
 * (what it has not done, the next start does: recovery checks before it acts). Issue 15, item
 * 8. */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/recovery.h"

#include "common/common.h"
#include "engine/journal.h"

#define RECOVERY_ATTEMPTS 3
#define RECOVERY_RETRY_S 5

struct HotmigdRecovery {
    gint refs;
    HotmigdRecovery **slot; /* set to NULL when done; NULL once the daemon is gone */
    OrchOptions opts;
    GPtrArray *domains; /* with a journal at the start (owned strings) */
    HotmigdRecoverFunc recover;
    GMainContext *context;
    GPtrArray *results; /* OrchRecovery */
};

static void recovery_unref(HotmigdRecovery *r)
{
    if (!g_atomic_int_dec_and_test(&r->refs))
        return;
    orch_options_clear(&r->opts);
    g_ptr_array_unref(r->domains);
    g_main_context_unref(r->context);
    g_clear_pointer(&r->results, g_ptr_array_unref);
    g_free(r);
}

/* On the daemon's context: what the recovery did, logged once. */
static gboolean recovery_done(gpointer data)
{
    HotmigdRecovery *r = data;
    guint failed = 0, done = 0;

    for (guint i = 0; r->results && i < r->results->len; i++) {
        const OrchRecovery *rec = g_ptr_array_index(r->results, i);

        if (g_strcmp0(rec->outcome, "busy") == 0) {
            g_message("Recovery of domain '%s' at the start: left to the process migrating or "
                      "recovering it (%s)",
                      rec->domain, rec->error);
        } else if (rec->error) {
            failed++;
            g_warning("Recovery of domain '%s' at the start: %s: %s (its journal is kept; "
                      "migrate-vm --recover retries)",
                      rec->domain, rec->outcome ? rec->outcome : "failed", rec->error);
        } else if (g_strcmp0(rec->outcome, "nothing to do") != 0) {
            done++;
            g_message("Recovery of domain '%s' at the start: %s, on the %s host with %u of %u "
                      "VF(s)",
                      rec->domain, rec->outcome, rec->final_host ? rec->final_host : "?",
                      rec->vfs_attached, rec->vfs_total);
        }
    }
    if (done || failed)
        g_message("Recovery at the start: %u migration(s) recovered, %u failed", done, failed);
    if (r->slot)
        *r->slot = NULL;
    recovery_unref(r);
    return G_SOURCE_REMOVE;
}

static gpointer recovery_thread(gpointer data)
{
    HotmigdRecovery *r = data;

    /* One domain at a time: a journal another process holds (a migrate-vm running) is its. */
    r->results = g_ptr_array_new_with_free_func((GDestroyNotify)orch_recovery_free);
    for (guint i = 0; i < r->domains->len; i++) {
        g_autoptr(GPtrArray) results = NULL;
        g_autoptr(GError) local = NULL;
        gboolean busy;

        g_free(r->opts.domain);
        r->opts.domain = g_strdup(g_ptr_array_index(r->domains, i));
        /* Right after a kill the hypervisors may still be settling the job the migration
         * left (an incoming domain being torn down): a failed recovery is tried again. */
        for (guint attempt = 1;; attempt++) {
            r->recover(&r->opts, &results, &local);
            if (!local || g_error_matches(local, ORCH_ERROR, ORCH_ERROR_BUSY) ||
                attempt == RECOVERY_ATTEMPTS)
                break;
            g_message("Recovery of domain '%s' at the start, attempt %u of %u: %s", r->opts.domain,
                      attempt, RECOVERY_ATTEMPTS, local->message);
            g_clear_pointer(&results, g_ptr_array_unref);
            g_clear_error(&local);
            g_usleep(RECOVERY_RETRY_S * G_USEC_PER_SEC);
        }
        busy = g_error_matches(local, ORCH_ERROR, ORCH_ERROR_BUSY);
        for (guint j = 0; results && j < results->len; j++) {
            OrchRecovery *rec = g_ptr_array_index(results, j);

            if (busy) {
                g_free(rec->outcome);
                rec->outcome = g_strdup("busy");
            }
            g_ptr_array_add(r->results, g_ptr_array_steal_index(results, j--));
        }
    }
    hm_main_context_post(r->context, G_PRIORITY_DEFAULT, recovery_done, r, NULL);
    return NULL;
}

HotmigdRecovery *hotmigd_recovery_start(const OrchOptions *opts, HotmigdRecoverFunc recover,
                                        HotmigdRecovery **slot)
{
    HotmigdRecovery *r;
    g_autoptr(GError) local = NULL;
    GPtrArray *journals = orch_journal_list(opts->state_dir, &local);

    if (!journals || !journals->len) {
        if (!journals)
            g_warning("Recovery at the start: %s", local->message);
        g_clear_pointer(&journals, g_ptr_array_unref);
        return NULL;
    }
    r = g_new0(HotmigdRecovery, 1);
    r->domains = journals;
    r->refs = 1; /* dropped by recovery_done() */
    r->slot = slot;
    orch_options_copy(&r->opts, opts);
    g_clear_pointer(&r->opts.domain, g_free); /* every domain */
    r->recover = recover ? recover : orch_recover;
    r->context = g_main_context_ref_thread_default();
    g_message("Recovering %u unfinished migration journal(s) under '%s' (a hotmigd or migrate-vm "
              "was stopped in the middle)",
              r->domains->len, r->opts.state_dir);
    g_thread_unref(g_thread_new("recovery", recovery_thread, r));
    return r;
}

void hotmigd_recovery_forget(HotmigdRecovery *r)
{
    g_return_if_fail(r != NULL);
    r->slot = NULL;
}
