/* A fake host for hotmigd's pool; see pool-fake-host.h. */
#include "pool-fake-host.h"

static HotmigdPoolPciVf *vf_copy(const HotmigdPoolPciVf *vf)
{
    HotmigdPoolPciVf *copy = g_new0(HotmigdPoolPciVf, 1);

    copy->address = g_strdup(vf->address);
    copy->pf_address = g_strdup(vf->pf_address);
    copy->vf_index = vf->vf_index;
    copy->vendor_id = vf->vendor_id;
    copy->device_id = vf->device_id;
    copy->driver = g_strdup(vf->driver);
    copy->pf_netdev = g_strdup(vf->pf_netdev);
    return copy;
}

HotmigdPoolPciVf *fake_vf(const char *address, const char *pf, guint index, guint vendor,
                          guint device, const char *driver)
{
    HotmigdPoolPciVf *vf = g_new0(HotmigdPoolPciVf, 1);

    vf->address = g_strdup(address);
    vf->pf_address = g_strdup(pf);
    vf->vf_index = index;
    vf->vendor_id = vendor;
    vf->device_id = device;
    vf->driver = g_strdup(driver);
    vf->pf_netdev = g_strdup("ib0");
    return vf;
}

void fake_host_add_pf(FakeHost *host, const char *pf, guint n, guint vendor, guint device)
{
    GPtrArray *vfs = g_ptr_array_new_with_free_func((GDestroyNotify)hotmigd_pool_pci_vf_free);

    for (guint i = 0; i < n; i++) {
        g_autofree char *addr = g_strdup_printf("%.8s%02x.%x", pf, 1 + i / 8, i % 8);

        g_ptr_array_add(vfs, fake_vf(addr, pf, i, vendor, device, "mlx5_core"));
    }
    g_hash_table_insert(host->pfs, g_strdup(pf), vfs);
}

FakeHost *fake_host_new(void)
{
    FakeHost *host = g_new0(FakeHost, 1);

    host->pfs =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_ptr_array_unref);
    host->vfs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                      (GDestroyNotify)hotmigd_pool_pci_vf_free);
    host->netdevs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    host->domains = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    return host;
}

/* Every call of the host's ops starts here. */
static void fake_called(FakeHost *host)
{
    g_atomic_int_inc(&host->calls);
    if (host->main_thread && g_thread_self() == host->main_thread)
        g_atomic_int_inc(&host->main_thread_calls);
}

static void fake_free(gpointer data)
{
    FakeHost *host = data;

    g_hash_table_unref(host->pfs);
    g_hash_table_unref(host->vfs);
    g_hash_table_unref(host->netdevs);
    g_hash_table_unref(host->domains);
    g_free(host->ib_pf_netdev);
    g_free(host->vfio_address);
    g_free(host);
}

static GPtrArray *fake_pf_vfs(gpointer data, const char *pf, GError **error)
{
    FakeHost *host = data;
    GPtrArray *vfs = g_hash_table_lookup(host->pfs, pf);
    GPtrArray *out;

    fake_called(host);
    if (!vfs) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "no PF '%s' in sysfs", pf);
        return NULL;
    }
    out = g_ptr_array_new_with_free_func((GDestroyNotify)hotmigd_pool_pci_vf_free);
    for (guint i = 0; i < vfs->len; i++)
        g_ptr_array_add(out, vf_copy(g_ptr_array_index(vfs, i)));
    return out;
}

static HotmigdPoolPciVf *fake_vf_read(gpointer data, const char *address, GError **error)
{
    FakeHost *host = data;
    const HotmigdPoolPciVf *vf = g_hash_table_lookup(host->vfs, address);

    fake_called(host);
    if (!vf) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "no PCI function '%s' in sysfs", address);
        return NULL;
    }
    return vf_copy(vf);
}

static gboolean fake_netdev_exists(gpointer data, const char *name)
{
    FakeHost *host = data;

    fake_called(host);
    return g_hash_table_contains(host->netdevs, name);
}

static GHashTable *fake_domains_using(gpointer data, GError **error)
{
    FakeHost *host = data;
    GHashTable *out;
    GHashTableIter it;
    gpointer k, v;

    fake_called(host);
    if (host->domains_fail) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE,
                    "libvirt at 'test:///fake' does not answer");
        return NULL;
    }
    out = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_hash_table_iter_init(&it, host->domains);
    while (g_hash_table_iter_next(&it, &k, &v))
        g_hash_table_insert(out, g_strdup(k), g_strdup(v));
    return out;
}

static gboolean fake_ib_identity(gpointer data, const HotmigdPoolPciVf *vf, guint64 node_guid,
                                 guint64 port_guid, char **ret_note, GError **error)
{
    FakeHost *host = data;

    fake_called(host);
    host->ib_calls++;
    if (host->ib_fail) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NETLINK, "injected: netlink said no");
        return FALSE;
    }
    g_free(host->ib_pf_netdev);
    host->ib_pf_netdev = g_strdup(vf->pf_netdev);
    host->ib_vf_index = vf->vf_index;
    host->ib_node = node_guid;
    host->ib_port = port_guid;
    *ret_note = NULL;
    return TRUE;
}

static gboolean fake_ib_identity_read(gpointer data, const HotmigdPoolPciVf *vf,
                                      guint64 *ret_node_guid, guint64 *ret_port_guid,
                                      GError **error)
{
    FakeHost *host = data;

    fake_called(host);
    if (!host->kernel_node || !host->kernel_port) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_UNKNOWN,
                    "The kernel does not report the GUIDs of VF %u of '%s'", vf->vf_index,
                    vf->pf_netdev);
        return FALSE;
    }
    *ret_node_guid = host->kernel_node;
    *ret_port_guid = host->kernel_port;
    return TRUE;
}

static gboolean fake_vfio_bind(gpointer data, const char *address, gboolean *ret_changed,
                               char **ret_previous_driver, GError **error)
{
    FakeHost *host = data;

    fake_called(host);
    host->vfio_calls++;
    g_free(host->vfio_address);
    host->vfio_address = g_strdup(address);
    *ret_changed = host->vfio_calls == 1;
    *ret_previous_driver = g_strdup(host->vfio_calls == 1 ? "mlx5_core" : "vfio-pci");
    return TRUE;
}

const HotmigdHostOps fake_host_ops = {
    .pf_vfs = fake_pf_vfs,
    .vf_read = fake_vf_read,
    .netdev_exists = fake_netdev_exists,
    .domains_using = fake_domains_using,
    .ib_identity = fake_ib_identity,
    .ib_identity_read = fake_ib_identity_read,
    .vfio_bind = fake_vfio_bind,
    .free = fake_free,
};
