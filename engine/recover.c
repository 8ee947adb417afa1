/* Recovery: finishes or undoes a migration whose migrate-vm died (SIGKILL, crash, power),
 * from its journal and from what the hosts say now. Every step checks before it acts, so
 * recovery can itself be interrupted and run again. */
#include "engine/agent-client.h"
#include "engine/engine.h"
#include "engine/hotmigd-client.h"
#include "engine/journal.h"
#include "engine/json.h"
#include "engine/virt.h"
#include "xml/xml.h"

#include <string.h>

/* How long a domain may be seen on both hosts after an interrupted migration job. */
#define RECOVER_SETTLE_MS 30000

static void action_free(OrchRollbackRecord *a)
{
    g_free(a->action);
    g_free(a->detail);
    g_free(a);
}

void orch_recovery_free(OrchRecovery *rec)
{
    if (!rec)
        return;
    g_free(rec->domain);
    g_free(rec->outcome);
    g_free(rec->final_host);
    if (rec->actions)
        g_ptr_array_unref(rec->actions);
    g_free(rec->error);
    g_free(rec);
}


static void action(OrchRecovery *rec, const char *what, gint64 start, const GError *error,
                   const char *detail)
{
    OrchRollbackRecord *r = g_new0(OrchRollbackRecord, 1);

    r->action = g_strdup(what);
    r->ok = error == NULL;
    r->duration_us = g_get_monotonic_time() - start;
    r->detail = g_strdup(error ? error->message : detail);
    g_ptr_array_add(rec->actions, r);
}

/* The VFs in the live XML of the domain on @virt (owned array of XmlVf). */
static GPtrArray *live_vfs(OrchVirt *virt, const char *domain, GError **error)
{
    g_autofree char *xml = orch_virt_domain_get_xml(virt, domain, error);
    g_autoptr(XmlDomain) dom = xml ? xml_domain_parse(xml, error) : NULL;

    return dom ? xml_domain_find_vfs(dom, NULL, error) : NULL;
}

/* The alias recovery plugs back a VF under whose unplug was asked on the source, the killed
 * process's detach having named it @alias (owned): never @alias. The VF's user alias
 * (xml_vf_user_alias(): "ua-hostdev0" for libvirt's "hostdev0", which is already another),
 * else the other of its two user aliases: "ua-hmvf0" <-> "ua-hmvf0-r".
 *
 * Why: when the killed process's detach outlived libvirt's 5 s wait, libvirt queues the guest's
 * DEVICE_DELETED and later removes "the device with that alias" from the domain. Finishing the
 * unplug here can remove the device first (QEMU no longer knows it); the queued removal then
 * finds the VF plugged back under the same alias and deletes it (a stand-in NIC: its backend,
 * the guest keeps a NIC without carrier; issue 19, docs/reliability.md). Under another alias
 * the stale removal finds nothing. */
static char *recover_plug_alias(const char *alias)
{
    g_autofree char *user = xml_vf_user_alias(alias);

    if (!g_str_equal(user, alias))
        return g_steal_pointer(&user);
    if (g_str_has_suffix(user, "-r"))
        return g_strndup(user, strlen(user) - 2);
    return g_strconcat(user, "-r", NULL);
}

/* Is the live VF @live the one the journal knows as @alias with attach XML @device_xml? A
 * hostdev is known by its host PCI address (whatever alias it has), a stand-in by its user
 * alias or the one recovery plugs it back under (recover_plug_alias()). */
static gboolean vf_is(const XmlVf *live, const char *pci, const char *alias)
{
    g_autofree char *other = NULL;

    if (pci)
        return g_strcmp0(live->host_pci, pci) == 0;
    if (g_str_equal(live->alias, alias))
        return TRUE;
    other = recover_plug_alias(alias);
    return g_str_equal(live->alias, other);
}

/* Is the VF that @device_xml describes (known to the journal as @alias) among @live? */
static gboolean vf_present(GPtrArray *live, const char *device_xml, const char *alias)
{
    g_autofree char *wrapped = g_strconcat("<domain><name>x</name><devices>", device_xml,
                                           "</devices></domain>", NULL);
    g_autoptr(XmlDomain) dom = xml_domain_parse(wrapped, NULL);
    g_autoptr(GPtrArray) pcis = dom ? xml_domain_list_host_pci(dom) : NULL;
    const char *pci = pcis && pcis->len ? g_ptr_array_index(pcis, 0) : NULL;

    for (guint i = 0; i < live->len; i++) {
        if (vf_is(g_ptr_array_index(live, i), pci, alias))
            return TRUE;
    }
    return FALSE;
}

/* Recovers one domain whose journal is open (and locked). FALSE: keep the journal. */
/* Ends the destination leases the migration took: confirmed when the domain ended there with
 * the VF, released otherwise. Not fatal: an unconfirmed lease expires by itself. */
static void recover_leases(const OrchOptions *opts, OrchJournalRecord *plan, OrchRecovery *rec,
                           gboolean on_destination, GPtrArray *live)
{
    g_autoptr(OrchHotmigdClient) vfd = NULL;
    g_autoptr(GError) err = NULL;
    gint64 start = g_get_monotonic_time();

    if (!plan->hotmigd)
        return;
    for (guint i = 0; i < plan->vfs->len && !vfd; i++) {
        OrchJournalVf *vf = g_ptr_array_index(plan->vfs, i);

        if (vf->lease_vf && vf->lease_id &&
            !(vfd = orch_options_open_hotmigd(opts, plan->hotmigd, "destination", &err))) {
            action(rec, "release-lease", start, err, plan->hotmigd);
            return;
        }
    }
    for (guint i = 0; vfd && i < plan->vfs->len; i++) {
        OrchJournalVf *vf = g_ptr_array_index(plan->vfs, i);
        g_autoptr(GError) e = NULL;
        g_autoptr(HotplugLease) done = NULL;

        if (!vf->lease_vf || !vf->lease_id)
            continue;
        start = g_get_monotonic_time();
        if (on_destination && live && vf_present(live, vf->destination_xml, vf->alias)) {
            done = orch_hotmigd_client_confirm(vfd, vf->lease_vf, vf->lease_id, &e);
            action(rec, "confirm-lease", start, e, vf->lease_vf);
        } else {
            orch_hotmigd_client_release(vfd, vf->lease_vf, vf->lease_id, &e);
            action(rec, "release-lease", start, e, vf->lease_vf);
        }
    }
}

/* Where the domain runs once a migration job the killed process left running is stopped:
 * *ret_on_destination, or an error when it runs on both hosts or on neither. */
static gboolean recover_locate(const OrchJournalRecord *plan, OrchVirt *src, OrchVirt *dst,
                               OrchRecovery *rec, gboolean *ret_on_destination, GError **error)
{
    g_autoptr(GError) local = NULL;
    OrchVirtDomainState src_state;
    OrchVirtDomainState dst_state;
    gint64 start = g_get_monotonic_time();

    /* A migration job a killed migrate-vm left running in libvirtd: stop it, then look. */
    if (!orch_virt_domain_state(src, plan->domain, &src_state, error))
        return FALSE;
    if (src_state == ORCH_VIRT_DOMAIN_RUNNING) {
        if (!orch_virt_domain_abort_job(src, plan->domain, &local)) {
            action(rec, "abort-job", start, local, NULL);
            g_propagate_error(error, g_steal_pointer(&local));
            return FALSE;
        }
        action(rec, "abort-job", start, NULL, "no migration job left running");
    }
    /* Right after a migration job ends, the destination's incoming domain takes a moment to
     * be torn down (or the source's to go): look again until one of them is left. */
    for (HmDeadline until = hm_deadline_in_ms(RECOVER_SETTLE_MS);;) {
        if (!orch_virt_domain_state(src, plan->domain, &src_state, error) ||
            !orch_virt_domain_state(dst, plan->domain, &dst_state, error))
            return FALSE;
        if (src_state != ORCH_VIRT_DOMAIN_RUNNING || dst_state != ORCH_VIRT_DOMAIN_RUNNING ||
            hm_deadline_remaining_ms(until) == 0)
            break;
        g_usleep(200 * G_TIME_SPAN_MILLISECOND);
    }
    if (src_state == ORCH_VIRT_DOMAIN_RUNNING && dst_state == ORCH_VIRT_DOMAIN_RUNNING) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_ROLLBACK,
                    "Domain '%s' runs on both hosts; not touching it", plan->domain);
        return FALSE;
    }
    if (src_state != ORCH_VIRT_DOMAIN_RUNNING && dst_state != ORCH_VIRT_DOMAIN_RUNNING) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_NO_DOMAIN,
                    "Domain '%s' runs on neither '%s' nor '%s'", plan->domain, plan->source,
                    plan->destination);
        return FALSE;
    }
    *ret_on_destination = dst_state == ORCH_VIRT_DOMAIN_RUNNING;
    return TRUE;
}

/* Gives the domain, on @here, every VF it lacks. On the source, an unplug the killed process
 * asked for may still be under way (the VF would vanish after we looked): it is finished
 * first (the guest quiesced its users before any unplug was asked). A plug that fails sets
 * *@ret_ok to FALSE (each step is in @rec); FALSE with @error only when the domain cannot be
 * read. */
static gboolean recover_vfs(const OrchOptions *opts, const OrchJournalRecord *plan,
                            OrchVirt *here, gboolean on_destination, gboolean persistent,
                            OrchRecovery *rec, gboolean *ret_ok, GError **error)
{
    g_autoptr(GPtrArray) live = NULL;
    gint64 start;

    for (guint i = 0; !on_destination && i < plan->vfs->len; i++) {
        OrchJournalVf *vf = g_ptr_array_index(plan->vfs, i);
        g_autoptr(GError) err = NULL;

        if (!vf->unplug_asked)
            continue;
        start = g_get_monotonic_time();
        if (orch_virt_device_detach(here, plan->domain, vf->alias, persistent,
                                    opts->unplug_timeout_ms, &err))
            action(rec, "finish-unplug", start, NULL, vf->alias);
        else
            g_debug("Finishing the unplug of '%s': %s", vf->alias, err->message);
    }
    if (!(live = live_vfs(here, plan->domain, error)))
        return FALSE;
    for (guint i = 0; i < plan->vfs->len; i++) {
        OrchJournalVf *vf = g_ptr_array_index(plan->vfs, i);
        const char *xml = on_destination ? vf->destination_xml : vf->source_xml;
        g_autofree char *alias = NULL;
        g_autofree char *realiased = NULL;
        g_autofree char *detail = NULL;
        g_autoptr(GError) err = NULL;

        if (vf_present(live, xml, vf->alias)) {
            rec->vfs_attached++;
            continue;
        }
        start = g_get_monotonic_time();
        /* An unplug was asked on the source: its removal may still be queued in libvirt. */
        if (!on_destination && vf->unplug_asked) {
            alias = recover_plug_alias(vf->alias);
            if (!(realiased = xml_device_set_alias(xml, alias, &err)))
                g_prefix_error(&err, "Plugging VF '%s' back as '%s': ", vf->alias, alias);
        }
        if (!err && orch_virt_device_attach(here, plan->domain, realiased ? realiased : xml,
                                            persistent, &err))
            rec->vfs_attached++;
        else
            *ret_ok = FALSE;
        detail = alias ? g_strdup_printf("%s (plugged back as '%s': a removal of '%s' may be "
                                         "queued)",
                                         vf->alias, alias, vf->alias)
                       : g_strdup(vf->alias);
        action(rec, on_destination ? "plug-destination" : "plug-source", start, err, detail);
    }
    return TRUE;
}

static gboolean recover_one(const OrchOptions *opts, OrchJournal *journal, OrchRecovery *rec,
                            GError **error)
{
    g_autoptr(OrchJournalRecord) plan = orch_journal_load(journal, error);
    g_autoptr(OrchVirt) src = NULL;
    g_autoptr(OrchVirt) dst = NULL;
    OrchVirt *here;
    gboolean on_destination;
    gboolean persistent = FALSE; /* the domain is defined where it runs */
    gboolean ok = TRUE;

    if (!plan)
        return FALSE;
    if (!plan->domain) {
        rec->outcome = g_strdup("nothing to do");
        return TRUE;
    }
    if (!(src = orch_connector_open_virt(opts, plan->source, "source", error)) ||
        !(dst = orch_connector_open_virt(opts, plan->destination, "destination", error)) ||
        !recover_locate(plan, src, dst, rec, &on_destination, error))
        return FALSE;
    here = on_destination ? dst : src;
    rec->final_host = g_strdup(on_destination ? "destination" : "source");
    rec->vfs_total = plan->vfs->len;
    /* Plugs and unplugs change the domain's definition where it runs when it has one there:
     * on the destination that depends on --persistent, not on the source's. */
    if (!orch_virt_domain_is_persistent(here, plan->domain, &persistent, error) ||
        !recover_vfs(opts, plan, here, on_destination, persistent, rec, &ok, error))
        return FALSE;

    /* Processes quiesced by the agent wait for a resume: send it (idempotent). */
    if (plan->agent_asked) {
        g_autoptr(GError) err = NULL;
        g_autofree char *detail = NULL;
        gint64 start = g_get_monotonic_time();

        if (!orch_agent_resume(
                here, plan->domain,
                plan->agent_channel ? plan->agent_channel : ORCH_AGENT_CHANNEL_DEFAULT,
                opts->agent_timeout_ms, opts->resume_timeout_ms, &detail, NULL, &err))
            ok = FALSE;
        action(rec, "agent-resume", start, err, detail);
    }
    if (!ok) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_ROLLBACK,
                    "Domain '%s' runs on the %s host with %u of %u VF(s); see the steps above",
                    plan->domain, rec->final_host, rec->vfs_attached, rec->vfs_total);
        return FALSE;
    }
    {
        g_autoptr(GPtrArray) now = live_vfs(here, plan->domain, NULL);

        recover_leases(opts, plan, rec, on_destination, now);
    }
    rec->outcome = g_strdup(on_destination ? "finished" : "rolled back");
    return TRUE;
}

gboolean orch_recover(const OrchOptions *opts, GPtrArray **ret_results, GError **error)
{
    const char *state_dir = opts->state_dir ? opts->state_dir : ORCH_STATE_DIR_DEFAULT;
    g_autoptr(GPtrArray) results =
        g_ptr_array_new_with_free_func((GDestroyNotify)orch_recovery_free);
    g_autoptr(GPtrArray) domains = NULL;
    g_autoptr(GError) first = NULL;

    *ret_results = NULL;
    if (opts->domain) {
        domains = g_ptr_array_new_with_free_func(g_free);
        g_ptr_array_add(domains, g_strdup(opts->domain));
    } else if (!(domains = orch_journal_list(state_dir, error))) {
        *ret_results = g_steal_pointer(&results);
        return FALSE;
    }

    for (guint i = 0; i < domains->len; i++) {
        const char *domain = g_ptr_array_index(domains, i);
        OrchRecovery *rec = g_new0(OrchRecovery, 1);
        g_autoptr(OrchJournal) journal = NULL;
        g_autoptr(GError) local = NULL;

        rec->domain = g_strdup(domain);
        rec->actions = g_ptr_array_new_with_free_func((GDestroyNotify)action_free);
        g_ptr_array_add(results, rec);
        journal = orch_journal_open(state_dir, domain, FALSE, &local);
        if (!journal && g_error_matches(local, ORCH_ERROR, ORCH_ERROR_NOT_FOUND)) {
            /* Already recovered, or never interrupted: recovering again changes nothing. */
            rec->outcome = g_strdup("nothing to do");
            continue;
        }
        if (journal && recover_one(opts, journal, rec, &local)) {
            if (orch_journal_step(journal, NULL, "end", "recovered", NULL, &local) &&
                orch_journal_finish(journal, &local))
                continue;
        }
        g_free(rec->outcome);
        rec->outcome = g_strdup("failed");
        rec->error = g_strdup(local->message);
        if (!first)
            first = g_error_copy(local);
    }
    *ret_results = g_steal_pointer(&results);
    if (first) {
        g_propagate_error(error, g_steal_pointer(&first));
        return FALSE;
    }
    return TRUE;
}

char *orch_recovery_format_table(GPtrArray *results)
{
    g_autoptr(GString) out = g_string_new(NULL);

    if (results->len == 0)
        g_string_append(out, "No unfinished migration to recover.\n");
    for (guint i = 0; i < results->len; i++) {
        OrchRecovery *rec = g_ptr_array_index(results, i);

        g_string_append_printf(out, "%s: %s", rec->domain, rec->outcome);
        if (rec->final_host)
            g_string_append_printf(out, ", on the %s host with %u of %u VF(s)", rec->final_host,
                                   rec->vfs_attached, rec->vfs_total);
        g_string_append_c(out, '\n');
        for (guint j = 0; j < rec->actions->len; j++) {
            OrchRollbackRecord *a = g_ptr_array_index(rec->actions, j);

            g_string_append_printf(out, "  %-18s %-6s %s\n", a->action, a->ok ? "ok" : "failed",
                                   a->detail ? a->detail : "");
        }
        if (rec->error)
            g_string_append_printf(out, "  error: %s\n", rec->error);
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}

char *orch_recovery_format_json(GPtrArray *results, gboolean pretty)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;

    json_builder_begin_array(b);
    for (guint i = 0; i < results->len; i++) {
        OrchRecovery *rec = g_ptr_array_index(results, i);

        json_builder_begin_object(b);
        orch_json_member_string(b, "domain", rec->domain);
        orch_json_member_string(b, "outcome", rec->outcome);
        orch_json_member_string(b, "final_host", rec->final_host);
        orch_json_member_int(b, "vfs_total", rec->vfs_total);
        orch_json_member_int(b, "vfs_attached", rec->vfs_attached);
        json_builder_set_member_name(b, "actions");
        json_builder_begin_array(b);
        for (guint j = 0; j < rec->actions->len; j++) {
            OrchRollbackRecord *a = g_ptr_array_index(rec->actions, j);

            json_builder_begin_object(b);
            orch_json_member_string(b, "action", a->action);
            orch_json_member_bool(b, "ok", a->ok);
            orch_json_member_string(b, "detail", a->detail);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        orch_json_member_string(b, "error", rec->error);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, pretty);
    return json_generator_to_data(gen, NULL);
}
