/* The migration state machine: the phases of docs/design.md, each timed into the report, and
 * the undo of every phase done when a later one fails. Invariant on return: the domain runs on
 * exactly one host; with all its VFs, or the report says which it lacks and why. */
#include "engine/agent-client.h"
#include "engine/engine.h"
#include "engine/hotmigd-client.h"
#include "engine/journal.h"
#include "engine/virt.h"
#include "hotplug/hotplug.h"
#include "xml/xml.h"

#include <string.h>
#include <unistd.h>

typedef struct {
    const OrchOptions *opts;
    OrchReport *report;
    OrchVirt *src;
    OrchVirt *dst;
    GPtrArray *vfs;          /* XmlVf of the domain */
    GPtrArray *dest_xml;     /* per VF: the device XML to plug on the destination */
    GPtrArray *source_xml;   /* per VF: the device XML to plug back on the source */
    gboolean persistent;     /* the domain is defined on the source */
    gboolean dest_defined;   /* it was defined (not running) on the destination before */
    gboolean dest_persistent; /* it is defined on the destination once migrated there: plugs
                                 and unplugs there change its definition too */
    gboolean agent_prepared; /* the agent quiesced its processes and has not resumed yet */
    gboolean on_destination; /* the domain runs on the destination */
    guint detached;          /* VFs 0..detached-1 are unplugged from the source */
    guint plugged;           /* VFs 0..plugged-1 are plugged on the destination */
    gint64 phase_start;
    gint64 start;
    GPtrArray *like;         /* per VF: the source VF's HotplugVf (borrowed), or NULL */
    GPtrArray *src_vfs;      /* HotplugVf: the source's VFs (owns what like points to) */
    GPtrArray *dest_alias;   /* per VF: its alias on the destination (a hostdev's user alias
                                differs from a libvirt alias on the source), or NULL until
                                plugged */
    OrchJournal *journal;    /* this migration's durable record */
    char *id;                /* migration id (UUID) */
    OrchHotmigdClient *vfd;  /* the destination's hotmigd */
    guint64 node_guid;       /* the InfiniBand identity of the guest's RDMA device, 0: unknown */
    guint64 port_guid;
    char *identity_note;     /* why it is unknown */
    struct Side *identity_side; /* identity_fetch() under way beside the agent, or NULL */
    gboolean identity_fetched; /* identity_fetch() ran: what the source host said below */
    char *identity_source;   /* the source host's note on the GUIDs it gave, or NULL */
    char *identity_error;    /* why it gave none, or NULL */
    GPtrArray *leases;       /* per VF: its HotplugLease on the destination (owned) */
    gint64 leases_asked;     /* monotonic time the first lease was asked for */
    OrchAgent *agent;        /* the source's agent, opened while the VF is leased, or NULL */
    struct Side *agent_side; /* agent_open_src() under way (target-vf), or NULL */
    OrchAgentInventory *inv; /* its inventory, read with the handshake, or NULL: */
    GError *inv_error;       /* why not */
    OrchAgent *dst_agent;    /* the destination's, opened while the VF is plugged, or NULL */
    struct Side *dst_agent_side; /* that opening, until the resume joins it */
    GError *agent_error;     /* why it could not be opened */
    GPtrArray *procs;        /* OrchAgentProcess: the inventory's processes, or NULL */
    GError *procs_error;     /* why they are unknown (no inventory, or a malformed one) */
    gboolean procs_malformed; /* the agent sent an inventory whose processes do not parse */
    gboolean settled;        /* the leases were settled after the plug (alongside the resume) */
    struct LeaseKeeper *keeper; /* renews the destination's leases until they settle */
    struct MigrateCall *call;   /* libvirt's migration call, on call_thread (do_migrate()) */
    GThread *call_thread;       /* until migrate_join() */
    guint call_watch;           /* the destination's switch-over watch, 0: none */
    gulong call_cancel_id;      /* the user's cancel aborts the job while the call runs */
    OrchMigrateParams call_params;
} Migration;

/* ---- side work ----------------------------------------------------------------------------
 * Work that does not wait for the main thread's runs on a thread of its own while the main
 * thread goes on (docs/architecture.md, "Overlap"): the destination's VF lease while the
 * source's agent is opened and its inventory read; the destination's agent channel opened
 * while the VF is plugged there; the leases' end while the processes resume. The main thread
 * touches no field the side work fills (m->vfd, the leases, m->dst_agent) until it joined it;
 * progress() from a side work is kept in its own notes and said at its join (two may run at
 * once: the destination's agent channel and the leases' end). libvirt
 * connections are thread-safe: a side work and the main thread may use one at once. */

typedef gboolean (*SideFunc)(Migration *m, char **ret_detail, GError **error);

typedef struct Side {
    Migration *m;
    SideFunc fn;
    GThread *thread;
    gboolean ok;
    char *detail;
    GError *error;
    GPtrArray *notes;  /* char *: what it would have said as progress, or NULL */
    gint64 start, end; /* monotonic */
} Side;

/* The Side the calling thread runs, or NULL (the main thread, libvirt's threads). */
static GPrivate side_current;

static gpointer side_thread(gpointer data)
{
    Side *side = data;

    g_private_set(&side_current, side);
    side->ok = side->fn(side->m, &side->detail, &side->error);
    side->end = g_get_monotonic_time();
    return NULL;
}

static void side_start(Side *side, Migration *m, SideFunc fn, const char *name)
{
    *side = (Side){.m = m, .fn = fn, .start = g_get_monotonic_time()};
    side->thread = g_thread_new(name, side_thread, side);
}

static void progress(Migration *m, OrchPhase phase, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

/* Waits for @side (NULL-safe, once) and says what it noted, as progress of @phase. */
static void side_join(Side *side, OrchPhase phase)
{
    if (!side || !side->thread)
        return;
    g_thread_join(side->thread);
    side->thread = NULL;
    for (guint i = 0; side->notes && i < side->notes->len; i++)
        progress(side->m, phase, "%s", (char *)g_ptr_array_index(side->notes, i));
    g_clear_pointer(&side->notes, g_ptr_array_unref);
}

static void side_clear(Side *side)
{
    g_free(side->detail);
    g_clear_error(&side->error);
    g_clear_pointer(&side->notes, g_ptr_array_unref);
}

static void side_note(Side *side, const char *msg)
{
    if (!side->notes)
        side->notes = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(side->notes, g_strdup(msg));
}

static gboolean note(Migration *m, const char *event, const char *alias, const char *xml,
                     GError **error);

static const char *agent_channel(Migration *m)
{
    return m->opts->agent_channel ? m->opts->agent_channel : ORCH_AGENT_CHANNEL_DEFAULT;
}

static void progress(Migration *m, OrchPhase phase, const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (g_private_get(&side_current)) { /* said when joined */
        side_note(g_private_get(&side_current), msg);
        return;
    }
    if (m->opts->progress)
        m->opts->progress(phase, msg, m->opts->progress_opaque);
    else
        g_debug("%s: %s", orch_phase_to_string(phase), msg);
}

static void phase_begin(Migration *m, OrchPhase phase)
{
    m->phase_start = g_get_monotonic_time();
    progress(m, phase, "started");
}

static void phase_end(Migration *m, OrchPhase phase, OrchStatus status, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);
static void phase_end(Migration *m, OrchPhase phase, OrchStatus status, const char *fmt, ...)
{
    OrchPhaseRecord *rec = &m->report->phases[phase];
    va_list ap;

    rec->status = status;
    rec->duration_us = status == ORCH_STATUS_SKIPPED ? 0 : g_get_monotonic_time() - m->phase_start;
    g_free(rec->detail);
    if (fmt) {
        va_start(ap, fmt);
        rec->detail = g_strdup_vprintf(fmt, ap);
        va_end(ap);
    } else {
        rec->detail = NULL;
    }
    progress(m, phase, "%s%s%s", orch_status_to_string(status), rec->detail ? ": " : "",
             rec->detail ? rec->detail : "");
}

static void phase_fail(Migration *m, OrchPhase phase, const GError *error)
{
    phase_end(m, phase, ORCH_STATUS_FAILED, "%s", error->message);
    m->report->ok = FALSE;
    m->report->failed_phase = phase;
    g_free(m->report->error);
    m->report->error = g_strdup(error->message);
}

static void phase_skip(Migration *m, OrchPhase phase, const char *why)
{
    phase_end(m, phase, ORCH_STATUS_SKIPPED, "%s", why);
}

/* Records one undo step. */
static void rollback_record(Migration *m, const char *action, gint64 start, const GError *error,
                            const char *detail)
{
    OrchRollbackRecord *rec = g_new0(OrchRollbackRecord, 1);

    rec->action = g_strdup(action);
    rec->ok = error == NULL;
    rec->duration_us = g_get_monotonic_time() - start;
    rec->detail = g_strdup(error ? error->message : detail);
    g_ptr_array_add(m->report->rollback, rec);
    if (!note(m, error ? "undo-failed" : "undone", action, NULL, NULL))
        g_debug("Cannot journal undo step '%s'", action);
    progress(m, m->report->failed_phase, "rollback %s: %s%s%s", action,
             error ? "failed" : "ok", rec->detail ? ": " : "", rec->detail ? rec->detail : "");
}

static XmlVf *vf_at(Migration *m, guint i)
{
    return g_ptr_array_index(m->vfs, i);
}

static const char *vf_name(XmlVf *vf)
{
    return vf->host_pci ? vf->host_pci : vf->alias;
}

/* ---- journal ----------------------------------------------------------------------------- */

/* Records durably that @event is about to happen (or happened), before acting on it. */
static gboolean note(Migration *m, const char *event, const char *alias, const char *xml,
                     GError **error)
{
    g_autoptr(GError) local = NULL;

    if (!m->journal)
        return TRUE;
    if (!orch_journal_step(m->journal, m->id, event, alias, xml, &local)) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                   "Not going on without a journal: ");
        return FALSE;
    }
    return TRUE;
}

/* The first entry: everything recovery needs to finish or undo this migration. When the
 * prepare follows (a domain with a VF, an agent), its line is synced before the prepare is
 * asked, and that sync makes this one durable too: one fdatasync, not two, before anything
 * acts (docs/reliability.md, "Which lines are synced"). */
static gboolean note_begin(Migration *m, GError **error)
{
    gboolean prepare_next = m->vfs->len > 0 && !m->opts->no_agent;
    g_autoptr(OrchJournalRecord) rec = g_new0(OrchJournalRecord, 1);

    rec->migration = g_strdup(m->id);
    rec->domain = g_strdup(m->opts->domain);
    rec->source = g_strdup(m->src->uri);
    rec->destination = g_strdup(m->dst->uri);
    rec->persistent = m->persistent;
    rec->agent = !m->opts->no_agent;
    rec->agent_channel = g_strdup(agent_channel(m));
    rec->hotmigd = m->vfd ? g_strdup(m->vfd->url) : NULL;
    rec->vfs = g_ptr_array_new_with_free_func((GDestroyNotify)orch_journal_vf_free);
    for (guint i = 0; i < m->vfs->len; i++) {
        XmlVf *vf = vf_at(m, i);
        OrchJournalVf *jvf = g_new0(OrchJournalVf, 1);

        jvf->alias = g_strdup(vf->alias);
        jvf->kind = g_strdup(xml_vf_kind_to_string(vf->kind));
        jvf->host_pci = g_strdup(vf->host_pci);
        jvf->source_xml = g_strdup(g_ptr_array_index(m->source_xml, i));
        if (m->leases && i < m->leases->len) {
            HotplugLease *lease = g_ptr_array_index(m->leases, i);

            jvf->lease_vf = g_strdup(lease->vf);
            jvf->lease_id = g_strdup(lease->id);
        }
        jvf->destination_xml = g_strdup(g_ptr_array_index(m->dest_xml, i));
        g_ptr_array_add(rec->vfs, jvf);
    }
    if (!orch_journal_begin(m->journal, rec, !prepare_next, error)) {
        g_prefix_error(error, "Not going on without a journal: ");
        return FALSE;
    }
    return TRUE;
}

/* ---- agent ------------------------------------------------------------------------------- */

/* Resumes the agent on @virt (where the domain runs now); fills *ret_detail and, when not
 * NULL, *ret_standby (what the standby path did). */
static gboolean agent_resume(Migration *m, OrchVirt *virt, char **ret_detail,
                             OrchStandbyFigures *ret_standby, GError **error)
{
    if (!orch_agent_resume(virt, m->opts->domain, agent_channel(m), m->opts->agent_timeout_ms,
                           m->opts->resume_timeout_ms, ret_detail, ret_standby, error))
        return FALSE;
    m->agent_prepared = FALSE;
    return TRUE;
}

/* ---- phases ------------------------------------------------------------------------------ */

/* The destination's part of the connect phase, side work beside the source's: its libvirt,
 * and the domain must not run there. */
static gboolean connect_dst(Migration *m, char **ret_detail, GError **error)
{
    OrchVirtDomainState state;

    m->dst = orch_connector_open_virt(m->opts, m->opts->dest_uri, "destination", error);
    if (!m->dst || !orch_virt_domain_state(m->dst, m->opts->domain, &state, error))
        return FALSE;
    if (state == ORCH_VIRT_DOMAIN_RUNNING) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "Domain '%s' already runs on destination host '%s'", m->opts->domain,
                    m->dst->uri);
        return FALSE;
    }
    m->dest_defined = state == ORCH_VIRT_DOMAIN_INACTIVE;
    return TRUE;
}

/* The source's part: its libvirt, the domain running there, whether it is defined. */
static gboolean connect_src(Migration *m, GError **error)
{
    OrchVirtDomainState state;

    m->src = orch_connector_open_virt(m->opts, m->opts->source_uri, "source", error);
    if (!m->src || !orch_virt_domain_state(m->src, m->opts->domain, &state, error))
        return FALSE;
    if (state != ORCH_VIRT_DOMAIN_RUNNING) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_NO_DOMAIN,
                    "Domain '%s' is not %s on source host '%s'", m->opts->domain,
                    state == ORCH_VIRT_DOMAIN_MISSING ? "defined" : "running", m->src->uri);
        return FALSE;
    }
    return orch_virt_domain_is_persistent(m->src, m->opts->domain, &m->persistent, error);
}

/* The journal (its lock: one migration per domain, held until the end; its file made durable
 * in its directory) and both hosts, at once: the destination's connection is side work. The
 * journal's failure is said first, then the source's, as when they were made in turn. */
static gboolean do_connect(Migration *m, GError **error)
{
    const char *state_dir = m->opts->state_dir ? m->opts->state_dir : ORCH_STATE_DIR_DEFAULT;
    Side dst = {0};
    gboolean ok;

    side_start(&dst, m, connect_dst, "hm-connect");
    m->journal = orch_journal_open(state_dir, m->opts->domain, TRUE, error);
    ok = m->journal && connect_src(m, error);
    side_join(&dst, ORCH_PHASE_CONNECT);
    if (ok && !dst.ok) {
        g_propagate_error(error, g_steal_pointer(&dst.error));
        ok = FALSE;
    }
    side_clear(&dst);
    return ok;
}

static gboolean do_inspect(Migration *m, char **ret_detail, GError **error)
{
    g_autofree char *xml = orch_virt_domain_get_xml(m->src, m->opts->domain, error);
    g_autoptr(XmlDomain) dom = NULL;
    g_autoptr(GString) detail = g_string_new(NULL);

    if (!xml)
        return FALSE;
    dom = xml_domain_parse(xml, error);
    if (!dom)
        return FALSE;
    /* Nova's database would go on placing the instance on this host (docs/hardware.md). */
    if (xml_domain_is_nova(dom) && !m->opts->force) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "Domain '%s' is an OpenStack Nova instance (its metadata holds nova:instance): moved behind Nova's back, it stays on this host in Nova's database; refused (migrate it with Nova, or --force)",
                    m->opts->domain);
        return FALSE;
    }
    m->vfs = xml_domain_find_vfs(dom, m->opts->alias_prefix, error);
    if (!m->vfs)
        return FALSE;
    for (guint i = 0; i < m->vfs->len; i++) {
        XmlVf *vf = vf_at(m, i);

        g_string_append_printf(detail, "%s%s (%s%s%s)", i ? ", " : "", vf->alias,
                               xml_vf_kind_to_string(vf->kind), vf->host_pci ? " " : "",
                               vf->host_pci ? vf->host_pci : "");
    }
    m->report->vfs_total = m->vfs->len;
    m->report->vfs_attached = m->vfs->len;
    if (xml_domain_is_nova(dom))
        g_string_append(detail, "; --force: moving a Nova instance behind Nova's back");
    *ret_detail = m->vfs->len ? g_strdup_printf("%u VF(s): %s", m->vfs->len, detail->str)
                              : g_strdup_printf("no VF: migrating without unplug and plug%s",
                                                detail->str);
    return TRUE;
}

/* HotplugVf for every PCI VF node device of @virt (owned array). */
static GPtrArray *host_vfs(OrchVirt *virt, GError **error)
{
    g_autoptr(GPtrArray) xmls = orch_virt_nodedev_list_pci_xml(virt, error);
    g_autoptr(GPtrArray) vfs = g_ptr_array_new_with_free_func((GDestroyNotify)hotplug_vf_free);

    if (!xmls)
        return NULL;
    for (guint i = 0; i < xmls->len; i++) {
        g_autoptr(GError) local = NULL;
        HotplugVf *vf = hotplug_vf_from_nodedev_xml(g_ptr_array_index(xmls, i), &local);

        if (vf)
            g_ptr_array_add(vfs, vf);
        else if (local)
            g_debug("Ignoring a node device of %s host: %s", virt->label, local->message);
    }
    return g_steal_pointer(&vfs);
}

/* Who holds the destination's leases, and why: for the people reading hotmigd's pool. */
static void lease_request_init(Migration *m, OrchHotmigdLeaseRequest *req, char **holder,
                               char **reason)
{
    *holder = g_strdup_printf("migrate-vm pid %d on %s", (int)getpid(), g_get_host_name());
    *reason = g_strdup_printf("migration %s of '%s' from %s", m->id, m->opts->domain,
                              m->src->uri);
    *req =
        (OrchHotmigdLeaseRequest){.holder = *holder, .reason = *reason, .domain = m->opts->domain};
}

/* Leases, through the destination's hotmigd, the VF that VF @i of the domain gets there: the
 * one named by --target-vf, the stand-in's own network device, or a free one of the source
 * VF's model. */
static HotplugLease *lease_for(Migration *m, guint i, GError **error)
{
    XmlVf *vf = vf_at(m, i);
    HotplugVf *like = g_ptr_array_index(m->like, i);
    g_autofree char *holder = NULL;
    g_autofree char *reason = NULL;
    OrchHotmigdLeaseRequest req;
    g_autoptr(GError) local = NULL;
    HotplugLease *lease;

    lease_request_init(m, &req, &holder, &reason);
    if (vf->host_pci && m->opts->target_vf) {
        req.vf = m->opts->target_vf;
    } else if (vf->host_pci) {
        req.vendor_id = like->vendor_id;
        req.device_id = like->product_id;
    } else if (vf->netdev) {
        req.vf = vf->netdev;
    } else {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "Stand-in '%s' of '%s' names no network device (<target dev>): nothing to "
                    "lease on the destination",
                    vf->alias, m->opts->domain);
        return NULL;
    }
    lease = orch_hotmigd_client_lease(m->vfd, &req, &local);
    if (!lease)
        g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                   "Leasing a VF for '%s' of '%s' on the destination: ", vf->alias,
                                   m->opts->domain);
    return lease;
}

/* The target-vf phase's part on the main thread: the options, the destination's hotmigd, the
 * source VFs' models (libvirt). target_vf_lease() then leases, as side work. */
static gboolean target_vf_check(Migration *m, GError **error)
{
    guint hostdevs = 0;

    for (guint i = 0; i < m->vfs->len; i++)
        hostdevs += vf_at(m, i)->host_pci != NULL;
    if (m->opts->target_vf && hostdevs != 1) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "--target-vf '%s' needs a domain with exactly one PCI VF, '%s' has %u",
                    m->opts->target_vf, m->opts->domain, hostdevs);
        return FALSE;
    }
    m->vfd = orch_options_open_hotmigd(m->opts, m->opts->hotmigd_url, "destination", error);
    if (!m->vfd)
        return FALSE;
    if (hostdevs && !m->opts->target_vf && !(m->src_vfs = host_vfs(m->src, error)))
        return FALSE;
    m->like = g_ptr_array_new();
    m->leases = g_ptr_array_new_with_free_func((GDestroyNotify)hotplug_lease_free);
    m->dest_xml = g_ptr_array_new_with_free_func(g_free);
    m->source_xml = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < m->vfs->len; i++) {
        XmlVf *vf = vf_at(m, i);
        HotplugVf *like = NULL;

        for (guint j = 0; m->src_vfs && vf->host_pci && j < m->src_vfs->len && !like; j++) {
            HotplugVf *cand = g_ptr_array_index(m->src_vfs, j);

            if (g_str_equal(cand->pci_address, vf->host_pci))
                like = cand;
        }
        if (vf->host_pci && !m->opts->target_vf && !like) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                        "'%s' of '%s' is not an SR-IOV VF on source host '%s'", vf->host_pci,
                        m->opts->domain, m->src->uri);
            return FALSE;
        }
        g_ptr_array_add(m->like, like);
    }
    return TRUE;
}

/* Side work (hotmigd only): leases each VF's destination VF and writes the device XML to plug
 * there and, for an undo, back on the source. */
static gboolean target_vf_lease(Migration *m, char **ret_detail, GError **error)
{
    g_autoptr(GString) detail = g_string_new(NULL);

    m->leases_asked = g_get_monotonic_time();
    for (guint i = 0; i < m->vfs->len; i++) {
        XmlVf *vf = vf_at(m, i);
        HotplugLease *lease;
        char *dest;
        char *back;

        lease = lease_for(m, i, error);
        if (!lease)
            return FALSE;
        g_ptr_array_add(m->leases, lease);
        dest = xml_vf_format_attach(vf, vf->host_pci ? lease->vf : NULL, error);
        if (!dest)
            return FALSE;
        g_ptr_array_add(m->dest_xml, dest);
        back = xml_vf_format_attach(vf, vf->host_pci, error);
        if (!back)
            return FALSE;
        g_ptr_array_add(m->source_xml, back);
        g_string_append_printf(detail, "%s%s -> %s (leased from %s)", i ? ", " : "", vf->alias,
                               lease->vf, m->vfd->url);
    }
    *ret_detail = g_string_free(g_steal_pointer(&detail), FALSE);
    return TRUE;
}

/* ---- keeping the leases -------------------------------------------------------------------
 * A lease lives its TTL (hotmigd's lease-ttl, 300 s by default) unless renewed; a migration may
 * copy memory for longer, and a lease that expired under it lets another migration take the VF
 * and give it other GUIDs before the plug (issue 15). A thread of its own, with its own client
 * of the destination's hotmigd (a client is not shared between threads), renews every lease a
 * third of its TTL, until the leases settle; the plug checks each lease once more. */
typedef struct LeaseKeeper {
    GThread *thread;
    GMutex lock;
    GCond cond;
    gboolean stop;
    const OrchOptions *opts;
    const char *url;  /* the destination's hotmigd (borrowed from opts) */
    OrchHotmigdClient *vfd; /* the keeper's own client, made and used by its thread */
    char *open_error; /* the client could not be made: no renewals */
    GPtrArray *vfs;   /* lease VF ids (owned) */
    GPtrArray *ids; /* lease ids (owned) */
    guint ttl_s;
    guint renewals;
    char *lost;        /* the first renewal that failed */
    gint64 held_until; /* monotonic: every lease is surely held until then (asked + TTL) */
} LeaseKeeper;

static gpointer keeper_thread(gpointer data)
{
    LeaseKeeper *k = data;
    gint64 interval = MAX((gint64)k->ttl_s * G_TIME_SPAN_SECOND / 3, 500 * G_TIME_SPAN_MILLISECOND);
    g_autoptr(GError) open_error = NULL;

    /* Its client is made here, off the migration's path (certificates read, TLS set up). */
    k->vfd = orch_options_open_hotmigd(k->opts, k->url, "destination", &open_error);
    if (!k->vfd) {
        g_mutex_lock(&k->lock);
        k->open_error = g_strdup(open_error->message);
        g_mutex_unlock(&k->lock);
        return NULL;
    }
    g_mutex_lock(&k->lock);
    while (!k->stop) {
        gint64 until = g_get_monotonic_time() + interval;

        while (!k->stop && g_cond_wait_until(&k->cond, &k->lock, until))
            ;
        gint64 asked;
        gboolean all = TRUE;

        if (k->stop)
            break;
        g_mutex_unlock(&k->lock);
        asked = g_get_monotonic_time();
        for (guint i = 0; i < k->vfs->len; i++) {
            g_autoptr(GError) local = NULL;
            const char *vf = g_ptr_array_index(k->vfs, i);

            if (orch_hotmigd_client_renew(k->vfd, vf, g_ptr_array_index(k->ids, i), k->ttl_s,
                                          &local)) {
                g_atomic_int_inc(&k->renewals);
                continue;
            }
            all = FALSE;
            g_debug("Renewing the lease of VF %s: %s", vf, local->message);
            g_mutex_lock(&k->lock);
            if (!k->lost)
                k->lost = g_strdup_printf("VF %s: %s", vf, local->message);
            g_mutex_unlock(&k->lock);
        }
        g_mutex_lock(&k->lock);
        if (all)
            k->held_until = asked + (gint64)k->ttl_s * G_TIME_SPAN_SECOND;
    }
    g_mutex_unlock(&k->lock);
    return NULL;
}

/* Starts renewing the destination's leases (after the target-vf phase). Nothing to do when no
 * lease expires. */
static void keeper_start(Migration *m)
{
    LeaseKeeper *k;
    HotplugLease *first = m->leases && m->leases->len ? g_ptr_array_index(m->leases, 0) : NULL;

    if (!first || first->expires <= first->created)
        return;
    k = g_new0(LeaseKeeper, 1);
    k->opts = m->opts;
    k->url = m->opts->hotmigd_url;
    g_mutex_init(&k->lock);
    g_cond_init(&k->cond);
    k->ttl_s = (guint)MIN(first->expires - first->created, G_MAXUINT);
    /* hotmigd ends a lease only at its expiry or on a release naming its id, which only this
     * migration holds (hotplug/lease.c): each is held until asked + TTL. */
    k->held_until = m->leases_asked + (gint64)k->ttl_s * G_TIME_SPAN_SECOND;
    k->vfs = g_ptr_array_new_with_free_func(g_free);
    k->ids = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < m->leases->len; i++) {
        HotplugLease *lease = g_ptr_array_index(m->leases, i);

        g_ptr_array_add(k->vfs, g_strdup(lease->vf));
        g_ptr_array_add(k->ids, g_strdup(lease->id));
    }
    k->thread = g_thread_new("hm-lease-keep", keeper_thread, k);
    m->keeper = k;
}

/* Stops the renewals (the leases settle, or the migration ends). */
static void keeper_stop(Migration *m)
{
    LeaseKeeper *k = m->keeper;

    if (!k)
        return;
    g_mutex_lock(&k->lock);
    k->stop = TRUE;
    g_cond_signal(&k->cond);
    g_mutex_unlock(&k->lock);
    g_thread_join(k->thread);
    if (k->open_error)
        progress(m, ORCH_PHASE_PLUG, "the leases were not renewed: %s", k->open_error);
    if (k->renewals)
        g_debug("The destination's leases were renewed %u time(s)", k->renewals);
    orch_hotmigd_client_free(k->vfd);
    g_ptr_array_unref(k->vfs);
    g_ptr_array_unref(k->ids);
    g_free(k->lost);
    g_free(k->open_error);
    g_mutex_clear(&k->lock);
    g_cond_clear(&k->cond);
    g_free(k);
    m->keeper = NULL;
}

/* A release no request of which reached the destination's hotmigd (ORCH_ERROR_UNREACHABLE:
 * the connection itself failed, as while that hotmigd restarts) is asked again for this long:
 * a lease that no release reaches stays on the destination until its TTL, its VF unavailable
 * (the soak, docs/reliability.md). Only after the undo: the domain is whole by then. */
#define LEASE_RELEASE_RETRY_MS 15000
#define LEASE_RELEASE_STEP_MS 500

static gboolean lease_release(Migration *m, HotplugLease *lease, GError **error)
{
    gint64 until = g_get_monotonic_time() + LEASE_RELEASE_RETRY_MS * G_TIME_SPAN_MILLISECOND;
    GError *local = NULL;

    for (guint n = 1;; n++) {
        if (orch_hotmigd_client_release(m->vfd, lease->vf, lease->id, &local))
            return TRUE;
        if (!g_error_matches(local, ORCH_ERROR, ORCH_ERROR_UNREACHABLE) ||
            g_get_monotonic_time() >= until) {
            g_propagate_error(error, local);
            return FALSE;
        }
        if (n == 1)
            progress(m, ORCH_PHASE_TARGET_VF,
                     "cannot release the lease of VF %s yet (%s): asking again for up to %d s",
                     lease->vf, local->message, LEASE_RELEASE_RETRY_MS / 1000);
        g_clear_error(&local);
        g_usleep(LEASE_RELEASE_STEP_MS * G_TIME_SPAN_MILLISECOND);
    }
}

/* Ends the destination's leases: confirmed for the VFs the domain holds there, released for
 * the others (a failed or undone migration). Never fails the migration: an unconfirmed lease
 * expires by itself, and hotmigd sees a plugged VF as in use. Records releases as undo steps
 * when @undo. */
static void leases_settle(Migration *m, gboolean undo)
{
    keeper_stop(m);
    for (guint i = 0; m->vfd && m->leases && i < m->leases->len; i++) {
        HotplugLease *lease = g_ptr_array_index(m->leases, i);
        g_autoptr(GError) err = NULL;
        gint64 start = g_get_monotonic_time();

        if (lease->state == HOTPLUG_LEASE_ASSIGNED)
            continue;
        if (m->on_destination && i < m->plugged) {
            g_autoptr(HotplugLease) done =
                orch_hotmigd_client_confirm(m->vfd, lease->vf, lease->id, &err);

            if (done)
                lease->state = HOTPLUG_LEASE_ASSIGNED;
            else
                progress(m, ORCH_PHASE_PLUG, "cannot confirm the lease of VF %s: %s", lease->vf,
                         err->message);
            continue;
        }
        lease_release(m, lease, &err);
        if (undo)
            rollback_record(m, "release-lease", start, err, lease->vf);
        else if (err)
            g_debug("Cannot release the lease of VF %s: %s", lease->vf, err->message);
    }
}

/* The interface identifier (low 64 bits) of GID @text, 0 when it does not parse. */
static guint64 gid_interface_id(const char *text)
{
    g_autoptr(GInetAddress) addr = text ? g_inet_address_new_from_string(text) : NULL;
    const guint8 *b;
    guint64 id = 0;

    if (!addr || g_inet_address_get_family(addr) != G_SOCKET_FAMILY_IPV6)
        return 0;
    b = g_inet_address_to_bytes(addr);
    for (guint i = 8; i < 16; i++)
        id = id << 8 | b[i];
    return id;
}

/* The guest's view of its identity, through the agent's inventory (m->inv, read when the agent
 * was opened): the node and port GUIDs of its one RDMA device. A cross-check only (issue 15): the guest may claim any GUID, so what is
 * carried comes from the source host (identity_read()). FALSE with *ret_why (owned) when the
 * guest says nothing usable. */
static gboolean identity_guest_view(Migration *m, guint64 *ret_node, guint64 *ret_port,
                                    char **ret_why)
{
    OrchAgentInventory *inv = m->inv;
    g_autoptr(GError) local = NULL;
    OrchAgentDevice *dev;
    OrchAgentPort *port;
    guint64 node_guid = 0;
    guint64 port_guid;

    if (!inv) {
        *ret_why = g_strdup_printf("no inventory from the agent (%s)", m->inv_error->message);
        m->procs_error = g_error_copy(m->inv_error);
        return FALSE;
    }
    /* The processes of the guest's jobs, for jobs_check(). */
    m->procs = g_steal_pointer(&inv->processes);
    m->procs_error = g_steal_pointer(&inv->processes_error);
    m->procs_malformed = m->procs == NULL;
    if (inv->devices->len != 1) {
        *ret_why = g_strdup_printf("%u RDMA device(s) in the guest", inv->devices->len);
        return FALSE;
    }
    dev = g_ptr_array_index(inv->devices, 0);
    if (!dev->node_guid || !hotplug_guid_parse(dev->node_guid, &node_guid, &local)) {
        *ret_why = g_strdup_printf("the guest's RDMA device reports no usable node GUID%s%s",
                                   local ? ": " : "", local ? local->message : "");
        return FALSE;
    }
    /* An InfiniBand port's GUID is the interface identifier of its first GID; a RoCE port has
     * none of its own. */
    port_guid = node_guid;
    port = dev->ports->len ? g_ptr_array_index(dev->ports, 0) : NULL;
    if (port && g_strcmp0(port->link_layer, "InfiniBand") == 0 && port->gids[0]) {
        guint64 id = gid_interface_id(port->gids[0]);

        if (id)
            port_guid = id;
    }
    *ret_node = node_guid;
    *ret_port = port_guid;
    return TRUE;
}

/* The InfiniBand identity the VF leased on the destination must carry (docs/ib-identity.md,
 * docs/security.md): what the source host knows its VF carries for this domain (its hotmigd's
 * record of the GUIDs it gave it, or what its kernel reports), never what the guest says. The
 * guest's view (@agent, may be NULL) is compared and any difference reported. Only a domain
 * with one VF is matched; otherwise, or when the source host does not know, identity_note says
 * why nothing is carried over. */
/* The source VF's id whose identity the source host is asked for: the domain's one VF (with
 * a source hotmigd), or NULL. */
static const char *identity_source_vf(Migration *m)
{
    XmlVf *vf;

    if (!m->vfs || m->vfs->len != 1 || !m->opts->source_hotmigd_url)
        return NULL;
    vf = vf_at(m, 0);
    return vf->host_pci ? vf->host_pci : vf->netdev;
}

/* Asks the source's hotmigd for the GUIDs of the domain's VF (identity_source_vf()): fills
 * m->node_guid/port_guid and identity_source, or identity_error. Needs no agent: side work
 * beside the agent's inventory (target-vf phase). */
static gboolean identity_fetch(Migration *m, char **ret_detail, GError **error)
{
    g_autoptr(OrchHotmigdClient) src = NULL;
    g_autoptr(GError) local = NULL;
    const char *id = identity_source_vf(m);
    guint64 node = 0, port = 0;

    m->identity_fetched = TRUE;
    if (!id)
        return TRUE;
    src = orch_options_open_hotmigd(m->opts, m->opts->source_hotmigd_url, "source", &local);
    if (!src || !orch_hotmigd_client_identity(src, id, m->opts->domain, &node, &port,
                                              &m->identity_source, &local)) {
        m->identity_error = g_strdup(local->message);
        return TRUE;
    }
    m->node_guid = node;
    m->port_guid = port;
    return TRUE;
}

static void identity_read(Migration *m)
{
    g_autofree char *guest_why = NULL;
    g_autofree char *guest_part = NULL;
    guint64 guest_node = 0, guest_port = 0;
    gboolean guest_ok;
    const char *id;

    /* First: the inventory also carries the processes jobs_check() needs, whatever the VFs. */
    guest_ok = m->agent && identity_guest_view(m, &guest_node, &guest_port, &guest_why);
    if (m->identity_side)
        side_join(m->identity_side, ORCH_PHASE_TARGET_VF);
    else if (!m->identity_fetched)
        identity_fetch(m, NULL, NULL);
    if (!m->vfs || m->vfs->len != 1) {
        m->identity_note = g_strdup_printf("%u VF(s): cannot tell which identity is which",
                                           m->vfs ? m->vfs->len : 0);
        return;
    }
    id = identity_source_vf(m);
    guest_part = guest_ok    ? g_strdup("; the guest's own claim is not taken")
                 : guest_why ? g_strdup_printf("; no guest view: %s", guest_why)
                             : g_strdup("");
    if (!id) {
        m->identity_note =
            g_strdup_printf("no source hotmigd knows the GUIDs of the source VF%s", guest_part);
        return;
    }
    if (m->identity_error) {
        m->identity_note = g_strdup_printf("the source host does not know the GUIDs of VF %s (%s)%s",
                                           id, m->identity_error, guest_part);
        return;
    }
    if (guest_ok && (guest_node != m->node_guid || guest_port != m->port_guid)) {
        g_autofree char *gn = hotplug_guid_format(guest_node);
        g_autofree char *gp = hotplug_guid_format(guest_port);

        m->identity_note =
            g_strdup_printf("%s; the guest claims node GUID %s, port GUID %s instead: not taken",
                            m->identity_source, gn, gp);
    } else if (guest_ok) {
        m->identity_note = g_strdup_printf("%s; the guest agrees", m->identity_source);
    } else {
        m->identity_note = g_strdup_printf("%s; no guest view: %s", m->identity_source,
                                           guest_why ? guest_why : "no agent");
    }
}

/* Gives the leased destination VF the identity the source host knows (identity_read()) before
 * it is plugged. */
static gboolean identity_apply(Migration *m, char **ret_note, GError **error)
{
    HotplugLease *lease;
    g_autofree char *node = NULL;
    g_autofree char *port = NULL;
    g_autofree char *note = NULL;

    if (!m->node_guid) {
        *ret_note = g_strdup_printf("identity not carried over: %s",
                                    m->identity_note ? m->identity_note : "unknown");
        return TRUE;
    }
    lease = g_ptr_array_index(m->leases, 0);
    node = hotplug_guid_format(m->node_guid);
    port = hotplug_guid_format(m->port_guid);
    if (!orch_hotmigd_client_ib_identity(m->vfd, lease->vf, m->node_guid, m->port_guid, &note,
                                         error)) {
        g_prefix_error(error, "Giving destination VF %s node GUID %s and port GUID %s: ",
                       lease->vf, node, port);
        return FALSE;
    }
    *ret_note = note ? g_strdup_printf("identity %s/%s for VF %s: %s", node, port, lease->vf, note)
                     : g_strdup_printf("VF %s given node GUID %s, port GUID %s (%s)", lease->vf,
                                       node, port, m->identity_note);
    return TRUE;
}

/* The domain runs on the destination now: the source's hotmigd ends the leases its VFs held
 * there (they came with an earlier migration), so they can be leased again. Not fatal: a
 * source without hotmigd, or VFs it never leased, change nothing. */
static void source_leases_end(Migration *m)
{
    g_autoptr(OrchHotmigdClient) vfd = NULL;
    g_autoptr(GError) local = NULL;

    if (!m->opts->source_hotmigd_url || !m->vfs || !m->vfs->len)
        return;
    vfd = orch_options_open_hotmigd(m->opts, m->opts->source_hotmigd_url, "source", &local);
    for (guint i = 0; vfd && i < m->vfs->len; i++) {
        XmlVf *vf = vf_at(m, i);
        const char *id = vf->host_pci ? vf->host_pci : vf->netdev;

        g_clear_error(&local);
        if (id && !orch_hotmigd_client_left(vfd, id, m->opts->domain, &local))
            progress(m, ORCH_PHASE_RESUME, "the source's lease of VF %s stays: %s", id,
                     local->message);
    }
    if (!vfd)
        progress(m, ORCH_PHASE_RESUME, "the source's leases stay: %s", local->message);
}

/* Opens the source's agent with its inventory (the guest's InfiniBand identity, its processes)
 * asked in the handshake's write: changes nothing, so it runs as side work while the
 * destination's hotmigd is reached and the VF leased, before the journal begins. A failure is
 * kept for the prepare phase to report. */
static gboolean agent_open_src(Migration *m, char **ret_detail, GError **error)
{
    m->agent = orch_agent_open_inventory(m->src, m->opts->domain, agent_channel(m),
                                         m->opts->agent_timeout_ms, &m->inv, &m->inv_error,
                                         &m->agent_error);
    return TRUE;
}

/* Starts agent_open_src() as side work (run_target_vf(): a domain with a VF). */
static void agent_early_start(Migration *m)
{
    m->agent_side = g_new0(Side, 1);
    side_start(m->agent_side, m, agent_open_src, "hm-agent-src");
}

/* Waits for agent_early_start()'s side work; FALSE when none was started. */
static gboolean agent_early_join(Migration *m)
{
    Side *side = g_steal_pointer(&m->agent_side);

    if (!side)
        return FALSE;
    side_join(side, ORCH_PHASE_TARGET_VF);
    side_clear(side);
    g_free(side);
    return TRUE;
}

/* The source's agent, opened and its inventory read (by agent_early_start()'s side work, or
 * here when none was started); then the identity (identity_read()). */
static void agent_open_early(Migration *m)
{
    if (!agent_early_join(m))
        agent_open_src(m, NULL, NULL);
    identity_read(m);
}

static gboolean do_prepare(Migration *m, char **ret_detail, GError **error)
{
    g_autoptr(OrchAgent) agent = NULL;
    g_autoptr(JsonObject) args = orch_agent_timeout_args(m->opts->prepare_timeout_ms);
    g_autoptr(JsonObject) ret = NULL;
    g_autofree char *quiesced = NULL;
    g_autofree char *failed = NULL;
    g_autofree char *standby = NULL;
    OrchStandbyFigures figures = {0};
    guint n_quiesced;
    guint n_failed;

    if (!note(m, "prepare", NULL, NULL, error))
        return FALSE;
    if (!m->agent && !m->agent_error)
        agent_open_early(m);
    agent = g_steal_pointer(&m->agent); /* closed before anything moves */
    if (!agent) {
        if (m->agent_error)
            g_propagate_error(error, g_steal_pointer(&m->agent_error));
        else
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT, "Cannot reach the agent");
        if (error && *error) {
            g_autofree char *msg = (*error)->message;

            (*error)->message = g_strconcat(msg, "; use --no-agent to migrate without quiescing",
                                            NULL);
        }
        return FALSE;
    }
    /* Once asked, the agent may have quiesced even if its answer is lost: undo must resume
     * (resume is idempotent). */
    m->agent_prepared = TRUE;
    /* --no-standby: the agent makes no standby device, its processes pause (an agent that
     * reports no standby device in its inventory never makes one, and may not know the
     * argument) */
    if (m->opts->no_standby && m->inv && m->inv->standby_state)
        json_object_set_int_member(args, "standby", 0);
    ret = orch_agent_execute(agent, "prepare", args,
                             m->opts->prepare_timeout_ms + m->opts->agent_timeout_ms, error);
    if (!ret)
        return FALSE;
    quiesced = orch_agent_process_list(ret, "quiesced", &n_quiesced);
    failed = orch_agent_process_list(ret, "failed", &n_failed);
    if (n_failed > 0) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT,
                    "%u process(es) did not quiesce: %s", n_failed, failed);
        return FALSE;
    }
    /* what the switch did: the figures are the guest's word, for the report only */
    standby = orch_agent_standby_report(ret, "quiesced", FALSE, &figures);
    m->report->phases[ORCH_PHASE_PREPARE].standby = figures;
    /* the device the agent made; the figures, when the processes gave them, say what ran
     * there (none of them may have: the peers could not follow) */
    *ret_detail = g_strdup_printf(
        "%u process(es) quiesced%s%s%s%s%s", n_quiesced, n_quiesced ? ": " : "", quiesced,
        !orch_json_get_string(ret, "standby") ? ""
        : figures.used                        ? "; standby device "
                                              : "; their connections run over the standby device ",
        orch_json_get_string(ret, "standby") ? orch_json_get_string(ret, "standby") : "", standby);
    return TRUE;
}

/* Is the device @alias still in the live XML of the domain on @virt? */
static gboolean device_present(Migration *m, OrchVirt *virt, const char *alias,
                               gboolean *ret_present, GError **error)
{
    g_autofree char *xml = orch_virt_domain_get_xml(virt, m->opts->domain, error);
    g_autoptr(XmlDomain) dom = xml ? xml_domain_parse(xml, error) : NULL;
    g_autoptr(GPtrArray) vfs = dom ? xml_domain_find_vfs(dom, m->opts->alias_prefix, error) : NULL;

    if (!vfs)
        return FALSE;
    *ret_present = FALSE;
    for (guint i = 0; i < vfs->len; i++) {
        XmlVf *vf = g_ptr_array_index(vfs, i);
        if (g_str_equal(vf->alias, alias))
            *ret_present = TRUE;
    }
    return TRUE;
}

static gboolean do_unplug(Migration *m, char **ret_detail, GError **error)
{
    g_autoptr(GString) detail = g_string_new(NULL);

    for (guint i = 0; i < m->vfs->len; i++) {
        XmlVf *vf = vf_at(m, i);
        g_autoptr(GError) local = NULL;

        if (!note(m, "unplug", vf->alias, NULL, error))
            return FALSE;
        if (!orch_virt_device_detach(m->src, m->opts->domain, vf->alias, m->persistent,
                                        m->opts->unplug_timeout_ms, &local)) {
            gboolean present = TRUE;

            /* The guest may have let go after all: then it must be plugged back on undo. */
            if (device_present(m, m->src, vf->alias, &present, NULL) && !present)
                m->detached = i + 1;
            g_propagate_prefixed_error(error, g_steal_pointer(&local), "Unplugging VF '%s': ",
                                       vf_name(vf));
            return FALSE;
        }
        m->detached = i + 1;
        g_string_append_printf(detail, "%s%s", i ? ", " : "", vf->alias);
    }
    *ret_detail = g_strdup_printf("released by the guest: %s", detail->str);
    return TRUE;
}

/* ---- the migration call ---------------------------------------------------------------------
 * libvirt's migration call returns once the source's side has ended too: its Confirm stops the
 * source QEMU and libvirt polls until that process is gone, in 200 ms steps (~210 ms in the
 * lab). The domain runs on the destination from the switch-over on (the destination's Finish
 * resumed it), so the call runs on a thread of its own, and the plug, the destination's agent
 * and the resume go on from the switch-over while it ends (docs/architecture.md, "Overlap").
 * A post-copy migration, or an adapter that cannot watch the destination, waits for the call as
 * before. Whatever comes next joins the call first when it would move the domain again (the
 * rollback), and the migration ends only once it returned. */
typedef struct MigrateCall {
    GMutex lock;
    GCond cond;
    gboolean switched; /* the destination resumed the domain */
    gboolean done;     /* the call returned: */
    gboolean ok;
    OrchMigrateStats stats;
    GError *error;
} MigrateCall;

static void migrate_call_clear(gpointer data)
{
    MigrateCall *c = data;

    g_mutex_clear(&c->lock);
    g_cond_clear(&c->cond);
    g_clear_error(&c->error);
}

static void migrate_call_unref(gpointer data)
{
    g_atomic_rc_box_release_full(data, migrate_call_clear);
}

/* From libvirt's event thread: the destination resumed the domain. */
static void migrate_on_switched(gpointer data)
{
    MigrateCall *c = data;

    g_mutex_lock(&c->lock);
    c->switched = TRUE;
    g_cond_broadcast(&c->cond);
    g_mutex_unlock(&c->lock);
}

static gpointer migrate_call_thread(gpointer data)
{
    Migration *m = data;
    MigrateCall *c = m->call;
    OrchMigrateStats stats = {0};
    GError *local = NULL;
    gboolean ok = orch_virt_migrate(m->src, m->opts->domain, m->dst->uri, &m->call_params, &stats,
                                    &local);

    g_mutex_lock(&c->lock);
    c->done = TRUE;
    c->ok = ok;
    c->stats = stats;
    c->error = local;
    g_cond_broadcast(&c->cond);
    g_mutex_unlock(&c->lock);
    return NULL;
}

static void migrate_progress(guint64 processed, guint64 total, gpointer opaque)
{
    Migration *m = opaque;
    gboolean switched;

    g_mutex_lock(&m->call->lock);
    switched = m->call->switched;
    g_mutex_unlock(&m->call->lock);
    if (total && !switched)
        progress(m, ORCH_PHASE_MIGRATE, "%.1f of %.1f MiB (%.0f%%)", processed / 1048576.0,
                 total / 1048576.0, 100.0 * processed / total);
}

/* Runs on the thread that cancelled (the signal thread of migrate-vm). */
static void migration_cancelled(GCancellable *cancellable, gpointer data)
{
    Migration *m = data;
    g_autoptr(GError) local = NULL;

    if (!orch_virt_domain_abort_job(m->src, m->opts->domain, &local))
        g_warning("Cannot abort the migration of '%s': %s", m->opts->domain, local->message);
}

static void now_on_destination(Migration *m)
{
    m->on_destination = TRUE;
    g_free(m->report->final_host);
    m->report->final_host = g_strdup("destination");
}

/* Waits for the migration call do_migrate() started (not joined yet) and says how it went, as
 * do_migrate() did before the call had a thread of its own. */
static gboolean migrate_finish(Migration *m, char **ret_detail, GError **error)
{
    MigrateCall *c = m->call;
    g_autofree char *asked = NULL;
    OrchMigrateStats stats;
    GError *local;
    gboolean ok;

    g_thread_join(g_steal_pointer(&m->call_thread));
    orch_virt_unwatch(m->dst, m->call_watch);
    m->call_watch = 0;
    if (m->call_cancel_id)
        g_cancellable_disconnect(m->opts->cancellable, m->call_cancel_id);
    m->call_cancel_id = 0;
    g_mutex_lock(&c->lock);
    ok = c->ok;
    stats = c->stats;
    local = g_steal_pointer(&c->error);
    g_mutex_unlock(&c->lock);
    if (!ok && g_cancellable_is_cancelled(m->opts->cancellable)) {
        g_clear_error(&local);
        g_set_error(&local, ORCH_ERROR, ORCH_ERROR_CANCELLED,
                    "Cancelled by the user: the migration job was aborted");
    }
    if (!ok) {
        OrchVirtDomainState state;

        /* A failure after the switch-over leaves the domain running on the destination. */
        if (orch_virt_domain_state(m->dst, m->opts->domain, &state, NULL) &&
            state == ORCH_VIRT_DOMAIN_RUNNING) {
            now_on_destination(m);
        }
        g_propagate_error(error, local);
        return FALSE;
    }
    now_on_destination(m);
    if (!note(m, "migrated", NULL, NULL, NULL))
        g_debug("Cannot journal the end of the migration of '%s'", m->opts->domain);
    asked = orch_options_format_migration(m->opts);
    if (stats.have_stats)
        *ret_detail =
            g_strdup_printf("%.1f MiB moved, downtime %" G_GUINT64_FORMAT " ms%s%s; options: %s",
                            stats.data_bytes / 1048576.0, stats.downtime_ms,
                            stats.event[0] ? ", " : "", stats.event, asked);
    else
        *ret_detail = g_strdup_printf("no job statistics reported%s%s; options: %s",
                                      stats.event[0] ? ", " : "", stats.event, asked);
    return TRUE;
}

static gboolean do_migrate(Migration *m, char **ret_detail, GError **error)
{
    OrchMigrateParams params = {
        .migrate_uri = m->opts->migrate_uri,
        .bandwidth_mib = m->opts->bandwidth_mib,
        .persistent = m->opts->persistent,
        .undefine_source = m->opts->undefine_source,
        .parallel = m->opts->parallel,
        .auto_converge = m->opts->auto_converge,
        .postcopy = m->opts->postcopy,
        .postcopy_after_ms = m->opts->postcopy_after_ms,
        .postcopy_after_precopy = m->opts->postcopy_after_precopy,
        .tls = m->opts->tls,
        .timeout_ms = m->opts->migrate_timeout_ms,
        .timeout_action = m->opts->timeout_action,
        .progress = migrate_progress,
        .progress_opaque = m,
    };
    MigrateCall *c;
    gboolean switched;

    if (!note(m, "migrate", NULL, NULL, error))
        return FALSE;
    m->call_params = params;
    c = m->call = g_atomic_rc_box_new0(MigrateCall);
    g_mutex_init(&c->lock);
    g_cond_init(&c->cond);
    if (!m->opts->postcopy) {
        g_autoptr(GError) local = NULL;

        m->call_watch = orch_virt_watch_migrated_in(m->dst, m->opts->domain, migrate_on_switched,
                                                    g_atomic_rc_box_acquire(c),
                                                    migrate_call_unref, &local);
        if (!m->call_watch) {
            migrate_call_unref(c);
            g_debug("Not watching the switch-over of '%s' (the plug waits for the migration "
                    "call): %s",
                    m->opts->domain, local->message);
        }
    }
    if (m->opts->cancellable)
        m->call_cancel_id = g_cancellable_connect(
            m->opts->cancellable, G_CALLBACK(migration_cancelled), m, NULL);
    m->call_thread = g_thread_new("hm-migrate", migrate_call_thread, m);
    g_mutex_lock(&c->lock);
    while (!c->done && !c->switched)
        g_cond_wait(&c->cond, &c->lock);
    switched = c->switched && !c->done;
    g_mutex_unlock(&c->lock);
    if (!switched)
        return migrate_finish(m, ret_detail, error);
    /* It runs on the destination; migrate_join() says how libvirt ended. */
    now_on_destination(m);
    *ret_detail = g_strdup("running on the destination (switch-over); libvirt ends the "
                           "source's side meanwhile");
    return TRUE;
}

/* Ends a migration call that outlived the switch-over (do_migrate()): its figures become the
 * migrate phase's detail. When libvirt failed after the switch-over, what counts is where the
 * domain runs: only on the destination, the move stands (said as progress); on the source too,
 * FALSE with @error (recovery waits until it runs on one host only). TRUE when no call is left. */
static gboolean migrate_join(Migration *m, GError **error)
{
    OrchPhaseRecord *rec = &m->report->phases[ORCH_PHASE_MIGRATE];
    g_autofree char *detail = NULL;
    g_autoptr(GError) local = NULL;
    OrchVirtDomainState state;

    if (!m->call_thread)
        return TRUE;
    if (migrate_finish(m, &detail, &local)) {
        progress(m, ORCH_PHASE_MIGRATE, "libvirt ended the source's side: %s", detail);
        g_free(rec->detail);
        rec->detail = g_steal_pointer(&detail);
        return TRUE;
    }
    if (orch_virt_domain_state(m->src, m->opts->domain, &state, NULL) &&
        state == ORCH_VIRT_DOMAIN_RUNNING) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_ROLLBACK,
                    "The migration failed after the switch-over and '%s' runs on both hosts "
                    "(on the source, paused or not): %s; 'migrate-vm --recover %s' finishes it "
                    "once it runs on one host only",
                    m->opts->domain, local->message, m->opts->domain);
        return FALSE;
    }
    progress(m, ORCH_PHASE_MIGRATE,
             "libvirt failed after the switch-over, but the domain runs on the destination only: %s",
             local->message);
    g_free(rec->detail);
    rec->detail = g_strdup_printf("moved; libvirt then failed on the source's side: %s",
                                  local->message);
    return TRUE;
}

/* Records the alias VF @i got on the destination: a hostdev, plugged under its user alias
 * (xml_vf_user_alias(): "ua-hostdev0" for the source's "hostdev0"), is found by its host PCI
 * address, whatever alias it has. */
static void learn_dest_alias(Migration *m, guint i, const char *device_xml)
{
    g_autofree char *wrapped = g_strconcat("<domain><name>x</name><devices>", device_xml,
                                           "</devices></domain>", NULL);
    g_autoptr(XmlDomain) want_dom = xml_domain_parse(wrapped, NULL);
    g_autoptr(GPtrArray) pcis = want_dom ? xml_domain_list_host_pci(want_dom) : NULL;
    const char *pci = pcis && pcis->len ? g_ptr_array_index(pcis, 0) : NULL;
    g_autofree char *live_xml = NULL;
    g_autoptr(XmlDomain) live_dom = NULL;
    g_autoptr(GPtrArray) live = NULL;

    if (!m->dest_alias)
        m->dest_alias = g_ptr_array_new_full(m->vfs->len, g_free);
    while (m->dest_alias->len < m->vfs->len)
        g_ptr_array_add(m->dest_alias, NULL);
    if (!pci) /* stand-ins keep their user alias */
        return;
    live_xml = orch_virt_domain_get_xml(m->dst, m->opts->domain, NULL);
    live_dom = live_xml ? xml_domain_parse(live_xml, NULL) : NULL;
    live = live_dom ? xml_domain_find_vfs(live_dom, NULL, NULL) : NULL;
    for (guint j = 0; live && j < live->len; j++) {
        XmlVf *vf = g_ptr_array_index(live, j);

        if (vf->host_pci && g_str_equal(vf->host_pci, pci)) {
            g_free(g_ptr_array_index(m->dest_alias, i));
            g_ptr_array_index(m->dest_alias, i) = g_strdup(vf->alias);
        }
    }
}

static const char *dest_alias(Migration *m, guint i)
{
    const char *alias = m->dest_alias && i < m->dest_alias->len
                            ? g_ptr_array_index(m->dest_alias, i)
                            : NULL;

    return alias ? alias : vf_at(m, i)->alias;
}

/* The VF leased for VF @i would not plug: lease the destination's next free one of the same
 * model, once, and try it. TRUE when it is plugged (dest_xml[i] and leases[i] then describe
 * it; the first lease is released). */
static gboolean plug_other_vf(Migration *m, guint i, const char *why)
{
    XmlVf *vf = vf_at(m, i);
    HotplugVf *like = m->like ? g_ptr_array_index(m->like, i) : NULL;
    HotplugLease *old = g_ptr_array_index(m->leases, i);
    g_autoptr(GError) local = NULL;
    g_autoptr(HotplugLease) lease = NULL;
    g_autofree char *xml = NULL;
    g_autofree char *holder = NULL;
    g_autofree char *reason = NULL;
    OrchHotmigdLeaseRequest req;

    if (!like) /* a stand-in or --target-vf: there is no other */
        return FALSE;
    lease_request_init(m, &req, &holder, &reason);
    req.vendor_id = like->vendor_id;
    req.device_id = like->product_id;
    lease = orch_hotmigd_client_lease(m->vfd, &req, &local);
    if (!lease || !(xml = xml_vf_format_attach(vf, lease->vf, &local))) {
        progress(m, ORCH_PHASE_PLUG, "no other VF for '%s': %s", vf->alias, local->message);
        if (lease)
            orch_hotmigd_client_release(m->vfd, lease->vf, lease->id, NULL);
        return FALSE;
    }
    progress(m, ORCH_PHASE_PLUG, "'%s' would not plug (%s); trying VF %s instead", vf->alias,
             why, lease->vf);
    if (!note(m, "plug", vf->alias, xml, NULL) ||
        !orch_virt_device_attach(m->dst, m->opts->domain, xml, m->dest_persistent, &local)) {
        if (local)
            progress(m, ORCH_PHASE_PLUG, "VF %s would not plug either: %s", lease->vf,
                     local->message);
        orch_hotmigd_client_release(m->vfd, lease->vf, lease->id, NULL);
        return FALSE;
    }
    if (!orch_hotmigd_client_release(m->vfd, old->vf, old->id, &local))
        g_debug("Cannot release the lease of VF %s: %s", old->vf, local->message);
    g_ptr_array_index(m->leases, i) = g_steal_pointer(&lease);
    hotplug_lease_free(old);
    g_free(g_ptr_array_index(m->dest_xml, i));
    g_ptr_array_index(m->dest_xml, i) = g_steal_pointer(&xml);
    return TRUE;
}

/* Before the plug: is @lease still ours? Held for at least half its TTL more (taken or renewed
 * that recently, no renewal of the keeper failed): yes, without asking (a request less on the
 * way from the copy's end to the plug). Otherwise renewed now, which decides. */
static gboolean lease_check(Migration *m, HotplugLease *lease, GError **error)
{
    LeaseKeeper *k = m->keeper;
    g_autoptr(GError) local = NULL;
    gboolean lost;
    gboolean held;

    if (lease->state != HOTPLUG_LEASE_LEASED)
        return TRUE;
    g_mutex_lock(&k->lock);
    lost = k->lost != NULL;
    held = g_get_monotonic_time() + (gint64)k->ttl_s * G_TIME_SPAN_SECOND / 2 < k->held_until;
    g_mutex_unlock(&k->lock);
    if (!lost && held)
        return TRUE;
    if (orch_hotmigd_client_renew(m->vfd, lease->vf, lease->id, k->ttl_s, &local))
        return TRUE;
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_CONFLICT,
                "The lease of VF %s on the destination was lost before the plug: %s", lease->vf,
                local->message);
    return FALSE;
}

static gboolean do_plug(Migration *m, char **ret_detail, GError **error)
{
    g_autoptr(GString) detail = g_string_new(NULL);
    guint attempts = MAX(m->opts->plug_attempts, 1);

    /* Defined there when --persistent asked it or it was defined there before, whatever it was
     * on the source: a transient domain has no definition to plug into (libvirt refuses). */
    if (!orch_virt_domain_is_persistent(m->dst, m->opts->domain, &m->dest_persistent, error))
        return FALSE;

    for (guint i = 0; i < m->vfs->len; i++) {
        XmlVf *vf = vf_at(m, i);
        g_autoptr(GError) local = NULL;
        guint attempt;

        if (!note(m, "plug", vf->alias, g_ptr_array_index(m->dest_xml, i), error))
            return FALSE;
        /* The lease must still be ours: one lost under a long copy may hold another
         * migration's VF, GUIDs and all, by now. */
        if (m->keeper && !lease_check(m, g_ptr_array_index(m->leases, i), error))
            return FALSE;
        for (attempt = 1; attempt <= attempts; attempt++) {
            g_clear_error(&local);
            if (orch_virt_device_attach(m->dst, m->opts->domain,
                                           g_ptr_array_index(m->dest_xml, i), m->dest_persistent,
                                           &local))
                break;
            progress(m, ORCH_PHASE_PLUG, "attempt %u of %u for '%s' failed: %s", attempt,
                     attempts, vf->alias, local->message);
        }
        if (attempt > attempts && plug_other_vf(m, i, local->message)) {
            g_clear_error(&local);
            attempt = attempts;
        }
        if (attempt > attempts) {
            g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                       "Plugging '%s' on destination host (%u attempts): ",
                                       vf->alias, attempts);
            return FALSE;
        }
        m->plugged = i + 1;
        learn_dest_alias(m, i, g_ptr_array_index(m->dest_xml, i));
        g_string_append_printf(detail, "%s%s", i ? ", " : "", vf->alias);
    }
    *ret_detail = g_string_free(g_steal_pointer(&detail), FALSE);
    return TRUE;
}

/* ---- rollback ---------------------------------------------------------------------------- */

/* Brings the domain back to where it started: on the source, VFs plugged, agent resumed.
 * Each step is recorded; a step that fails leaves the rest to do what they still can. */
/* Undo's first step: the migration call ends, so that the source's QEMU is gone before the
 * domain moves back. FALSE when it does not (recorded): nothing else is undone. */
static gboolean rollback_migration_end(Migration *m)
{
    g_autoptr(GError) err = NULL;
    gint64 start = g_get_monotonic_time();

    if (!migrate_join(m, &err)) {
        rollback_record(m, "migration-end", start, err, NULL);
        return FALSE;
    }
    return TRUE;
}

/* libvirt refuses to migrate a domain holding a PCI VF: take back what was plugged on the
 * destination, last first, until one fails. */
static void rollback_unplug_destination(Migration *m)
{
    for (guint i = m->plugged; i > 0; i--) {
        XmlVf *vf = vf_at(m, i - 1);
        g_autoptr(GError) err = NULL;
        gint64 start = g_get_monotonic_time();

        if (orch_virt_device_detach(m->dst, m->opts->domain, dest_alias(m, i - 1),
                                    m->dest_persistent, m->opts->unplug_timeout_ms, &err))
            m->plugged = i - 1;
        rollback_record(m, "unplug-destination", start, err, vf->alias);
        if (err)
            break;
    }
}

/* The domain stays on the destination: give it back what it can have there. */
static void rollback_plug_destination(Migration *m)
{
    for (guint i = m->plugged; i < m->vfs->len; i++) {
        g_autoptr(GError) err = NULL;
        gint64 start = g_get_monotonic_time();

        if (orch_virt_device_attach(m->dst, m->opts->domain, g_ptr_array_index(m->dest_xml, i),
                                    m->dest_persistent, &err))
            m->plugged = i + 1;
        rollback_record(m, "plug-destination", start, err, vf_at(m, i)->alias);
    }
}

/* The domain on the destination goes back to the source, as it was there: defined on the
 * source again when --undefinesource removed its definition (one left there is kept as it is),
 * and no definition left on the destination that this migration made there. When it cannot,
 * it stays on the destination with what it can have there. */
static void rollback_migrate_back(Migration *m)
{
    OrchMigrateParams params = {
        .persistent = m->persistent && m->opts->undefine_source,
        .undefine_source = m->opts->persistent && !m->dest_defined,
    };
    OrchMigrateStats stats = {0};
    g_autoptr(GError) local = NULL;
    gint64 start;

    rollback_unplug_destination(m);
    start = g_get_monotonic_time();
    if (m->plugged == 0 &&
        orch_virt_migrate(m->dst, m->opts->domain, m->src->uri, &params, &stats, &local)) {
        m->on_destination = FALSE;
        g_free(m->report->final_host);
        m->report->final_host = g_strdup("source");
        m->report->phases[ORCH_PHASE_MIGRATE].status = ORCH_STATUS_UNDONE;
        rollback_record(m, "migrate-back", start, NULL, "the domain runs on the source again");
        return;
    }
    if (!local)
        g_set_error(&local, ORCH_ERROR, ORCH_ERROR_ROLLBACK,
                    "VFs still plugged on the destination");
    rollback_record(m, "migrate-back", start, local, NULL);
    rollback_plug_destination(m);
}

/* The domain is on the source: plug back the VFs this migration detached there. */
static void rollback_plug_source(Migration *m)
{
    gboolean vf_back_ok = TRUE;

    for (guint i = 0; i < m->detached; i++) {
        XmlVf *vf = vf_at(m, i);
        g_autoptr(GError) err = NULL;
        gint64 start = g_get_monotonic_time();

        if (!orch_virt_device_attach(m->src, m->opts->domain, g_ptr_array_index(m->source_xml, i),
                                     m->persistent, &err))
            vf_back_ok = FALSE;
        rollback_record(m, "plug-source", start, err, vf->alias);
    }
    if (m->detached && vf_back_ok)
        m->report->phases[ORCH_PHASE_UNPLUG].status = ORCH_STATUS_UNDONE;
    if (vf_back_ok)
        m->detached = 0;
}

/* The guest's processes paused for the move resume, wherever the domain is now. */
static void rollback_agent_resume(Migration *m)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *detail = NULL;
    gint64 start = g_get_monotonic_time();

    if (agent_resume(m, m->on_destination ? m->dst : m->src, &detail, NULL, &err))
        m->report->phases[ORCH_PHASE_PREPARE].status = ORCH_STATUS_UNDONE;
    rollback_record(m, "agent-resume", start, err, detail);
}

static void rollback(Migration *m)
{
    if (!rollback_migration_end(m))
        return;
    if (m->on_destination)
        rollback_migrate_back(m);
    if (!m->on_destination)
        rollback_plug_source(m);
    m->report->vfs_attached =
        m->on_destination ? m->plugged : (m->vfs ? m->vfs->len - m->detached : 0);
    if (m->agent_prepared)
        rollback_agent_resume(m);
}

/* ---- the whole run ----------------------------------------------------------------------- */

/* Ends @phase, begun with phase_begin(): ok with @detail, or failed with @local (taken). */
static gboolean phase_finish(Migration *m, OrchPhase phase, gboolean ok, const char *detail,
                             GError *local, GError **error)
{
    if (!ok) {
        phase_fail(m, phase, local);
        g_propagate_prefixed_error(error, local, "Phase '%s' failed: ",
                                   orch_phase_to_string(phase));
        return FALSE;
    }
    phase_end(m, phase, ORCH_STATUS_OK, "%s", detail ? detail : "");
    return TRUE;
}

/* Cancelled by the user? (an error to fail the phase with) */
static gboolean phase_cancelled(Migration *m, GError **error)
{
    if (!g_cancellable_set_error_if_cancelled(m->opts->cancellable, error))
        return FALSE;
    g_clear_error(error);
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_CANCELLED, "Cancelled by the user");
    return TRUE;
}

static gboolean run_phase(Migration *m, OrchPhase phase,
                          gboolean (*fn)(Migration *, char **, GError **), GError **error)
{
    g_autofree char *detail = NULL;
    GError *local = NULL;
    gboolean ok;

    phase_begin(m, phase);
    ok = !phase_cancelled(m, &local) && fn(m, &detail, &local);
    return phase_finish(m, phase, ok, detail, local, error);
}

/* The processes of the guest's jobs, from the inventory read with the identity: a process
 * that used a call a migration cannot carry (the verbs layer refused it: memory windows, ODP,
 * device memory, rdma_cm ...) stops the move here, before anything changed, unless --force;
 * the peers whose connections the move pauses are said. docs/operations.md, "Jobs". */
static gboolean jobs_check(Migration *m, GString *detail, GError **error)
{
    g_autofree char *refused = NULL;
    g_autofree char *peers = NULL;
    guint n_peers = 0;

    if (!m->procs) {
        if (!m->procs_malformed)
            return TRUE; /* no inventory (an older agent): nothing reported, nothing to check */
        if (m->opts->force) {
            g_string_append_printf(detail, "; --force: moving although %s",
                                   m->procs_error->message);
            return TRUE;
        }
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_REFUSED,
                    "%s: cannot tell whether a process of domain '%s' can move; nothing was "
                    "done (--force pauses them and moves anyway)",
                    m->procs_error->message, m->opts->domain);
        return FALSE;
    }
    peers = orch_agent_peers_summary(m->procs, &n_peers);
    if (peers)
        g_string_append_printf(detail, "; the move pauses %u peer connection(s): %s", n_peers,
                               peers);
    refused = orch_agent_refused_summary(m->procs);
    if (!refused)
        return TRUE;
    if (m->opts->force) {
        g_string_append_printf(detail,
                               "; --force: moving although %s, which a migration "
                               "cannot carry",
                               refused);
        return TRUE;
    }
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_REFUSED,
                "Domain '%s' not moved: %s, which a migration cannot carry; nothing was done "
                "(--force moves anyway: a registered process is paused, one that did not "
                "register loses the device)",
                m->opts->domain, refused);
    return FALSE;
}

/* The target-vf phase, overlapped with the opening of the source's agent and the reading of
 * its inventory (which change nothing): the lease is side work. */
static gboolean run_target_vf(Migration *m, GError **error)
{
    Side lease = {0};
    GError *local = NULL;
    g_autofree char *detail = NULL;
    gboolean ok;

    phase_begin(m, ORCH_PHASE_TARGET_VF);
    if (phase_cancelled(m, &local))
        return phase_finish(m, ORCH_PHASE_TARGET_VF, FALSE, NULL, local, error);
    /* The agent's channel, handshake and inventory (one round trip) from the start. */
    if (!m->opts->no_agent)
        agent_early_start(m);
    if (!target_vf_check(m, &local)) {
        agent_early_join(m); /* the failure is the check's */
        return phase_finish(m, ORCH_PHASE_TARGET_VF, FALSE, NULL, local, error);
    }
    side_start(&lease, m, target_vf_lease, "hm-lease");
    if (!m->opts->no_agent) {
        Side identity = {0};

        /* The source host's GUIDs beside the agent's inventory (identity_read() joins). */
        if (identity_source_vf(m)) {
            side_start(&identity, m, identity_fetch, "hm-identity");
            m->identity_side = &identity;
        }
        agent_open_early(m);
        side_join(&identity, ORCH_PHASE_TARGET_VF);
        side_clear(&identity);
        m->identity_side = NULL;
    }
    side_join(&lease, ORCH_PHASE_TARGET_VF);
    ok = lease.ok;
    if (ok) {
        g_autoptr(GString) text = g_string_new(lease.detail);

        if (m->agent)
            g_string_append(text, " (the agent's inventory read meanwhile)");
        /* Before anything changes (the lease is released on the way out). */
        ok = !m->agent || jobs_check(m, text, &local);
        detail = g_string_free(g_steal_pointer(&text), FALSE);
    } else {
        local = g_steal_pointer(&lease.error);
    }
    side_clear(&lease);
    if (ok)
        keeper_start(m);
    return phase_finish(m, ORCH_PHASE_TARGET_VF, ok, detail, local, error);
}

/* Side work during the plug: the destination's agent channel opened and synchronized, so
 * that the resume goes out the moment the VF is there. A failure is left to the resume. */
static gboolean agent_open_dest(Migration *m, char **ret_detail, GError **error)
{
    m->dst_agent = orch_agent_open(m->dst, m->opts->domain, agent_channel(m),
                                   m->opts->agent_timeout_ms, error);
    return m->dst_agent != NULL;
}

/* Side work during the unplug: the destination VF gets the guest's InfiniBand identity before
 * it is plugged (its driver reads the GUIDs when it probes the VF), while the guest lets go of
 * the source VF. */
static gboolean identity_side(Migration *m, char **ret_detail, GError **error)
{
    return identity_apply(m, ret_detail, error);
}

/* The unplug phase, with the destination VF's identity set beside it: either failing fails
 * the phase (the undo plugs the VF back and resumes the processes). */
static gboolean run_unplug(Migration *m, GError **error)
{
    Side identity = {0};
    g_autofree char *detail = NULL;
    g_autofree char *both = NULL;
    GError *local = NULL;
    gboolean ok;

    phase_begin(m, ORCH_PHASE_UNPLUG);
    side_start(&identity, m, identity_side, "hm-identity");
    ok = !phase_cancelled(m, &local) && do_unplug(m, &detail, &local);
    side_join(&identity, ORCH_PHASE_UNPLUG);
    if (ok && !identity.ok) {
        ok = FALSE;
        local = g_steal_pointer(&identity.error);
    }
    if (ok)
        both = g_strdup_printf("%s; %s", detail, identity.detail);
    side_clear(&identity);
    return phase_finish(m, ORCH_PHASE_UNPLUG, ok, both, local, error);
}

/* Side work after the plug, alongside the resume: the destination's leases confirmed, the
 * source's hotmigd told the domain left its VFs. */
static gboolean leases_end(Migration *m, char **ret_detail, GError **error)
{
    leases_settle(m, FALSE);
    source_leases_end(m);
    return TRUE;
}

/* Waits for the opening of the destination's agent channel begun with the plug (NULL-safe). */
static void dst_agent_join(Migration *m)
{
    Side *side = g_steal_pointer(&m->dst_agent_side);

    if (!side)
        return;
    side_join(side, ORCH_PHASE_RESUME);
    if (side->error)
        progress(m, ORCH_PHASE_RESUME, "the destination's agent did not answer yet (%s): opening it again",
                 side->error->message);
    side_clear(side);
    g_free(side);
}

static gboolean do_resume(Migration *m, char **ret_detail, GError **error)
{
    g_autoptr(GError) first = NULL;
    OrchStandbyFigures *standby = &m->report->phases[ORCH_PHASE_RESUME].standby;

    if (!note(m, "resume", NULL, NULL, error))
        return FALSE;
    dst_agent_join(m);
    if (m->dst_agent) {
        g_autoptr(OrchAgent) agent = g_steal_pointer(&m->dst_agent);

        if (orch_agent_resume_open(agent, m->opts->agent_timeout_ms, m->opts->resume_timeout_ms,
                                   ret_detail, standby, &first)) {
            m->agent_prepared = FALSE;
            return TRUE;
        }
    } else if (agent_resume(m, m->dst, ret_detail, standby, &first)) {
        return TRUE;
    }
    /* The agent answered that processes failed to resume: asking again would find them
     * running and resume none, as if all went well. */
    if (g_error_matches(first, ORCH_ERROR, ORCH_ERROR_FAILED)) {
        g_propagate_error(error, g_steal_pointer(&first));
        return FALSE;
    }
    /* The channel may not be ready at once, or the destination's libvirtd restarted and took
     * our connection with it: one more try, on a fresh connection. */
    progress(m, ORCH_PHASE_RESUME, "retrying on a new connection after: %s", first->message);
    {
        g_autoptr(GError) local = NULL;
        OrchVirt *fresh = orch_connector_open_virt(m->opts, m->dst->uri, "destination", &local);

        if (fresh) {
            orch_virt_free(m->dst);
            m->dst = fresh;
        } else {
            progress(m, ORCH_PHASE_RESUME, "cannot reconnect, keeping the old connection: %s",
                     local->message);
        }
    }
    return agent_resume(m, m->dst, ret_detail, standby, error);
}

static gboolean validate_options(const OrchOptions *opts, GError **error)
{
    if (!opts->domain || !*opts->domain) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "No domain given");
        return FALSE;
    }
    if (!opts->dest_uri || !*opts->dest_uri) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "No destination URI given");
        return FALSE;
    }
    if (opts->target_vf && !hm_pci_address_parse(opts->target_vf, NULL, NULL)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "--target-vf '%s' is not a PCI address (DDDD:BB:SS.F)", opts->target_vf);
        return FALSE;
    }
    return TRUE;
}

/* Ends the journal: removed when the domain is where it should be with what it should have;
 * kept (for --recover) when undoing failed or the agent could not be resumed. */
static void journal_end(Migration *m, gboolean keep)
{
    g_autoptr(GError) local = NULL;

    if (!m->journal)
        return;
    if (keep) {
        note(m, "end", "kept for recovery", NULL, NULL);
        return;
    }
    if (!note(m, "end", m->report->ok ? "ok" : "undone", NULL, &local) ||
        !orch_journal_finish(m->journal, &local))
        g_warning("Cannot close the journal of '%s': %s", m->opts->domain, local->message);
}

/* What changes nothing: the options, connect, inspect, target-vf, then the journal's begin
 * record. FALSE: the migration stops here, nothing to undo. */
static gboolean migration_look(Migration *m, GError **error)
{
    const OrchOptions *opts = m->opts;
    g_autoptr(GError) local = NULL;

    if (!validate_options(opts, &local)) {
        m->report->failed_phase = ORCH_PHASE_CONNECT;
        m->report->error = g_strdup(local->message);
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }

    phase_begin(m, ORCH_PHASE_CONNECT);
    if (!do_connect(m, &local)) {
        phase_fail(m, ORCH_PHASE_CONNECT, local);
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "Phase 'connect' failed: ");
        return FALSE;
    }
    phase_end(m, ORCH_PHASE_CONNECT, ORCH_STATUS_OK, "%s -> %s%s", m->src->uri, m->dst->uri,
              m->persistent ? " (persistent domain)" : "");

    if (!run_phase(m, ORCH_PHASE_INSPECT, do_inspect, error))
        return FALSE;
    if (m->vfs->len > 0) {
        if (!run_target_vf(m, error))
            return FALSE;
    } else {
        m->dest_xml = g_ptr_array_new_with_free_func(g_free);
        m->source_xml = g_ptr_array_new_with_free_func(g_free);
        phase_skip(m, ORCH_PHASE_TARGET_VF, "no VF");
    }
    /* Nothing has changed so far; from here on every step is journaled before it is taken. */
    if (!note_begin(m, &local)) {
        m->report->failed_phase = ORCH_PHASE_PREPARE;
        m->report->error = g_strdup(local->message);
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    return TRUE;
}

typedef enum {
    MOVE_DONE,   /* the domain runs on the destination with its VFs, processes resumed */
    MOVE_FAILED, /* a step failed: what was done is to be undone */
    MOVE_KEPT,   /* the resume failed after everything else: kept for --recover */
} MoveResult;

/* The steps that change things, in order: prepare, unplug, migrate, plug, resume. The leases'
 * end runs beside the resume, on @tail. */
static MoveResult migration_move(Migration *m, Side *tail, GError **error)
{
    const OrchOptions *opts = m->opts;
    gboolean has_vf = m->vfs->len > 0;

    if (!has_vf)
        phase_skip(m, ORCH_PHASE_PREPARE, "no VF");
    else if (opts->no_agent)
        phase_skip(m, ORCH_PHASE_PREPARE, "--no-agent");
    else if (!run_phase(m, ORCH_PHASE_PREPARE, do_prepare, error))
        return MOVE_FAILED;

    if (!has_vf)
        phase_skip(m, ORCH_PHASE_UNPLUG, "no VF");
    else if (!run_unplug(m, error))
        return MOVE_FAILED;

    if (!run_phase(m, ORCH_PHASE_MIGRATE, do_migrate, error))
        return MOVE_FAILED;

    if (!has_vf) {
        phase_skip(m, ORCH_PHASE_PLUG, "no VF");
    } else {
        /* Joined by the resume (its wait counts there), or here when the plug failed. */
        if (!opts->no_agent) {
            m->dst_agent_side = g_new0(Side, 1);
            side_start(m->dst_agent_side, m, agent_open_dest, "hm-agent");
        }
        if (!run_phase(m, ORCH_PHASE_PLUG, do_plug, error)) {
            /* Not on the way back: the channel closes before the domain moves again. */
            dst_agent_join(m);
            g_clear_pointer(&m->dst_agent, orch_agent_free);
            return MOVE_FAILED;
        }
    }
    m->report->vfs_attached = m->plugged;
    if (has_vf) {
        /* The leases end alongside the resume (side work; joined at the end). */
        side_start(tail, m, leases_end, "hm-leases");
        m->settled = TRUE;
    }

    if (!has_vf)
        phase_skip(m, ORCH_PHASE_RESUME, "no VF");
    else if (opts->no_agent)
        phase_skip(m, ORCH_PHASE_RESUME, "--no-agent");
    else if (!run_phase(m, ORCH_PHASE_RESUME, do_resume, error)) {
        g_autoptr(GError) local = NULL;

        /* The domain runs on the destination with its VFs: nothing to undo, but the
         * processes still wait; --recover retries the resume. */
        if (!migrate_join(m, &local))
            progress(m, ORCH_PHASE_MIGRATE, "%s", local->message);
        return MOVE_KEPT;
    }
    {
        GError *local = NULL;

        if (!migrate_join(m, &local)) {
            g_free(m->report->error);
            m->report->error = g_strdup(local->message);
            g_propagate_error(error, local);
            return MOVE_KEPT;
        }
    }
    return MOVE_DONE;
}

/* Undoes what a failed step left (rollback()). When an undo action fails too, *@error becomes
 * ORCH_ERROR_ROLLBACK saying where the domain is, and the journal is kept: returns TRUE. */
static gboolean migration_undo(Migration *m, GError **error)
{
    const OrchOptions *opts = m->opts;

    rollback(m);
    for (guint i = 0; i < m->report->rollback->len; i++) {
        OrchRollbackRecord *rec = g_ptr_array_index(m->report->rollback, i);

        if (rec->ok)
            continue;
        if (error && *error) {
            g_autofree char *msg = g_strdup((*error)->message);

            g_clear_error(error);
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_ROLLBACK,
                        "%s; then undoing it failed too (%s: %s): domain '%s' is on the %s host "
                        "with %u of %u VF(s); 'migrate-vm --recover %s' retries",
                        msg, rec->action, rec->detail, opts->domain, m->report->final_host,
                        m->report->vfs_attached, m->report->vfs_total, opts->domain);
            g_free(m->report->error);
            m->report->error = g_strdup((*error)->message);
        }
        return TRUE;
    }
    return FALSE;
}

/* Frees what the migration held (not its report). */
static void migration_clear(Migration *m)
{
    if (m->vfs)
        g_ptr_array_unref(m->vfs);
    if (m->dest_xml)
        g_ptr_array_unref(m->dest_xml);
    if (m->source_xml)
        g_ptr_array_unref(m->source_xml);
    if (m->like)
        g_ptr_array_unref(m->like);
    if (m->dest_alias)
        g_ptr_array_unref(m->dest_alias);
    if (m->src_vfs)
        g_ptr_array_unref(m->src_vfs);
    if (m->leases)
        g_ptr_array_unref(m->leases);
    keeper_stop(m);
    orch_hotmigd_client_free(m->vfd);
    orch_agent_free(m->agent);
    orch_agent_inventory_free(m->inv);
    g_clear_error(&m->inv_error);
    orch_agent_free(m->dst_agent);
    g_clear_error(&m->agent_error);
    if (m->procs)
        g_ptr_array_unref(m->procs);
    g_clear_error(&m->procs_error);
    g_free(m->identity_note);
    g_free(m->identity_source);
    g_free(m->identity_error);
    if (m->call)
        migrate_call_unref(m->call);
    orch_virt_free(m->src);
    orch_virt_free(m->dst);
    g_free(m->id);
}

gboolean orch_migrate(const OrchOptions *opts, OrchReport **ret_report, GError **error)
{
    Migration mig = {.opts = opts};
    Migration *m = &mig;
    Side tail = {0};
    gboolean ok = FALSE;
    gboolean keep_journal = FALSE;
    g_autoptr(GError) late = NULL;

    m->report = orch_report_new(opts);
    m->start = g_get_monotonic_time();
    m->report->ok = FALSE;
    m->id = g_uuid_string_random();

    if (migration_look(m, error)) {
        switch (migration_move(m, &tail, error)) {
        case MOVE_DONE:
            m->report->ok = TRUE;
            ok = TRUE;
            break;
        case MOVE_FAILED:
            keep_journal = migration_undo(m, error);
            break;
        case MOVE_KEPT:
            keep_journal = TRUE;
            break;
        }
    }

    /* Every path that started the call joined it (migration_move(), rollback()): a net. */
    if (!migrate_join(m, &late))
        g_warning("%s", late->message);
    dst_agent_join(m);
    side_join(&tail, ORCH_PHASE_RESUME);
    side_clear(&tail);
    if (!m->settled) {
        leases_settle(m, !ok);
        if (m->on_destination && m->plugged == (m->vfs ? m->vfs->len : 0))
            source_leases_end(m);
    }
    journal_end(m, keep_journal);
    orch_journal_close(m->journal);
    m->report->total_us = g_get_monotonic_time() - m->start;
    migration_clear(m);
    *ret_report = m->report;
    return ok;
}
