/* The pre-flight checks that ask the destination's hotmigd: it answers, and its pool has a free
 * VF for each of the domain's (the same model for a PCI VF, the same network device for a
 * stand-in). Reads only: nothing is leased. */
#include "engine/hotmigd-client.h"
#include "engine/preflight-priv.h"
#include "hotplug/hotplug.h"

#include <gio/gio.h>

/* QEMU's migration data port range as libvirt hands it out (qemu.conf migration_port_min/max). */
#define MIGRATION_PORT_FIRST 49152
#define PROBE_TIMEOUT_S 3

static G_GNUC_PRINTF(4, 5) void add(Preflight *pf, const char *name, OrchCheckStatus status,
                                    const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    orch_checks_addv(pf->checks, name, status, fmt, ap);
    va_end(ap);
}

/* The model of the source VF at @pci, from the source's node devices. */
static gboolean source_model(Preflight *pf, const char *pci, guint *ret_vendor, guint *ret_device,
                             GError **error)
{
    g_autoptr(GPtrArray) xmls = orch_virt_nodedev_list_pci_xml(pf->src, error);

    if (!xmls)
        return FALSE;
    for (guint i = 0; i < xmls->len; i++) {
        g_autoptr(HotplugVf) vf = hotplug_vf_from_nodedev_xml(g_ptr_array_index(xmls, i), NULL);

        if (vf && g_str_equal(vf->pci_address, pci)) {
            *ret_vendor = vf->vendor_id;
            *ret_device = vf->product_id;
            return TRUE;
        }
    }
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                "'%s' is not an SR-IOV VF on source host '%s'", pci, pf->src->uri);
    return FALSE;
}

/* Why @info cannot be leased now (owned), or NULL when it can. */
static char *vf_unavailable(const OrchHotmigdVfInfo *info)
{
    switch (info->state) {
    case ORCH_VF_STATE_FREE:
        return NULL;
    case ORCH_VF_STATE_LEASED:
    case ORCH_VF_STATE_ASSIGNED:
        return g_strdup_printf("'%s' is %s by '%s' (%s)", info->id,
                               orch_vf_state_to_string(info->state),
                               info->lease && info->lease->holder ? info->lease->holder : "?",
                               info->lease && info->lease->reason ? info->lease->reason : "?");
    case ORCH_VF_STATE_IN_USE:
        return g_strdup_printf("'%s' is in use by domain '%s'", info->id,
                               info->assigned_to ? info->assigned_to : "?");
    case ORCH_VF_STATE_MISSING:
        return g_strdup_printf("'%s' is missing there%s%s", info->id, info->note ? ": " : "",
                               info->note ? info->note : "");
    default:
        return g_strdup_printf("'%s' is in an unknown state", info->id);
    }
}

/* Finds a leasable VF for @vf among @pool, not one of @taken; adds the choice to @taken.
 * Returns the chosen id (borrowed) or NULL with *ret_why (owned). */
static const char *choose(Preflight *pf, XmlVf *vf, GPtrArray *pool, GHashTable *taken,
                          char **ret_why)
{
    g_autoptr(GError) error = NULL;
    const char *want = vf->host_pci ? pf->opts->target_vf : vf->netdev;
    guint vendor = 0, device = 0, same_model = 0;

    if (!vf->host_pci && !vf->netdev) {
        *ret_why = g_strdup_printf("stand-in '%s' names no network device (<target dev>)",
                                   vf->alias);
        return NULL;
    }
    if (vf->host_pci && !want && !source_model(pf, vf->host_pci, &vendor, &device, &error)) {
        *ret_why = g_strdup(error->message);
        return NULL;
    }
    for (guint i = 0; i < pool->len; i++) {
        OrchHotmigdVfInfo *info = g_ptr_array_index(pool, i);

        if (want) {
            g_autofree char *why = NULL;

            if (!g_str_equal(info->id, want))
                continue;
            why = vf_unavailable(info);
            if (!why && g_hash_table_contains(taken, info->id))
                why = g_strdup_printf("'%s' is wanted by another VF of the domain", info->id);
            if (why) {
                *ret_why = g_steal_pointer(&why);
                return NULL;
            }
            g_hash_table_add(taken, info->id);
            return info->id;
        }
        if (info->kind != ORCH_VF_KIND_PCI || info->vendor_id != vendor ||
            info->device_id != device)
            continue;
        same_model++;
        if (info->state == ORCH_VF_STATE_FREE && !g_hash_table_contains(taken, info->id)) {
            g_hash_table_add(taken, info->id);
            return info->id;
        }
    }
    if (want)
        *ret_why = g_strdup_printf("'%s' is not in the destination's VF pool", want);
    else
        *ret_why = g_strdup_printf("no free VF of its model %04x:%04x (the source VF %s) in the "
                                   "destination's pool (%u of that model, none free)",
                                   vendor, device, vf->host_pci, same_model);
    return NULL;
}

/* Can this host open TCP connections to the destination's migration data port? Nothing listens
 * there before a migration starts, so "connection refused" is the good answer (the host answers,
 * no firewall drops the port); a timeout or an unreachable network is not. The address is the
 * one of --migrateuri, else the host of the destination's hotmigd URL (the address it serves
 * other hosts on). */
static void check_migration_port(Preflight *pf)
{
    const char *from = pf->opts->migrate_uri ? pf->opts->migrate_uri : pf->opts->hotmigd_url;
    g_autoptr(GUri) uri = from ? g_uri_parse(from, G_URI_FLAGS_NONE, NULL) : NULL;
    const char *host = uri ? g_uri_get_host(uri) : NULL;
    guint port = uri && pf->opts->migrate_uri && g_uri_get_port(uri) > 0 ? g_uri_get_port(uri)
                                                                          : MIGRATION_PORT_FIRST;
    g_autoptr(GSocketClient) client = g_socket_client_new();
    g_autoptr(GSocketConnection) conn = NULL;
    g_autoptr(GError) error = NULL;

    if (!host || !*host) {
        add(pf, "migration-port", ORCH_CHECK_SKIP, "no address for the destination's data port");
        return;
    }
    g_socket_client_set_timeout(client, PROBE_TIMEOUT_S);
    conn = g_socket_client_connect_to_host(client, host, port, NULL, &error);
    if (conn)
        add(pf, "migration-port", ORCH_CHECK_PASS, "%s port %u accepts connections", host, port);
    else if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED))
        add(pf, "migration-port", ORCH_CHECK_PASS,
            "%s answers on port %u (refused: nothing listens before a migration, no firewall "
            "drops it)",
            host, port);
    else
        add(pf, "migration-port", ORCH_CHECK_FAIL, "%s port %u is not reachable: %s", host, port,
            error->message);
}

/* The destination's hotmigd answers (the client, owned), or NULL with the remaining checks marked
 * as needing it. */
static OrchHotmigdClient *check_hotmigd(Preflight *pf)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(OrchHotmigdClient) vfd = NULL;
    g_autoptr(OrchHotmigdHostInfo) host = NULL;

    vfd = orch_options_open_hotmigd(pf->opts, pf->opts->hotmigd_url, "destination", &error);
    host = vfd ? orch_hotmigd_client_host(vfd, &error) : NULL;
    if (!host) {
        add(pf, "hotmigd", ORCH_CHECK_FAIL, "%s", error->message);
        add(pf, "files", ORCH_CHECK_SKIP, "needs the destination's hotmigd");
        add(pf, "target-vf", ORCH_CHECK_SKIP, "needs the destination's hotmigd");
        return NULL;
    }
    add(pf, "hotmigd", ORCH_CHECK_PASS,
        "hotmigd %s of host '%s' answers at %s: %u VF(s) in its pool, %u free", host->version,
        host->name, vfd->url, host->pool_size, host->counts[ORCH_VF_STATE_FREE]);
    return g_steal_pointer(&vfd);
}

/* The destination has every host file the running domain uses. */
static void check_files(Preflight *pf, OrchHotmigdClient *vfd)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(XmlDomainNeeds) needs = NULL;
    g_autoptr(GPtrArray) want = NULL;
    g_autoptr(GPtrArray) missing = NULL;

    if (!pf->dom) {
        add(pf, "files", ORCH_CHECK_SKIP, "no running domain to read the files of");
        return;
    }
    needs = xml_domain_get_needs(pf->dom);
    want = g_ptr_array_new();
    for (guint i = 0; i < needs->paths->len; i++)
        g_ptr_array_add(want, g_ptr_array_index(needs->paths, i));
    g_ptr_array_add(want, NULL);
    if (needs->paths->len == 0)
        add(pf, "files", ORCH_CHECK_PASS, "the domain uses no host file");
    else if (!(missing = orch_hotmigd_client_files_missing(
                   vfd, (const char *const *)want->pdata, &error)))
        add(pf, "files", ORCH_CHECK_FAIL, "%s", error->message);
    else if (missing->len) {
        g_ptr_array_add(missing, NULL);
        g_autofree char *list = g_strjoinv("', '", (char **)missing->pdata);

        add(pf, "files", ORCH_CHECK_FAIL, "the destination lacks %u of the domain's %u file(s): '%s'",
            missing->len - 1, needs->paths->len, list);
    } else
        add(pf, "files", ORCH_CHECK_PASS, "the destination has the domain's %u file(s)",
            needs->paths->len);
}

/* The destination's pool has a VF for each of the domain's now (none is leased). */
static void check_target_vf(Preflight *pf, OrchHotmigdClient *vfd)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) pool = NULL;
    g_autoptr(GHashTable) taken = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GString) chosen = g_string_new(NULL);

    if (!pf->vfs) {
        add(pf, "target-vf", ORCH_CHECK_SKIP, "the domain's VFs are unknown");
        return;
    }
    if (!pf->vfs->len) {
        add(pf, "target-vf", ORCH_CHECK_SKIP, "the domain has no VF");
        return;
    }
    if (!pf->src) {
        add(pf, "target-vf", ORCH_CHECK_SKIP, "needs the source host");
        return;
    }
    pool = orch_hotmigd_client_list(vfd, &error);
    if (!pool) {
        add(pf, "target-vf", ORCH_CHECK_FAIL, "%s", error->message);
        return;
    }
    for (guint i = 0; i < pf->vfs->len; i++) {
        XmlVf *vf = g_ptr_array_index(pf->vfs, i);
        g_autofree char *why = NULL;
        const char *id = choose(pf, vf, pool, taken, &why);

        if (!id) {
            add(pf, "target-vf", ORCH_CHECK_FAIL, "no VF for '%s' of '%s' on the destination: %s",
                vf->alias, pf->opts->domain, why);
            return;
        }
        g_string_append_printf(chosen, "%s%s -> %s", i ? ", " : "", vf->alias, id);
    }
    add(pf, "target-vf", ORCH_CHECK_PASS, "leasable now: %s", chosen->str);
}

void orch_preflight_check_target(Preflight *pf)
{
    g_autoptr(OrchHotmigdClient) vfd = NULL;

    if (!pf->src) {
        add(pf, "migration-port", ORCH_CHECK_SKIP, "the source host failed");
        add(pf, "hotmigd", ORCH_CHECK_SKIP, "the source host failed (the destination's is %s)",
            pf->opts->hotmigd_url ? pf->opts->hotmigd_url : "unknown");
        add(pf, "files", ORCH_CHECK_SKIP, "the source host failed");
        add(pf, "target-vf", ORCH_CHECK_SKIP, "the source host failed");
        return;
    }
    check_migration_port(pf);
    vfd = check_hotmigd(pf);
    if (!vfd)
        return;
    check_files(pf, vfd);
    check_target_vf(pf, vfd);
}
