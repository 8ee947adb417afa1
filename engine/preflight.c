/* migrate-vm --dry-run: every check a migration's first phases would make, and the ones a
 * failure late in the migration would reveal too late, without changing anything. Each check
 * is one line: passed, failed (with why), or skipped (when an earlier failure makes it
 * meaningless). */
#include "engine/agent-client.h"
#include "engine/engine.h"
#include "engine/preflight-priv.h"
#include "engine/virt.h"
#include "hotplug/hotplug.h"
#include "xml/xml.h"

/* Adds a check of the source side, told as progress. */
static G_GNUC_PRINTF(4, 5) void check_add(Preflight *pf, const char *name, OrchCheckStatus status,
                                          const char *fmt, ...)
{
    OrchCheck *check;
    va_list ap;

    va_start(ap, fmt);
    check = orch_checks_addv(pf->checks, name, status, fmt, ap);
    va_end(ap);
    if (pf->opts->progress)
        pf->opts->progress(ORCH_PHASE_CONNECT, check->detail, pf->opts->progress_opaque);
}

static void check_skip(Preflight *pf, const char *name, const char *why)
{
    check_add(pf, name, ORCH_CHECK_SKIP, "%s", why);
}

/* ---- the checks ---------------------------------------------------------------------------- */

static void check_hosts(Preflight *pf)
{
    g_autoptr(GError) error = NULL;
    OrchVirtDomainState state;

    pf->src = orch_connector_open_virt(pf->opts, pf->opts->source_uri, "source", &error);
    if (!pf->src) {
        check_add(pf, "source", ORCH_CHECK_FAIL, "%s", error->message);
        /* Nothing can move from a source that cannot be reached: the destination is not asked,
         * its checks are shown as skipped (orch_preflight_check_target() too). */
        check_skip(pf, "domain", "the source host failed");
        check_skip(pf, "destination", "the source host failed");
        return;
    }
    check_add(pf, "source", ORCH_CHECK_PASS, "connected to source host '%s'", pf->src->uri);
    if (!orch_virt_domain_state(pf->src, pf->opts->domain, &state, &error)) {
        check_add(pf, "domain", ORCH_CHECK_FAIL, "%s", error->message);
    } else if (state != ORCH_VIRT_DOMAIN_RUNNING) {
        check_add(pf, "domain", ORCH_CHECK_FAIL, "domain '%s' is not %s on source host '%s'",
                  pf->opts->domain, state == ORCH_VIRT_DOMAIN_MISSING ? "defined" : "running",
                  pf->src->uri);
    } else {
        g_autofree char *xml = orch_virt_domain_get_xml(pf->src, pf->opts->domain, &error);

        pf->dom = xml ? xml_domain_parse(xml, &error) : NULL;
        if (!pf->dom)
            check_add(pf, "domain", ORCH_CHECK_FAIL, "%s", error->message);
        else if (xml_domain_is_nova(pf->dom))
            check_add(pf, "domain", pf->opts->force ? ORCH_CHECK_PASS : ORCH_CHECK_FAIL,
                      "domain '%s' is an OpenStack Nova instance: moved behind Nova's back, it stays on source host '%s' in Nova's database (%s)",
                      pf->opts->domain, pf->src->uri,
                      pf->opts->force ? "--force: moving anyway" : "migrate it with Nova, or --force");
        else
            check_add(pf, "domain", ORCH_CHECK_PASS, "domain '%s' runs on source host '%s'",
                      pf->opts->domain, pf->src->uri);
    }
    g_clear_error(&error);

    pf->dst = orch_connector_open_virt(pf->opts, pf->opts->dest_uri, "destination", &error);
    if (!pf->dst) {
        check_add(pf, "destination", ORCH_CHECK_FAIL, "%s", error->message);
        return;
    }
    if (!orch_virt_domain_state(pf->dst, pf->opts->domain, &state, &error))
        check_add(pf, "destination", ORCH_CHECK_FAIL, "%s", error->message);
    else if (state == ORCH_VIRT_DOMAIN_RUNNING)
        check_add(pf, "destination", ORCH_CHECK_FAIL,
                  "domain '%s' already runs on destination host '%s'", pf->opts->domain,
                  pf->dst->uri);
    else
        check_add(pf, "destination", ORCH_CHECK_PASS, "connected to destination host '%s'",
                  pf->dst->uri);
}

/* The processes using the verbs layer (the agent's inventory): whose connections the move
 * pauses, and whether one used a call a migration cannot carry or holds the device without
 * having registered (refused unless --force). */
static void check_jobs(Preflight *pf, OrchAgent *agent)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) procs = NULL;
    g_autofree char *peers = NULL;
    g_autofree char *refused = NULL;
    guint n_peers = 0;

    if (!agent) {
        check_skip(pf, "jobs",
                   pf->opts->no_agent ? "--no-agent: no process is asked"
                   : !pf->src         ? "the source host failed"
                                      : "no agent to ask");
        return;
    }
    procs = orch_agent_processes(agent, pf->opts->agent_timeout_ms, &error);
    if (!procs) {
        check_add(pf, "jobs", pf->opts->force ? ORCH_CHECK_PASS : ORCH_CHECK_FAIL, "%s%s",
                  error->message,
                  pf->opts->force ? " (--force: moving anyway)"
                                  : ": cannot tell whether every process can move (--force "
                                    "moves anyway)");
        return;
    }
    peers = orch_agent_peers_summary(procs, &n_peers);
    refused = orch_agent_refused_summary(procs);
    if (refused)
        check_add(pf, "jobs", pf->opts->force ? ORCH_CHECK_PASS : ORCH_CHECK_FAIL,
                  "%s, which a migration cannot carry: %s", refused,
                  pf->opts->force ? "--force moves anyway (a registered process is paused, "
                                    "one that did not register loses the device)"
                                  : "the move will be refused (--force moves anyway)");
    if (peers)
        check_add(pf, "jobs", ORCH_CHECK_PASS,
                  "the move pauses %u peer connection(s) of %u "
                  "process(es): %s",
                  n_peers, orch_agent_registered_count(procs), peers);
    else if (!refused)
        check_add(pf, "jobs", ORCH_CHECK_PASS,
                  "%u process(es) registered, no peer connection "
                  "to pause",
                  orch_agent_registered_count(procs));
}

/* Returns the agent (owned) when it answered, for check_jobs(). */
static OrchAgent *check_agent(Preflight *pf)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(OrchAgent) agent = NULL;
    g_autoptr(OrchAgentInfo) info = NULL;
    const char *channel =
        pf->opts->agent_channel ? pf->opts->agent_channel : ORCH_AGENT_CHANNEL_DEFAULT;

    if (pf->opts->no_agent) {
        check_skip(pf, "agent", "--no-agent: the processes will not be quiesced");
        return NULL;
    }
    if (!pf->src) {
        check_skip(pf, "agent", "the source host failed");
        return NULL;
    }
    if (!pf->dom) {
        check_skip(pf, "agent", "no running domain to ask");
        return NULL;
    }
    agent = orch_agent_open(pf->src, pf->opts->domain, channel, pf->opts->agent_timeout_ms,
                            &error);
    info = agent ? orch_agent_info(agent, 0, pf->opts->agent_timeout_ms, &error) : NULL;
    if (!info) {
        check_add(pf, "agent", ORCH_CHECK_FAIL, "%s; use --no-agent to migrate without quiescing",
                  error->message);
        return NULL;
    }
    {
        /* The guest's words: stripped of what a terminal would act on. */
        g_autofree char *shown =
            hm_text_sanitize(info->version ? info->version : "(unknown version)", 64);

        check_add(pf, "agent", ORCH_CHECK_PASS, "hotmig-agent %s answers on channel '%s'", shown,
                  channel);
    }
    return g_steal_pointer(&agent);
}

static void check_vfs(Preflight *pf)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GString) list = g_string_new(NULL);

    if (!pf->src) {
        check_skip(pf, "vfs", "the source host failed");
        return;
    }
    if (!pf->dom) {
        check_skip(pf, "vfs", "no running domain to inspect");
        return;
    }
    pf->vfs = xml_domain_find_vfs(pf->dom, pf->opts->alias_prefix, &error);
    if (!pf->vfs) {
        check_add(pf, "vfs", ORCH_CHECK_FAIL, "%s", error->message);
        return;
    }
    for (guint i = 0; i < pf->vfs->len; i++) {
        XmlVf *vf = g_ptr_array_index(pf->vfs, i);

        g_string_append_printf(list, "%s%s (%s %s)", i ? ", " : "", vf->alias,
                               xml_vf_kind_to_string(vf->kind),
                               vf->host_pci ? vf->host_pci : vf->netdev ? vf->netdev : "?");
    }
    if (pf->vfs->len)
        check_add(pf, "vfs", ORCH_CHECK_PASS, "%u VF(s): %s", pf->vfs->len, list->str);
    else
        check_add(pf, "vfs", ORCH_CHECK_PASS, "no VF: the migration needs no unplug or plug");
}

static void check_capable(Preflight *pf)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(XmlDomainNeeds) needs = NULL;
    g_autofree char *detail = NULL;
    gboolean capable = FALSE;

    if (!pf->src) {
        check_skip(pf, "cpu", "the source host failed");
        return;
    }
    if (!pf->dom || !pf->dst) {
        check_skip(pf, "cpu", "needs the domain and the destination host");
        return;
    }
    needs = xml_domain_get_needs(pf->dom);
    if (!orch_virt_domain_capable(pf->dst, needs, &capable, &detail, &error))
        check_add(pf, "cpu", ORCH_CHECK_FAIL, "%s", error->message);
    else
        check_add(pf, "cpu", capable ? ORCH_CHECK_PASS : ORCH_CHECK_FAIL,
                  "destination host '%s' %s", pf->dst->uri, detail);
}

/* ---- the run ------------------------------------------------------------------------------- */

gboolean orch_preflight(const OrchOptions *opts, GPtrArray **ret_checks, GError **error)
{
    Preflight pf = {
        .opts = opts,
        .checks = g_ptr_array_new_with_free_func((GDestroyNotify)orch_check_free),
    };
    gboolean ok = TRUE;

    g_return_val_if_fail(opts && ret_checks, FALSE);

    {
        g_autofree char *asked = orch_options_format_migration(opts);

        check_add(&pf, "options", ORCH_CHECK_PASS, "libvirt will be asked: %s", asked);
    }
    check_hosts(&pf);
    {
        g_autoptr(OrchAgent) agent = check_agent(&pf);

        check_jobs(&pf, agent);
    }
    check_vfs(&pf);
    orch_preflight_check_target(&pf);
    check_capable(&pf);

    for (guint i = 0; i < pf.checks->len; i++) {
        OrchCheck *check = g_ptr_array_index(pf.checks, i);

        if (check->status == ORCH_CHECK_FAIL)
            ok = FALSE;
    }
    if (!ok)
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_PREFLIGHT,
                    "Domain '%s' cannot migrate to '%s' now: a check failed", opts->domain,
                    opts->dest_uri);
    if (pf.vfs)
        g_ptr_array_unref(pf.vfs);
    xml_domain_free(pf.dom);
    orch_virt_free(pf.src);
    orch_virt_free(pf.dst);
    *ret_checks = pf.checks;
    return ok;
}
