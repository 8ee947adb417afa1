/* The host hotmigd runs on, as the pool sees it (HotmigdHostOps): SR-IOV VFs from sysfs
 * (hm-hotplug's reader), network devices under class/net, the domains using PCI devices from
 * libvirt (through the libvirt adapter), GUIDs through netlink (a stand-in's through the
 * directory that stands in for its PF driver, [pool] standin-guids), vfio-pci through sysfs.
 * HOTMIG_FAULT_INJECT's netlink_ rules fail chosen GUID calls of either (label "local"). */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/pool.h"

#include <sys/stat.h>

#include "engine/virt.h"
#include "xml/xml.h"

/* The host's questions to libvirt go to one thread of its own over one connection, kept open
 * (reopened after a failure); the caller waits libvirt_timeout_ms at most. A libvirtd that
 * hangs holds that one thread: while its question is unanswered, later callers are told so at
 * once instead of each waiting, and no other thread is started (issue 15, item 7). The state
 * is shared with the thread, which may outlive the host when libvirt never answers. */
typedef struct {
    gint refs;
    GMutex lock;
    GCond cond;
    char *uri;             /* NULL: libvirt's default */
    OrchVirtOpenFunc open; /* opens the connection (host_open_libvirt() or a test's) */
    guint64 asked, answered; /* questions asked, answered (generations) */
    gint64 asked_at;       /* monotonic, when the question in flight was taken */
    gboolean busy;         /* the thread is inside libvirt */
    gboolean quit;
    GHashTable *result;    /* the latest answer (PCI address -> domain), or NULL */
    GError *error;         /* or why it failed */
} LibvirtAsker;

typedef struct {
    char *sysfs_root;
    guint vfio_timeout_ms;
    guint libvirt_timeout_ms;
    HotplugNetlink *nl;         /* opened on first use */
    char *standin_guids;        /* [pool] standin-guids, or NULL: stand-ins have no IB identity */
    HotplugNetlink *standin_nl; /* over standin_guids, opened on first use */
    LibvirtAsker *asker;
    GThread *asker_thread; /* started on first use */
} VfdHost;

static void asker_unref(LibvirtAsker *a)
{
    if (!g_atomic_int_dec_and_test(&a->refs))
        return;
    g_mutex_clear(&a->lock);
    g_cond_clear(&a->cond);
    g_free(a->uri);
    g_clear_pointer(&a->result, g_hash_table_unref);
    g_clear_error(&a->error);
    g_free(a);
}

/* The host's libvirt, opened where every connection is (engine/connector.c). */
static OrchVirt *host_open_libvirt(const char *uri, const char *label, gpointer opaque,
                                   GError **error)
{
    return orch_connector_open_virt(NULL, uri, label, error);
}

gpointer hotmigd_host_new(const char *sysfs_root, const char *libvirt_uri, guint vfio_timeout_ms,
                          guint libvirt_timeout_ms)
{
    VfdHost *host = g_new0(VfdHost, 1);

    g_return_val_if_fail(sysfs_root != NULL, NULL);
    host->sysfs_root = g_strdup(sysfs_root);
    host->vfio_timeout_ms = vfio_timeout_ms;
    host->libvirt_timeout_ms = libvirt_timeout_ms;
    host->asker = g_new0(LibvirtAsker, 1);
    host->asker->refs = 1;
    g_mutex_init(&host->asker->lock);
    g_cond_init(&host->asker->cond);
    host->asker->uri = libvirt_uri && *libvirt_uri ? g_strdup(libvirt_uri) : NULL;
    host->asker->open = host_open_libvirt;
    return host;
}

void hotmigd_host_set_standin_guids(gpointer data, const char *dir)
{
    VfdHost *host = data;

    g_return_if_fail(host && !host->standin_nl);
    g_free(host->standin_guids);
    host->standin_guids = dir && *dir ? g_strdup(dir) : NULL;
}

void hotmigd_host_set_virt_open(gpointer data, OrchVirtOpenFunc open)
{
    VfdHost *host = data;

    g_return_if_fail(host && open && !host->asker_thread);
    host->asker->open = open;
}

static void host_free(gpointer data)
{
    VfdHost *host = data;

    if (!host)
        return;
    hotplug_netlink_free(host->nl);
    hotplug_netlink_free(host->standin_nl);
    g_free(host->standin_guids);
    g_mutex_lock(&host->asker->lock);
    host->asker->quit = TRUE;
    g_cond_broadcast(&host->asker->cond);
    /* A thread stuck in libvirt is left to finish on its own (it holds its reference). */
    if (host->asker_thread && !host->asker->busy) {
        g_mutex_unlock(&host->asker->lock);
        g_thread_join(g_steal_pointer(&host->asker_thread));
    } else {
        g_mutex_unlock(&host->asker->lock);
        g_clear_pointer(&host->asker_thread, g_thread_unref);
    }
    asker_unref(host->asker);
    g_free(host->sysfs_root);
    g_free(host);
}

/* hm-hotplug's errors in ORCH_ERROR, message kept. */
static void host_propagate(GError **error, GError *local)
{
    g_set_error_literal(error, ORCH_ERROR,
                        g_error_matches(local, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID)
                            ? ORCH_ERROR_INVALID
                            : ORCH_ERROR_FAILED,
                        local->message);
    g_error_free(local);
}

static HotmigdPoolPciVf *host_vf_from(const HotplugPciFunction *fn, const char *pf_netdev)
{
    HotmigdPoolPciVf *vf = g_new0(HotmigdPoolPciVf, 1);

    vf->address = g_strdup(fn->address);
    vf->pf_address = g_strdup(fn->pf_address);
    vf->vf_index = fn->vf_index;
    vf->vendor_id = fn->vendor_id;
    vf->device_id = fn->device_id;
    vf->driver = g_strdup(fn->driver);
    vf->pf_netdev = g_strdup(pf_netdev);
    return vf;
}

static GPtrArray *host_pf_vfs(gpointer data, const char *pf, GError **error)
{
    VfdHost *host = data;
    GError *local = NULL;
    g_autoptr(HotplugPciFunction) fn = hotplug_sysfs_read(host->sysfs_root, pf, &local);
    GPtrArray *out;

    if (!fn) {
        host_propagate(error, local);
        return NULL;
    }
    if (fn->pf_address) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "'%s' is a VF (of PF '%s'), not a PF: list it in [pool] vfs", pf,
                    fn->pf_address);
        return NULL;
    }
    out = g_ptr_array_new_with_free_func((GDestroyNotify)hotmigd_pool_pci_vf_free);
    for (guint i = 0; i < fn->vfs->len; i++)
        g_ptr_array_add(out, host_vf_from(g_ptr_array_index(fn->vfs, i), fn->netdev));
    return out;
}

static HotmigdPoolPciVf *host_vf_read(gpointer data, const char *address, GError **error)
{
    VfdHost *host = data;
    GError *local = NULL;
    g_autoptr(HotplugPciFunction) fn = hotplug_sysfs_read(host->sysfs_root, address, &local);
    g_autoptr(HotplugPciFunction) pf = NULL;

    if (!fn) {
        host_propagate(error, local);
        return NULL;
    }
    if (!fn->pf_address) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "'%s' is a PF, not a VF: list it in [pool] pfs", address);
        return NULL;
    }
    /* The PF's network device is where GUIDs are set; a PF that cannot be read leaves it
     * unknown (ib-identity then says so). */
    pf = hotplug_sysfs_read(host->sysfs_root, fn->pf_address, &local);
    if (!pf) {
        g_debug("VF '%s': its PF '%s' cannot be read: %s", address, fn->pf_address, local->message);
        g_clear_error(&local);
    }
    return host_vf_from(fn, pf ? pf->netdev : NULL);
}

static gboolean host_netdev_exists(gpointer data, const char *name)
{
    VfdHost *host = data;
    g_autofree char *path = g_build_filename(host->sysfs_root, "class", "net", name, NULL);
    struct stat st;

    return lstat(path, &st) == 0;
}

/* The domains using PCI devices and stand-in network devices, from libvirt (ORCH_ERROR_UNAVAILABLE naming the URI). */
static GHashTable *query_libvirt(OrchVirt *virt, const char *libvirt_uri, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(GPtrArray) xmls = NULL;
    g_autoptr(GHashTable) out = NULL;
    const char *uri = libvirt_uri ? libvirt_uri : "(default URI)";

    if (!(xmls = orch_virt_domain_list_xml(virt, &local))) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE, "libvirt at '%s': %s", uri,
                    local->message);
        return NULL;
    }
    out = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    for (guint i = 0; i < xmls->len; i++) {
        g_autoptr(XmlDomain) dom = xml_domain_parse(g_ptr_array_index(xmls, i), &local);
        g_autoptr(GPtrArray) pcis = NULL;

        if (!dom) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE,
                        "libvirt at '%s' gave a domain XML that does not parse: %s", uri,
                        local->message);
            return NULL;
        }
        pcis = xml_domain_list_host_pci(dom);
        for (guint p = 0; p < pcis->len; p++)
            g_hash_table_insert(out, g_strdup(g_ptr_array_index(pcis, p)),
                                g_strdup(xml_domain_get_name(dom)));
        /* The stand-ins' network devices too (the emulated lab's VFs). */
        {
            g_autoptr(GPtrArray) vfs = xml_domain_find_vfs(dom, NULL, NULL);

            for (guint v = 0; vfs && v < vfs->len; v++) {
                XmlVf *vf = g_ptr_array_index(vfs, v);

                if (vf->kind == XML_VF_KIND_STANDIN && vf->netdev)
                    g_hash_table_insert(out, g_strdup(vf->netdev),
                                        g_strdup(xml_domain_get_name(dom)));
            }
        }
    }
    return g_steal_pointer(&out);
}

/* The asker's thread: one question at a time over one connection, for the host's life. */
static gpointer asker_thread(gpointer data)
{
    LibvirtAsker *a = data;
    g_autoptr(OrchVirt) virt = NULL;

    g_mutex_lock(&a->lock);
    for (;;) {
        GError *local = NULL;
        GHashTable *result = NULL;
        guint64 gen;

        while (!a->quit && a->answered == a->asked)
            g_cond_wait(&a->cond, &a->lock);
        if (a->quit)
            break;
        gen = a->asked;
        a->busy = TRUE;
        a->asked_at = g_get_monotonic_time();
        g_mutex_unlock(&a->lock);

        if (!virt) {
            virt = a->open(a->uri, "local", NULL, &local);
            if (!virt)
                g_prefix_error(&local, "libvirt at '%s': ", a->uri ? a->uri : "(default URI)");
        }
        if (virt) {
            result = query_libvirt(virt, a->uri, &local);
            if (!result) /* a broken connection is opened again for the next question */
                g_clear_pointer(&virt, orch_virt_free);
        }

        g_mutex_lock(&a->lock);
        a->busy = FALSE;
        a->answered = gen;
        g_clear_pointer(&a->result, g_hash_table_unref);
        g_clear_error(&a->error);
        a->result = result;
        a->error = local;
        g_cond_broadcast(&a->cond);
    }
    g_mutex_unlock(&a->lock);
    g_clear_pointer(&virt, orch_virt_free);
    asker_unref(a);
    return NULL;
}

/* A copy of @table (PCI address -> domain). */
static GHashTable *domains_copy(GHashTable *table)
{
    GHashTable *out = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    GHashTableIter it;
    gpointer k, v;

    g_hash_table_iter_init(&it, table);
    while (g_hash_table_iter_next(&it, &k, &v))
        g_hash_table_insert(out, g_strdup(k), g_strdup(v));
    return out;
}

static GHashTable *host_domains_using(gpointer data, GError **error)
{
    VfdHost *host = data;
    LibvirtAsker *a = host->asker;
    gint64 now = g_get_monotonic_time();
    gint64 deadline = now + host->libvirt_timeout_ms * G_TIME_SPAN_MILLISECOND;
    const char *uri = a->uri ? a->uri : "(default URI)";
    GHashTable *result = NULL;
    guint64 gen;

    g_mutex_lock(&a->lock);
    if (a->busy && now - a->asked_at > host->libvirt_timeout_ms * G_TIME_SPAN_MILLISECOND) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE,
                    "libvirt at '%s' has not answered a question asked %" G_GINT64_FORMAT
                    " s ago",
                    uri, (now - a->asked_at) / G_TIME_SPAN_SECOND);
        g_mutex_unlock(&a->lock);
        return NULL;
    }
    if (!host->asker_thread) {
        g_atomic_int_inc(&a->refs);
        host->asker_thread = g_thread_new("libvirt", asker_thread, a);
    }
    /* A question is asked anew: one in flight was asked before this caller came. */
    gen = ++a->asked;
    g_cond_broadcast(&a->cond);
    while (a->answered < gen && g_cond_wait_until(&a->cond, &a->lock, deadline))
        ;
    if (a->answered < gen)
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE,
                    "libvirt at '%s' did not list its domains within %u ms", uri,
                    host->libvirt_timeout_ms);
    else if (a->result)
        result = domains_copy(a->result);
    else
        g_set_error_literal(error, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE, a->error->message);
    g_mutex_unlock(&a->lock);
    return result;
}

/* @adapter wrapped for HOTMIG_FAULT_INJECT's netlink_ rules when the environment has any
 * (label "local"); taken over, also on failure. */
static HotplugNetlink *host_netlink_faulty(HotplugNetlink *adapter, GError **error)
{
    const char *spec = g_getenv(ORCH_FAULT_ENV);

    if (!adapter || !spec || !*spec)
        return adapter;
    g_warning("Fault injection active on the host's GUID calls: %s=%s", ORCH_FAULT_ENV, spec);
    return hotplug_netlink_fault_wrap(adapter, "local", spec, error);
}

/* The host's netlink adapter (opened on first use), or NULL with @error. Borrowed. */
static HotplugNetlink *host_netlink(VfdHost *host, GError **error)
{
    if (!host->nl)
        host->nl = host_netlink_faulty(hotplug_netlink_new(error), error);
    return host->nl;
}

static gboolean host_ib_identity(gpointer data, const HotmigdPoolPciVf *vf, guint64 node_guid,
                                 guint64 port_guid, char **ret_note, GError **error)
{
    VfdHost *host = data;
    HotplugNetlink *nl;

    if (!vf->pf_netdev) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED,
                    "its PF '%s' has no network device to set the GUIDs through", vf->pf_address);
        return FALSE;
    }
    if (!(nl = host_netlink(host, error)))
        return FALSE;
    return hotplug_ib_identity_apply(nl, vf->pf_netdev, vf->vf_index, node_guid, port_guid,
                                     ret_note, error);
}

static gboolean host_ib_identity_read(gpointer data, const HotmigdPoolPciVf *vf,
                                      guint64 *ret_node_guid, guint64 *ret_port_guid,
                                      GError **error)
{
    VfdHost *host = data;
    HotplugNetlink *nl;

    if (!vf->pf_netdev) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_UNKNOWN,
                    "its PF '%s' has no network device to read the GUIDs through",
                    vf->pf_address);
        return FALSE;
    }
    if (!(nl = host_netlink(host, error)))
        return FALSE;
    return hotplug_ib_identity_read(nl, vf->pf_netdev, vf->vf_index, ret_node_guid,
                                    ret_port_guid, error);
}

/* The stand-ins' adapter (opened on first use) in *ret_nl (borrowed), NULL when [pool]
 * standin-guids is not set; FALSE with @error when it cannot be opened. */
static gboolean host_standin_netlink(VfdHost *host, HotplugNetlink **ret_nl, GError **error)
{
    if (!host->standin_nl && host->standin_guids &&
        !(host->standin_nl =
              host_netlink_faulty(hotplug_netlink_standin_new(host->standin_guids), error)))
        return FALSE;
    *ret_nl = host->standin_nl;
    return TRUE;
}

/* A stand-in is PF @netdev with one VF, index 0 (hotplug_netlink_standin_new()). */
static gboolean host_standin_ib_identity(gpointer data, const char *netdev, guint64 node_guid,
                                         guint64 port_guid, char **ret_note, GError **error)
{
    HotplugNetlink *nl = NULL;

    if (!host_standin_netlink(data, &nl, error))
        return FALSE;
    if (!nl) {
        *ret_note = g_strdup_printf(
            "'%s' is a stand-in network device: it has no IB identity, nothing set", netdev);
        return TRUE;
    }
    return hotplug_ib_identity_apply(nl, netdev, 0, node_guid, port_guid, ret_note, error);
}

static gboolean host_standin_ib_identity_read(gpointer data, const char *netdev,
                                              guint64 *ret_node_guid, guint64 *ret_port_guid,
                                              GError **error)
{
    HotplugNetlink *nl = NULL;

    if (!host_standin_netlink(data, &nl, error))
        return FALSE;
    if (!nl) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_UNKNOWN,
                    "stand-in '%s' has no IB identity ([pool] standin-guids is not set)", netdev);
        return FALSE;
    }
    return hotplug_ib_identity_read(nl, netdev, 0, ret_node_guid, ret_port_guid, error);
}

static gboolean host_vfio_bind(gpointer data, const char *address, gboolean *ret_changed,
                               char **ret_previous_driver, GError **error)
{
    VfdHost *host = data;

    return hotplug_vfio_bind(host->sysfs_root, address, host->vfio_timeout_ms, ret_changed,
                             ret_previous_driver, error);
}

const HotmigdHostOps hotmigd_host_ops = {
    .pf_vfs = host_pf_vfs,
    .vf_read = host_vf_read,
    .netdev_exists = host_netdev_exists,
    .domains_using = host_domains_using,
    .ib_identity = host_ib_identity,
    .ib_identity_read = host_ib_identity_read,
    .standin_ib_identity = host_standin_ib_identity,
    .standin_ib_identity_read = host_standin_ib_identity_read,
    .vfio_bind = host_vfio_bind,
    .free = host_free,
};
