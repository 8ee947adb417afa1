/* The libvirt adapter: the only file of hotmig that talks to libvirt.
 *
 * libvirt's default event loop runs on a thread of its own, started once: a blocking call such
 * as virDomainMigrateToURI3() on one thread must not starve the callbacks (device removal, job
 * completion, keepalive, stream events) that another thread waits for. */
#include <stdlib.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "engine/virt.h"

typedef struct {
    OrchVirt parent;
    virConnectPtr conn;
} VirtLibvirt;

typedef struct {
    OrchVirtChannel parent;
    virStreamPtr stream;
    GMutex lock;
    GCond cond;
    gboolean readable; /* an event said data (or EOF) may be there */
    gboolean writable;
    gboolean hangup;
    gboolean watching_writable;
} VirtLibvirtChannel;

/* ---- errors and the event loop ------------------------------------------------------------ */

static void virt_error_ignore(void *opaque, virErrorPtr err)
{
    /* libvirt prints every error to stderr by default; we report them through GError. */
}

static G_GNUC_PRINTF(3, 4) void virt_set_error(GError **error, OrchError code, const char *fmt,
                                               ...)
{
    va_list ap;
    g_autofree char *prefix = NULL;
    virErrorPtr err = virGetLastError();

    va_start(ap, fmt);
    prefix = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (err && err->code == VIR_ERR_OPERATION_TIMEOUT)
        code = ORCH_ERROR_TIMEOUT;
    g_set_error(error, ORCH_ERROR, code, "%s: %s", prefix,
                err && err->message ? err->message : "unknown libvirt error");
}

static gpointer virt_event_loop(gpointer data)
{
    for (;;) {
        if (virEventRunDefaultImpl() < 0)
            g_debug("libvirt event loop iteration failed");
    }
    return NULL;
}

static gpointer virt_global_init(gpointer data)
{
    if (virInitialize() < 0 || virEventRegisterDefaultImpl() < 0)
        return GINT_TO_POINTER(FALSE);
    virSetErrorFunc(NULL, virt_error_ignore);
    g_thread_unref(g_thread_new("libvirt-events", virt_event_loop, NULL));
    return GINT_TO_POINTER(TRUE);
}

static gboolean virt_ensure_init(GError **error)
{
    static GOnce once = G_ONCE_INIT;

    if (!GPOINTER_TO_INT(g_once(&once, virt_global_init, NULL))) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_HYPERVISOR,
                    "Cannot initialize libvirt's event loop");
        return FALSE;
    }
    return TRUE;
}

static virConnectPtr virt_conn(OrchVirt *virt)
{
    return ((VirtLibvirt *)virt)->conn;
}

static virDomainPtr virt_lookup(OrchVirt *virt, const char *domain, GError **error)
{
    virDomainPtr dom = virDomainLookupByName(virt_conn(virt), domain);

    if (!dom) {
        virErrorPtr err = virGetLastError();
        virt_set_error(error,
                       err && err->code == VIR_ERR_NO_DOMAIN ? ORCH_ERROR_NO_DOMAIN
                                                             : ORCH_ERROR_HYPERVISOR,
                       "Cannot find domain '%s' on %s host '%s'", domain, virt->label, virt->uri);
    }
    return dom;
}

/* ---- domains ------------------------------------------------------------------------------ */

static gboolean virt_domain_state(OrchVirt *virt, const char *domain,
                                  OrchVirtDomainState *ret_state, GError **error)
{
    virDomainPtr dom = virDomainLookupByName(virt_conn(virt), domain);
    int active;

    if (!dom) {
        virErrorPtr err = virGetLastError();
        if (err && err->code == VIR_ERR_NO_DOMAIN) {
            *ret_state = ORCH_VIRT_DOMAIN_MISSING;
            return TRUE;
        }
        virt_set_error(error, ORCH_ERROR_HYPERVISOR, "Cannot look up domain '%s' on '%s'",
                       domain, virt->uri);
        return FALSE;
    }
    active = virDomainIsActive(dom);
    /* Every libvirt call, virDomainFree() too, resets the thread's last error: read it first.
     * A domain gone since the lookup (an incoming migration's, torn down) is missing. */
    if (active < 0) {
        virErrorPtr err = virGetLastError();

        if (err && err->code == VIR_ERR_NO_DOMAIN) {
            virDomainFree(dom);
            *ret_state = ORCH_VIRT_DOMAIN_MISSING;
            return TRUE;
        }
        virt_set_error(error, ORCH_ERROR_HYPERVISOR, "Cannot read the state of '%s' on '%s'",
                       domain, virt->uri);
    }
    virDomainFree(dom);
    if (active < 0)
        return FALSE;
    *ret_state = active ? ORCH_VIRT_DOMAIN_RUNNING : ORCH_VIRT_DOMAIN_INACTIVE;
    return TRUE;
}

static gboolean virt_domain_is_persistent(OrchVirt *virt, const char *domain,
                                          gboolean *ret_persistent, GError **error)
{
    virDomainPtr dom = virt_lookup(virt, domain, error);
    int persistent;

    if (!dom)
        return FALSE;
    persistent = virDomainIsPersistent(dom);
    if (persistent < 0)
        virt_set_error(error, ORCH_ERROR_HYPERVISOR, "Cannot tell whether '%s' is persistent",
                       domain);
    virDomainFree(dom);
    if (persistent < 0)
        return FALSE;
    *ret_persistent = persistent == 1;
    return TRUE;
}

static char *virt_domain_get_xml(OrchVirt *virt, const char *domain, GError **error)
{
    virDomainPtr dom = virt_lookup(virt, domain, error);
    char *xml;
    char *ret;

    if (!dom)
        return NULL;
    xml = virDomainGetXMLDesc(dom, 0);
    if (!xml)
        virt_set_error(error, ORCH_ERROR_HYPERVISOR, "Cannot read the XML of '%s'", domain);
    virDomainFree(dom);
    if (!xml)
        return NULL;
    ret = g_strdup(xml);
    free(xml);
    return ret;
}

/* ---- device detach: DetachDeviceAlias + wait for DEVICE_REMOVED ---------------------------- */

typedef struct {
    GMutex lock;
    GCond cond;
    const char *alias;
    int result; /* 0 waiting, 1 removed, -1 the guest refused */
} RemovalWait;

static void virt_on_device_removed(virConnectPtr conn, virDomainPtr dom, const char *alias,
                                   void *opaque)
{
    RemovalWait *w = opaque;

    g_mutex_lock(&w->lock);
    if (g_str_equal(alias, w->alias)) {
        w->result = 1;
        g_cond_broadcast(&w->cond);
    }
    g_mutex_unlock(&w->lock);
}

static void virt_on_device_removal_failed(virConnectPtr conn, virDomainPtr dom,
                                          const char *alias, void *opaque)
{
    RemovalWait *w = opaque;

    g_mutex_lock(&w->lock);
    if (g_str_equal(alias, w->alias)) {
        w->result = -1;
        g_cond_broadcast(&w->cond);
    }
    g_mutex_unlock(&w->lock);
}

static gboolean virt_device_detach(OrchVirt *virt, const char *domain, const char *alias,
                                   gboolean config, guint timeout_ms, GError **error)
{
    virDomainPtr dom = virt_lookup(virt, domain, error);
    RemovalWait w = {.alias = alias};
    HmDeadline deadline = hm_deadline_in_ms(timeout_ms);
    unsigned int flags = VIR_DOMAIN_AFFECT_LIVE | (config ? VIR_DOMAIN_AFFECT_CONFIG : 0);
    int id_removed;
    int id_failed;
    gboolean ok = FALSE;

    if (!dom)
        return FALSE;
    g_mutex_init(&w.lock);
    g_cond_init(&w.cond);
    /* Register before detaching: the event can come before the call returns. */
    id_removed = virConnectDomainEventRegisterAny(
        virt_conn(virt), dom, VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED,
        VIR_DOMAIN_EVENT_CALLBACK(virt_on_device_removed), &w, NULL);
    id_failed = virConnectDomainEventRegisterAny(
        virt_conn(virt), dom, VIR_DOMAIN_EVENT_ID_DEVICE_REMOVAL_FAILED,
        VIR_DOMAIN_EVENT_CALLBACK(virt_on_device_removal_failed), &w, NULL);
    if (id_removed < 0 || id_failed < 0) {
        virt_set_error(error, ORCH_ERROR_HYPERVISOR, "Cannot watch device removal on '%s'",
                       domain);
        goto out;
    }
    if (virDomainDetachDeviceAlias(dom, alias, flags) < 0) {
        virt_set_error(error, ORCH_ERROR_HYPERVISOR, "Cannot detach '%s' from '%s'", alias,
                       domain);
        goto out;
    }
    g_mutex_lock(&w.lock);
    while (w.result == 0) {
        if (!g_cond_wait_until(&w.cond, &w.lock, deadline))
            break;
    }
    g_mutex_unlock(&w.lock);
    if (w.result == 1) {
        ok = TRUE;
    } else if (w.result == -1) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_HYPERVISOR,
                    "The guest in '%s' refused to release '%s'", domain, alias);
    } else {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_TIMEOUT,
                    "The guest in '%s' did not release '%s' within %u ms", domain, alias,
                    timeout_ms);
    }

out:
    if (id_removed >= 0)
        virConnectDomainEventDeregisterAny(virt_conn(virt), id_removed);
    if (id_failed >= 0)
        virConnectDomainEventDeregisterAny(virt_conn(virt), id_failed);
    /* Deregistering waits for a callback in progress, so @w is no longer used. */
    g_mutex_lock(&w.lock);
    g_mutex_unlock(&w.lock);
    g_mutex_clear(&w.lock);
    g_cond_clear(&w.cond);
    virDomainFree(dom);
    return ok;
}

static gboolean virt_device_attach(OrchVirt *virt, const char *domain, const char *device_xml,
                                   gboolean config, GError **error)
{
    virDomainPtr dom = virt_lookup(virt, domain, error);
    unsigned int flags = VIR_DOMAIN_AFFECT_LIVE | (config ? VIR_DOMAIN_AFFECT_CONFIG : 0);
    int rc;

    if (!dom)
        return FALSE;
    rc = virDomainAttachDeviceFlags(dom, device_xml, flags);
    if (rc < 0)
        virt_set_error(error, ORCH_ERROR_HYPERVISOR, "Cannot attach the device to '%s' on '%s'",
                       domain, virt->uri);
    virDomainFree(dom);
    return rc == 0;
}

/* ---- migration ---------------------------------------------------------------------------- */

/* A refused switch to post-copy is tried again this often while the job runs. */
#define VIRT_POSTCOPY_RETRY_MS 250

typedef struct {
    GMutex lock;
    GCond cond;
    gboolean done;           /* the migration call returned */
    gboolean have_completed; /* JOB_COMPLETED arrived */
    OrchMigrateStats stats;
    virDomainPtr dom;
    const OrchMigrateParams *params;
    gint64 start;              /* monotonic time the job began */
    gboolean postcopy_started; /* virDomainMigrateStartPostCopy was called */
    gboolean first_pass_done;  /* a MIGRATION_ITERATION event said pre-copy began its 2nd pass */
    gint64 postcopy_retry;     /* after a refused switch: not before this monotonic time */
    gboolean timed_out;        /* the timeout action was taken */
    char event[128];           /* what was done, for OrchMigrateStats.event */
} MigrationWatch;

static void virt_on_job_completed(virConnectPtr conn, virDomainPtr dom,
                                  virTypedParameterPtr params, int nparams, void *opaque)
{
    MigrationWatch *w = opaque;
    unsigned long long value;

    g_mutex_lock(&w->lock);
    if (virTypedParamsGetULLong(params, nparams, VIR_DOMAIN_JOB_DOWNTIME, &value) == 1)
        w->stats.downtime_ms = value;
    if (virTypedParamsGetULLong(params, nparams, VIR_DOMAIN_JOB_DATA_PROCESSED, &value) == 1)
        w->stats.data_bytes = value;
    if (virTypedParamsGetULLong(params, nparams, VIR_DOMAIN_JOB_TIME_ELAPSED, &value) == 1)
        w->stats.total_ms = value;
    w->stats.have_stats = TRUE;
    w->have_completed = TRUE;
    g_cond_broadcast(&w->cond);
    g_mutex_unlock(&w->lock);
}

/* QEMU finished a pass over the guest's memory and starts @iteration (from 1): once the second
 * begins, the first pass is done (virsh migrate --postcopy-after-precopy). */
static void virt_on_migration_iteration(virConnectPtr conn, virDomainPtr dom, int iteration,
                                        void *opaque)
{
    MigrationWatch *w = opaque;

    g_mutex_lock(&w->lock);
    if (iteration >= 2 && !w->first_pass_done) {
        w->first_pass_done = TRUE;
        g_cond_broadcast(&w->cond);
    }
    g_mutex_unlock(&w->lock);
}

/* Called with w->lock held, which it drops around the libvirt calls. Takes the actions that
 * are due: the switch to post-copy after postcopy_after_ms, the timeout action (virsh migrate
 * --timeout: suspend, or switch to post-copy, or our own abort). */
static void virt_migration_act(MigrationWatch *w, gint64 now)
{
    const OrchMigrateParams *p = w->params;
    gint64 elapsed_ms = (now - w->start) / G_TIME_SPAN_MILLISECOND;
    gboolean want_postcopy = FALSE; /* post-copy is due (or overdue: an earlier try refused) */
    gboolean start_postcopy = FALSE;
    gboolean postcopy_refused = FALSE;
    gboolean timeout = FALSE;
    g_autofree char *when = NULL; /* what made the action due */
    g_autofree char *refused = NULL;
    const char *done;

    if (p->postcopy && p->postcopy_after_ms && elapsed_ms >= p->postcopy_after_ms) {
        want_postcopy = TRUE;
        when = g_strdup_printf("after %u s of pre-copy", p->postcopy_after_ms / 1000);
    } else if (p->postcopy && p->postcopy_after_precopy && w->first_pass_done) {
        want_postcopy = TRUE;
        when = g_strdup("after the first pass of pre-copy");
    }
    if (p->timeout_ms && !w->timed_out && elapsed_ms >= p->timeout_ms) {
        timeout = TRUE;
        w->timed_out = TRUE;
    }
    if (w->timed_out && p->timeout_action == ORCH_TIMEOUT_POSTCOPY) {
        want_postcopy = TRUE;
        g_free(when);
        when = g_strdup_printf("after the %u s timeout", p->timeout_ms / 1000);
    } else if (timeout) {
        g_free(when);
        when = g_strdup_printf("after the %u s timeout", p->timeout_ms / 1000);
    }
    start_postcopy = want_postcopy && !w->postcopy_started && now >= w->postcopy_retry;
    if (start_postcopy)
        w->postcopy_started = TRUE;
    /* Nothing to do now (a timeout whose action is post-copy waits for its retry). */
    if (!start_postcopy && !(timeout && p->timeout_action != ORCH_TIMEOUT_POSTCOPY))
        return;

    g_mutex_unlock(&w->lock);
    /* The report says what was done, or that libvirt refused it and why. */
    if (start_postcopy && virDomainMigrateStartPostCopy(w->dom, 0) < 0) {
        refused = g_strdup_printf("post-copy refused %s: %s", when, virGetLastErrorMessage());
        postcopy_refused = TRUE;
    }
    if (timeout && p->timeout_action == ORCH_TIMEOUT_SUSPEND && virDomainSuspend(w->dom) < 0) {
        g_free(refused);
        refused = g_strdup_printf("suspend refused %s: %s", when, virGetLastErrorMessage());
    }
    if (timeout && p->timeout_action == ORCH_TIMEOUT_ABORT && virDomainAbortJob(w->dom) < 0) {
        g_free(refused);
        refused = g_strdup_printf("abort refused %s: %s", when, virGetLastErrorMessage());
    }
    g_mutex_lock(&w->lock);
    /* The timers count from the migration call, and libvirt sets the job up (the destination's
     * QEMU, the post-copy capability) within it: under load a switch can come first and QEMU
     * refuses it ("Enable postcopy with migrate-set-capabilities first"). Try again shortly
     * while the job runs; the report keeps the last refusal only if none succeeded. */
    if (postcopy_refused) {
        w->postcopy_started = FALSE;
        w->postcopy_retry = now + VIRT_POSTCOPY_RETRY_MS * G_TIME_SPAN_MILLISECOND;
    }
    done = start_postcopy                              ? "post-copy started"
           : p->timeout_action == ORCH_TIMEOUT_SUSPEND ? "guest suspended"
           : p->timeout_action == ORCH_TIMEOUT_ABORT   ? "job aborted"
                                                       : "post-copy started";
    if (refused) {
        g_debug("Migration of '%s': %s", virDomainGetName(w->dom), refused);
        g_strlcpy(w->event, refused, sizeof(w->event));
    } else {
        g_snprintf(w->event, sizeof(w->event), "%s %s", done, when);
    }
}

/* The next instant virt_migration_act() has something to do, or G_MAXINT64. */
static gint64 virt_migration_next_action(const MigrationWatch *w)
{
    const OrchMigrateParams *p = w->params;
    gint64 next = G_MAXINT64;

    if (p->postcopy && !w->postcopy_started) {
        gint64 due = G_MAXINT64;

        if (p->postcopy_after_ms)
            due = w->start + (gint64)p->postcopy_after_ms * G_TIME_SPAN_MILLISECOND;
        if ((p->postcopy_after_precopy && w->first_pass_done) ||
            (w->timed_out && p->timeout_action == ORCH_TIMEOUT_POSTCOPY))
            due = w->start;
        if (due != G_MAXINT64)
            next = MIN(next, MAX(due, w->postcopy_retry));
    }
    if (p->timeout_ms && !w->timed_out)
        next = MIN(next, w->start + (gint64)p->timeout_ms * G_TIME_SPAN_MILLISECOND);
    return next;
}

/* Until the migration call returns: reports progress about once a second (as virsh does) and
 * takes the timed actions when they are due. */
static gpointer virt_migration_watch(gpointer data)
{
    MigrationWatch *w = data;
    gint64 next_report = g_get_monotonic_time() + G_TIME_SPAN_SECOND;

    g_mutex_lock(&w->lock);
    while (!w->done) {
        gint64 until = MIN(virt_migration_next_action(w), next_report);
        virDomainJobInfo info;
        gint64 now;

        while (!w->done && g_cond_wait_until(&w->cond, &w->lock, until))
            ;
        if (w->done)
            break;
        now = g_get_monotonic_time();
        virt_migration_act(w, now);
        if (now < next_report || !w->params->progress)
            continue;
        next_report = now + G_TIME_SPAN_SECOND;
        g_mutex_unlock(&w->lock);
        if (virDomainGetJobInfo(w->dom, &info) == 0 && info.type != VIR_DOMAIN_JOB_NONE)
            w->params->progress(info.dataProcessed, info.dataTotal, w->params->progress_opaque);
        g_mutex_lock(&w->lock);
    }
    g_mutex_unlock(&w->lock);
    return NULL;
}

/* The flags of virDomainMigrateToURI3() for @params: always live and peer-to-peer. */
static unsigned int virt_migrate_flags(const OrchMigrateParams *params)
{
    unsigned int flags = VIR_MIGRATE_LIVE | VIR_MIGRATE_PEER2PEER;

    if (params->persistent)
        flags |= VIR_MIGRATE_PERSIST_DEST;
    if (params->undefine_source)
        flags |= VIR_MIGRATE_UNDEFINE_SOURCE;
    if (params->parallel)
        flags |= VIR_MIGRATE_PARALLEL;
    if (params->auto_converge)
        flags |= VIR_MIGRATE_AUTO_CONVERGE;
    if (params->postcopy)
        flags |= VIR_MIGRATE_POSTCOPY;
    if (params->tls)
        flags |= VIR_MIGRATE_TLS;
    return flags;
}

/* The typed parameters of virDomainMigrateToURI3() for @params (free them with
 * virTypedParamsFree()); FALSE with @error when they cannot be built. */
static gboolean virt_migrate_typed_params(const OrchMigrateParams *params,
                                          virTypedParameterPtr *ret_tp, int *ret_ntp,
                                          GError **error)
{
    virTypedParameterPtr tp = NULL;
    int ntp = 0;
    int maxtp = 0;

    if ((params->parallel &&
         virTypedParamsAddInt(&tp, &ntp, &maxtp, VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS,
                              (int)params->parallel) < 0) ||
        (params->migrate_uri &&
         virTypedParamsAddString(&tp, &ntp, &maxtp, VIR_MIGRATE_PARAM_URI,
                                 params->migrate_uri) < 0) ||
        (params->bandwidth_mib &&
         virTypedParamsAddULLong(&tp, &ntp, &maxtp, VIR_MIGRATE_PARAM_BANDWIDTH,
                                 params->bandwidth_mib) < 0)) {
        virt_set_error(error, ORCH_ERROR_FAILED, "Cannot build the migration parameters");
        virTypedParamsFree(tp, ntp);
        return FALSE;
    }
    *ret_tp = tp;
    *ret_ntp = ntp;
    return TRUE;
}

/* The migration call returned @rc: the watch thread (@progress, may be NULL) ends, and after a
 * success the job's completion event is waited for a moment (it travels through the event
 * loop thread). */
static void virt_migration_watch_end(MigrationWatch *w, GThread *progress, int rc)
{
    g_mutex_lock(&w->lock);
    w->done = TRUE;
    g_cond_broadcast(&w->cond);
    if (rc == 0) {
        HmDeadline until = hm_deadline_in_ms(3000);
        while (!w->have_completed && g_cond_wait_until(&w->cond, &w->lock, until))
            ;
    }
    g_mutex_unlock(&w->lock);
    if (progress)
        g_thread_join(progress);
}

static gboolean virt_migrate(OrchVirt *virt, const char *domain, const char *dest_uri,
                             const OrchMigrateParams *params, OrchMigrateStats *ret_stats,
                             GError **error)
{
    virDomainPtr dom = virt_lookup(virt, domain, error);
    virTypedParameterPtr tp = NULL;
    int ntp = 0;
    MigrationWatch w = {.params = params};
    GThread *progress = NULL;
    int id_completed;
    int id_iteration = -1;
    int rc;

    if (!dom)
        return FALSE;
    if (!virt_migrate_typed_params(params, &tp, &ntp, error)) {
        virDomainFree(dom);
        return FALSE;
    }

    g_mutex_init(&w.lock);
    g_cond_init(&w.cond);
    w.dom = dom;
    id_completed = virConnectDomainEventRegisterAny(
        virt_conn(virt), dom, VIR_DOMAIN_EVENT_ID_JOB_COMPLETED,
        VIR_DOMAIN_EVENT_CALLBACK(virt_on_job_completed), &w, NULL);
    if (params->postcopy && params->postcopy_after_precopy)
        id_iteration = virConnectDomainEventRegisterAny(
            virt_conn(virt), dom, VIR_DOMAIN_EVENT_ID_MIGRATION_ITERATION,
            VIR_DOMAIN_EVENT_CALLBACK(virt_on_migration_iteration), &w, NULL);
    w.start = g_get_monotonic_time();
    if (params->progress || params->timeout_ms ||
        (params->postcopy && (params->postcopy_after_ms || params->postcopy_after_precopy)))
        progress = g_thread_new("migration-watch", virt_migration_watch, &w);

    rc = virDomainMigrateToURI3(dom, dest_uri, tp, ntp, virt_migrate_flags(params));
    if (rc < 0) {
        g_autofree char *event = NULL;

        g_mutex_lock(&w.lock);
        event = w.event[0] ? g_strdup_printf(" (%s)", w.event) : g_strdup("");
        g_mutex_unlock(&w.lock);
        virt_set_error(error,
                       w.timed_out && params->timeout_action == ORCH_TIMEOUT_ABORT
                           ? ORCH_ERROR_TIMEOUT
                           : ORCH_ERROR_HYPERVISOR,
                       "Cannot migrate '%s' to '%s'%s", domain, dest_uri, event);
    }

    virt_migration_watch_end(&w, progress, rc);
    if (id_completed >= 0)
        virConnectDomainEventDeregisterAny(virt_conn(virt), id_completed);
    if (id_iteration >= 0)
        virConnectDomainEventDeregisterAny(virt_conn(virt), id_iteration);
    g_mutex_lock(&w.lock);
    if (rc == 0) {
        *ret_stats = w.stats;
        g_strlcpy(ret_stats->event, w.event, sizeof(ret_stats->event));
    }
    g_mutex_unlock(&w.lock);
    g_mutex_clear(&w.lock);
    g_cond_clear(&w.cond);
    virTypedParamsFree(tp, ntp);
    virDomainFree(dom);
    return rc == 0;
}

static gboolean virt_domain_abort_job(OrchVirt *virt, const char *domain, GError **error)
{
    virDomainPtr dom = virt_lookup(virt, domain, error);
    virDomainJobInfo info;
    int rc;

    if (!dom)
        return FALSE;
    if (virDomainGetJobInfo(dom, &info) == 0 && info.type == VIR_DOMAIN_JOB_NONE) {
        virDomainFree(dom);
        return TRUE;
    }
    rc = virDomainAbortJob(dom);
    if (rc < 0) {
        virErrorPtr err = virGetLastError();

        /* The job ended meanwhile: nothing left to abort. */
        if (err && err->code == VIR_ERR_OPERATION_INVALID)
            rc = 0;
        else
            virt_set_error(error, ORCH_ERROR_HYPERVISOR, "Cannot abort the job of '%s' on '%s'",
                           domain, virt->uri);
    }
    virDomainFree(dom);
    return rc == 0;
}

/* ---- the switch-over of an incoming migration ---------------------------------------------- */

typedef struct {
    char *domain;
    OrchVirtMigratedInFunc fn;
    gpointer opaque;
    GDestroyNotify destroy;
    gboolean fired; /* only libvirt's event thread reads and writes it */
} MigratedInWatch;

static int virt_on_lifecycle(virConnectPtr conn, virDomainPtr dom, int event, int detail,
                             void *opaque)
{
    MigratedInWatch *w = opaque;
    const char *name = virDomainGetName(dom);

    /* RESUMED_MIGRATED: the destination's Finish started its vCPUs (a post-copy's switch-over
     * says RESUMED_POSTCOPY instead, and is not this). */
    if (!w->fired && event == VIR_DOMAIN_EVENT_RESUMED &&
        detail == VIR_DOMAIN_EVENT_RESUMED_MIGRATED && name && g_str_equal(name, w->domain)) {
        w->fired = TRUE;
        w->fn(w->opaque);
    }
    return 0;
}

static void migrated_in_watch_free(void *opaque)
{
    MigratedInWatch *w = opaque;

    if (w->destroy)
        w->destroy(w->opaque);
    g_free(w->domain);
    g_free(w);
}

static guint virt_watch_migrated_in(OrchVirt *virt, const char *domain, OrchVirtMigratedInFunc fn,
                                    gpointer opaque, GDestroyNotify destroy, GError **error)
{
    MigratedInWatch *w = g_new0(MigratedInWatch, 1);
    int id;

    w->domain = g_strdup(domain);
    w->fn = fn;
    w->opaque = opaque;
    /* Every domain's events: the domain is not defined here before the migration. */
    id = virConnectDomainEventRegisterAny(virt_conn(virt), NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                          VIR_DOMAIN_EVENT_CALLBACK(virt_on_lifecycle), w,
                                          migrated_in_watch_free);
    if (id < 0) {
        virt_set_error(error, ORCH_ERROR_HYPERVISOR,
                       "Cannot watch the lifecycle events of '%s' on '%s'", domain, virt->uri);
        g_free(w->domain);
        g_free(w);
        return 0;
    }
    w->destroy = destroy; /* from here on libvirt frees it (migrated_in_watch_free) */
    return (guint)id + 1;
}

static void virt_unwatch(OrchVirt *virt, guint watch)
{
    if (virConnectDomainEventDeregisterAny(virt_conn(virt), (int)watch - 1) < 0)
        g_debug("Cannot remove the lifecycle watch %u on '%s'", watch, virt->uri);
}

/* ---- guest channel as a non-blocking stream ----------------------------------------------- */

static void virt_on_stream_event(virStreamPtr stream, int events, void *opaque)
{
    VirtLibvirtChannel *chan = opaque;

    g_mutex_lock(&chan->lock);
    if (events & VIR_STREAM_EVENT_READABLE)
        chan->readable = TRUE;
    if (events & VIR_STREAM_EVENT_WRITABLE)
        chan->writable = TRUE;
    if (events & (VIR_STREAM_EVENT_ERROR | VIR_STREAM_EVENT_HANGUP))
        chan->hangup = TRUE;
    g_cond_broadcast(&chan->cond);
    g_mutex_unlock(&chan->lock);
}

/* The stream callback's free function: libvirt calls it once the callback is removed and no
 * dispatch of it is under way, which may be after virt_channel_close() returned. */
static void virt_channel_free(void *opaque)
{
    VirtLibvirtChannel *chan = opaque;

    g_mutex_clear(&chan->lock);
    g_cond_clear(&chan->cond);
    g_free(chan);
}

static OrchVirtChannel *virt_channel_open(OrchVirt *virt, const char *domain, const char *name,
                                          gboolean force, GError **error)
{
    virDomainPtr dom = virt_lookup(virt, domain, error);
    VirtLibvirtChannel *chan;

    if (!dom)
        return NULL;
    chan = g_new0(VirtLibvirtChannel, 1);
    chan->parent.virt = virt;
    g_mutex_init(&chan->lock);
    g_cond_init(&chan->cond);
    chan->stream = virStreamNew(virt_conn(virt), VIR_STREAM_NONBLOCK);
    if (!chan->stream ||
        /* FORCE (a migration's): a client that died mid-migration must not lock us out of
         * the agent. Without it, libvirt refuses the channel while another client holds it. */
        virDomainOpenChannel(dom, name, chan->stream, force ? VIR_DOMAIN_CHANNEL_FORCE : 0) < 0) {
        virt_set_error(error, ORCH_ERROR_AGENT, "Cannot open channel '%s' of '%s' on '%s'",
                       name, domain, virt->uri);
        goto error;
    }
    if (virStreamEventAddCallback(chan->stream,
                                  VIR_STREAM_EVENT_READABLE | VIR_STREAM_EVENT_ERROR |
                                      VIR_STREAM_EVENT_HANGUP,
                                  virt_on_stream_event, chan, virt_channel_free) < 0) {
        virt_set_error(error, ORCH_ERROR_AGENT, "Cannot watch channel '%s' of '%s'", name,
                       domain);
        goto error;
    }
    virDomainFree(dom);
    return &chan->parent;

error:
    if (chan->stream) {
        virStreamAbort(chan->stream);
        virStreamFree(chan->stream);
    }
    g_mutex_clear(&chan->lock);
    g_cond_clear(&chan->cond);
    g_free(chan);
    virDomainFree(dom);
    return NULL;
}

/* Waits until the stream event sets *@flag (or hang-up), at most until @deadline. Called and
 * returns with chan->lock held. */
static gboolean virt_channel_wait(VirtLibvirtChannel *chan, gboolean *flag, HmDeadline deadline)
{
    while (!*flag && !chan->hangup) {
        if (!g_cond_wait_until(&chan->cond, &chan->lock, deadline))
            return FALSE;
    }
    return TRUE;
}

static gboolean virt_channel_send(OrchVirtChannel *base, const void *buf, gsize len,
                                  HmDeadline deadline, GError **error)
{
    VirtLibvirtChannel *chan = (VirtLibvirtChannel *)base;
    const char *p = buf;

    while (len > 0) {
        int n;

        g_mutex_lock(&chan->lock);
        chan->writable = FALSE;
        g_mutex_unlock(&chan->lock);
        n = virStreamSend(chan->stream, p, MIN(len, 64 * 1024));
        if (n > 0) {
            p += n;
            len -= n;
            continue;
        }
        if (n != -2) {
            virt_set_error(error, ORCH_ERROR_AGENT, "Cannot write to the guest channel");
            return FALSE;
        }
        if (!chan->watching_writable) {
            virStreamEventUpdateCallback(chan->stream, VIR_STREAM_EVENT_READABLE |
                                                           VIR_STREAM_EVENT_WRITABLE |
                                                           VIR_STREAM_EVENT_ERROR |
                                                           VIR_STREAM_EVENT_HANGUP);
            chan->watching_writable = TRUE;
        }
        g_mutex_lock(&chan->lock);
        if (!virt_channel_wait(chan, &chan->writable, deadline)) {
            g_mutex_unlock(&chan->lock);
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_TIMEOUT,
                        "Timed out writing to the guest channel");
            return FALSE;
        }
        g_mutex_unlock(&chan->lock);
    }
    if (chan->watching_writable) {
        /* An always-writable stream would wake the event loop without end. */
        virStreamEventUpdateCallback(chan->stream, VIR_STREAM_EVENT_READABLE |
                                                       VIR_STREAM_EVENT_ERROR |
                                                       VIR_STREAM_EVENT_HANGUP);
        chan->watching_writable = FALSE;
    }
    return TRUE;
}

static gssize virt_channel_recv(OrchVirtChannel *base, void *buf, gsize len, HmDeadline deadline,
                                GError **error)
{
    VirtLibvirtChannel *chan = (VirtLibvirtChannel *)base;

    for (;;) {
        int n;

        g_mutex_lock(&chan->lock);
        chan->readable = FALSE;
        g_mutex_unlock(&chan->lock);
        n = virStreamRecv(chan->stream, buf, MIN(len, 64 * 1024));
        if (n >= 0)
            return n;
        if (n != -2) {
            virt_set_error(error, ORCH_ERROR_AGENT, "Cannot read from the guest channel");
            return -1;
        }
        g_mutex_lock(&chan->lock);
        if (chan->hangup) {
            g_mutex_unlock(&chan->lock);
            return 0;
        }
        if (!virt_channel_wait(chan, &chan->readable, deadline)) {
            g_mutex_unlock(&chan->lock);
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_TIMEOUT,
                        "Timed out waiting for the guest agent");
            return -1;
        }
        g_mutex_unlock(&chan->lock);
    }
}

static void virt_channel_close(OrchVirtChannel *base)
{
    VirtLibvirtChannel *chan = (VirtLibvirtChannel *)base;
    virStreamPtr stream = chan->stream;

    /* Removing the callback does not wait for a dispatch of it under way on the event loop
     * thread: @chan is freed by virt_channel_free() when libvirt is done with it (now, or when
     * that dispatch returns). Freeing it here let the late callback lock a mutex in freed
     * memory: seen as a report detail overwritten at that offset, and as the event thread
     * stuck on a futex (no more events, no keepalive answers: unplug and agent timeouts,
     * then "connection closed due to keepalive timeout"). */
    virStreamEventRemoveCallback(stream);
    virStreamAbort(stream);
    virStreamFree(stream);
}

/* ---- host inventory ----------------------------------------------------------------------- */

static GPtrArray *virt_nodedev_list_pci_xml(OrchVirt *virt, GError **error)
{
    virNodeDevicePtr *devs = NULL;
    int n = virConnectListAllNodeDevices(virt_conn(virt), &devs,
                                         VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV);
    g_autoptr(GPtrArray) xmls = g_ptr_array_new_with_free_func(g_free);
    gboolean ok = TRUE;

    if (n < 0) {
        virt_set_error(error, ORCH_ERROR_HYPERVISOR, "Cannot list the PCI devices of '%s'",
                       virt->uri);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        /* Named before the call whose error is reported: every call resets the last error. */
        const char *name = virNodeDeviceGetName(devs[i]);
        char *xml = ok ? virNodeDeviceGetXMLDesc(devs[i], 0) : NULL;

        if (ok && !xml) {
            virt_set_error(error, ORCH_ERROR_HYPERVISOR, "Cannot read node device '%s'", name);
            ok = FALSE;
        }
        if (xml) {
            g_ptr_array_add(xmls, g_strdup(xml));
            free(xml);
        }
        virNodeDeviceFree(devs[i]);
    }
    free(devs);
    return ok ? g_steal_pointer(&xmls) : NULL;
}

static GPtrArray *virt_domain_list_xml(OrchVirt *virt, GError **error)
{
    virDomainPtr *doms = NULL;
    int n = virConnectListAllDomains(virt_conn(virt), &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
    g_autoptr(GPtrArray) xmls = g_ptr_array_new_with_free_func(g_free);

    if (n < 0) {
        virt_set_error(error, ORCH_ERROR_HYPERVISOR, "Cannot list the domains of '%s'",
                       virt->uri);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        /* A domain that went away meanwhile holds no VF: skip it. */
        char *xml = virDomainGetXMLDesc(doms[i], 0);

        if (xml) {
            g_ptr_array_add(xmls, g_strdup(xml));
            free(xml);
        }
        virDomainFree(doms[i]);
    }
    free(doms);
    return g_steal_pointer(&xmls);
}

static gboolean virt_node_get_info(OrchVirt *virt, OrchVirtNodeInfo *ret_info, GError **error)
{
    virNodeInfo info;

    if (virNodeGetInfo(virt_conn(virt), &info) < 0) {
        virt_set_error(error, ORCH_ERROR_HYPERVISOR, "Cannot read the CPUs and memory of '%s'",
                       virt->uri);
        return FALSE;
    }
    ret_info->cpus = info.cpus;
    ret_info->memory_kib = info.memory;
    return TRUE;
}

static GPtrArray *virt_domain_list_info(OrchVirt *virt, gboolean with_xml, GError **error)
{
    virDomainPtr *doms = NULL;
    int n = virConnectListAllDomains(virt_conn(virt), &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
    g_autoptr(GPtrArray) out =
        g_ptr_array_new_with_free_func((GDestroyNotify)orch_virt_domain_info_free);

    if (n < 0) {
        virt_set_error(error, ORCH_ERROR_HYPERVISOR, "Cannot list the domains of '%s'",
                       virt->uri);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        g_autoptr(OrchVirtDomainInfo) item = g_new0(OrchVirtDomainInfo, 1);
        const char *name = virDomainGetName(doms[i]);
        virDomainInfo info;
        char *xml = NULL;

        /* A domain that went away meanwhile is not there any more: leave it out. */
        if (name && virDomainGetInfo(doms[i], &info) == 0 &&
            (!with_xml || (xml = virDomainGetXMLDesc(doms[i], 0)))) {
            item->name = g_strdup(name);
            item->vcpus = info.nrVirtCpu;
            item->memory_kib = info.maxMem;
            item->cpu_time_ns = info.cpuTime;
            item->sampled_us = g_get_monotonic_time();
            item->paused = info.state == VIR_DOMAIN_PAUSED;
            item->xml = g_strdup(xml);
            free(xml);
            g_ptr_array_add(out, g_steal_pointer(&item));
        }
        virDomainFree(doms[i]);
    }
    free(doms);
    return g_steal_pointer(&out);
}

/* ---- compatibility -------------------------------------------------------------------------- */

/* libvirt errors that mean "this host cannot do that", not "the question failed". */
static gboolean virt_error_is_unsupported(void)
{
    virErrorPtr err = virGetLastError();

    return err && (err->code == VIR_ERR_CPU_INCOMPATIBLE || err->code == VIR_ERR_INVALID_ARG ||
                   err->code == VIR_ERR_CONFIG_UNSUPPORTED || err->code == VIR_ERR_NO_SUPPORT ||
                   err->code == VIR_ERR_OPERATION_UNSUPPORTED ||
                   err->code == VIR_ERR_OPERATION_INVALID || err->code == VIR_ERR_XML_ERROR);
}

static gboolean virt_domain_capable(OrchVirt *virt, const XmlDomainNeeds *needs,
                                    gboolean *ret_capable, char **ret_detail, GError **error)
{
    char *caps = virConnectGetDomainCapabilities(virt_conn(virt), needs->emulator, needs->arch,
                                                 needs->machine, needs->type, 0);
    g_autofree char *what = g_strdup_printf(
        "type '%s', arch '%s', machine '%s'", needs->type ? needs->type : "default",
        needs->arch ? needs->arch : "default", needs->machine ? needs->machine : "default");
    int cmp;

    if (!caps && virGetLastErrorCode() == VIR_ERR_NO_SUPPORT) {
        /* A driver without domain capabilities: its host capabilities list its guests. */
        g_autofree char *why = NULL;
        char *host_caps = virConnectGetCapabilities(virt_conn(virt));
        gboolean offered = FALSE;
        gboolean ok;

        if (!host_caps) {
            virt_set_error(error, ORCH_ERROR_HYPERVISOR,
                           "Cannot read the capabilities of %s host '%s'", virt->label,
                           virt->uri);
            return FALSE;
        }
        ok = xml_caps_offer_guest(host_caps, needs->type ? needs->type : "kvm", needs->arch,
                                  needs->machine, &offered, &why, error);
        free(host_caps);
        if (!ok)
            return FALSE;
        *ret_capable = offered;
        *ret_detail = offered ? g_strdup_printf("runs %s (its host capabilities say so)", what)
                              : g_strdup_printf("cannot run %s: %s", what, why);
        return TRUE;
    }
    if (!caps) {
        if (!virt_error_is_unsupported()) {
            virt_set_error(error, ORCH_ERROR_HYPERVISOR,
                           "Cannot read the domain capabilities of %s host '%s'", virt->label,
                           virt->uri);
            return FALSE;
        }
        *ret_capable = FALSE;
        *ret_detail = g_strdup_printf("cannot run %s: %s", what, virGetLastErrorMessage());
        return TRUE;
    }
    free(caps);
    if (!needs->cpu_xml) {
        *ret_capable = TRUE;
        *ret_detail = g_strdup_printf("runs %s (the domain sets no CPU model)", what);
        return TRUE;
    }
    cmp = virConnectCompareHypervisorCPU(virt_conn(virt), needs->emulator, needs->arch,
                                         needs->machine, needs->type, needs->cpu_xml,
                                         VIR_CONNECT_COMPARE_CPU_FAIL_INCOMPATIBLE);
    if (cmp == VIR_CPU_COMPARE_ERROR) {
        if (!virt_error_is_unsupported()) {
            virt_set_error(error, ORCH_ERROR_HYPERVISOR,
                           "Cannot compare the domain's CPU with %s host '%s'", virt->label,
                           virt->uri);
            return FALSE;
        }
        *ret_capable = FALSE;
        *ret_detail = g_strdup_printf("cannot provide the domain's CPU: %s",
                                      virGetLastErrorMessage());
        return TRUE;
    }
    *ret_capable = cmp != VIR_CPU_COMPARE_INCOMPATIBLE;
    *ret_detail = g_strdup_printf("runs %s; its CPU %s the domain's", what,
                                  cmp == VIR_CPU_COMPARE_IDENTICAL ? "is identical to"
                                  : cmp == VIR_CPU_COMPARE_SUPERSET ? "is a superset of"
                                                                     : "cannot provide");
    return TRUE;
}

static void virt_free(OrchVirt *base)
{
    VirtLibvirt *virt = (VirtLibvirt *)base;

    if (virt->conn)
        virConnectClose(virt->conn);
    orch_virt_clear(base);
    g_free(virt);
}

static const OrchVirtOps virt_libvirt_ops = {
    .domain_state = virt_domain_state,
    .domain_is_persistent = virt_domain_is_persistent,
    .domain_get_xml = virt_domain_get_xml,
    .device_detach = virt_device_detach,
    .device_attach = virt_device_attach,
    .migrate = virt_migrate,
    .domain_abort_job = virt_domain_abort_job,
    .watch_migrated_in = virt_watch_migrated_in,
    .unwatch = virt_unwatch,
    .channel_open = virt_channel_open,
    .channel_send = virt_channel_send,
    .channel_recv = virt_channel_recv,
    .channel_close = virt_channel_close,
    .nodedev_list_pci_xml = virt_nodedev_list_pci_xml,
    .domain_list_xml = virt_domain_list_xml,
    .domain_capable = virt_domain_capable,
    .node_get_info = virt_node_get_info,
    .domain_list_info = virt_domain_list_info,
    .free = virt_free,
};

OrchVirt *orch_virt_libvirt_open(const char *uri, const char *label, gpointer opaque,
                                 GError **error)
{
    VirtLibvirt *virt;
    virConnectPtr conn;
    char *real_uri;

    if (!virt_ensure_init(error))
        return NULL;
    conn = virConnectOpenAuth(uri, virConnectAuthPtrDefault, 0);
    if (!conn) {
        virt_set_error(error, ORCH_ERROR_HYPERVISOR, "Cannot connect to %s host '%s'", label,
                       uri ? uri : "(default)");
        return NULL;
    }
    /* Notice a dead peer within ~15 s instead of waiting on TCP. */
    if (virConnectSetKeepAlive(conn, 5, 3) < 0)
        g_debug("Keepalive not supported on '%s'", uri ? uri : "(default)");
    virt = g_new0(VirtLibvirt, 1);
    virt->conn = conn;
    /* The canonical URI: the other host's daemon may need it to migrate back. */
    real_uri = virConnectGetURI(conn);
    orch_virt_init(&virt->parent, &virt_libvirt_ops, real_uri ? real_uri : uri, label);
    free(real_uri);
    return &virt->parent;
}
