/* Unit tests for SR-IOV discovery (hotplug/sysfs.c) and the libpci adapter
 * (hotplug/pci-libpci.c): the fixture trees of tests/fixtures/sysfs (copied to a temp dir, so
 * a test may break them and can assert that discovery writes nothing), the lspci dumps of
 * tests/fixtures/lspci, the bad cases, libpci's errors coming back as GErrors, and the
 * hotmig-sriov tool. Environment: HM_FIXTURES (tests/fixtures), HM_SRIOV_TOOL (the binary). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-glib/json-glib.h>

#include "hotplug/hotplug.h"
#include "hotplug/pci-priv.h"
#include "hotplug/sysfs-priv.h"

static const char *fixtures;
static char *pci_ids_path; /* tests/fixtures/pci.ids */

/* ---- fixture trees ----------------------------------------------------------------------- */

/* Writes @len bytes (-1: a string) to @path, replacing what was there. No fsync, no rename:
 * g_file_set_contents() would fsync every file of every copy. */
static void write_file(const char *path, const char *data, gssize len)
{
    gsize n = len < 0 ? strlen(data) : (gsize)len;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    if (fd < 0)
        fail_msg("open '%s': %s", path, g_strerror(errno));
    if (n > 0 && write(fd, data, n) != (ssize_t)n)
        fail_msg("write '%s': %s", path, g_strerror(errno));
    close(fd);
}

static void copy_tree(const char *src, const char *dst)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GDir) dir = g_dir_open(src, 0, &error);
    const char *name;

    if (!dir)
        fail_msg("%s", error->message);
    assert_int_equal(mkdir(dst, 0755), 0);
    while ((name = g_dir_read_name(dir))) {
        g_autofree char *from = g_build_filename(src, name, NULL);
        g_autofree char *to = g_build_filename(dst, name, NULL);
        struct stat st;

        assert_int_equal(lstat(from, &st), 0);
        if (S_ISLNK(st.st_mode)) {
            g_autofree char *target = g_file_read_link(from, NULL);

            assert_non_null(target);
            assert_int_equal(symlink(target, to), 0);
        } else if (S_ISDIR(st.st_mode)) {
            copy_tree(from, to);
        } else {
            g_autofree char *data = NULL;
            gsize len;

            assert_true(g_file_get_contents(from, &data, &len, NULL));
            write_file(to, data, (gssize)len);
        }
    }
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void remove_tree(const char *path)
{
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A copy of tests/fixtures/sysfs/@name in a new temp dir, its sysfs root returned (owned). */
typedef struct {
    char *tmp;
    char *root;
} Fixture;

static Fixture *fixture_new(const char *name)
{
    Fixture *fx = g_new0(Fixture, 1);
    g_autofree char *src = g_build_filename(fixtures, "sysfs", name, NULL);

    fx->tmp = g_dir_make_tmp("hm-sysfs-XXXXXX", NULL);
    assert_non_null(fx->tmp);
    fx->root = g_build_filename(fx->tmp, name, NULL);
    copy_tree(src, fx->root);
    return fx;
}

static void fixture_free(Fixture *fx)
{
    if (!fx)
        return;
    remove_tree(fx->tmp);
    g_free(fx->tmp);
    g_free(fx->root);
    g_free(fx);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Fixture, fixture_free)

/* Path of @rel (relative to the sysfs root) in @fx. Owned. */
static char *fx_path(const Fixture *fx, const char *rel)
{
    return g_build_filename(fx->root, rel, NULL);
}

static void fx_write(const Fixture *fx, const char *rel, const char *content, gssize len)
{
    g_autofree char *path = fx_path(fx, rel);

    /* Through the links as sysfs does: write the file the path leads to. */
    write_file(path, content, len);
}

static void fx_unlink(const Fixture *fx, const char *rel)
{
    g_autofree char *path = fx_path(fx, rel);

    if (unlink(path) != 0)
        fail_msg("unlink '%s': %s", path, g_strerror(errno));
}

static void fx_symlink(const Fixture *fx, const char *rel, const char *target)
{
    g_autofree char *path = fx_path(fx, rel);

    unlink(path);
    if (symlink(target, path) != 0)
        fail_msg("symlink '%s': %s", path, g_strerror(errno));
}

/* Overwrites @len bytes at @offset of the file at @rel. */
static void fx_patch(const Fixture *fx, const char *rel, guint offset, const void *bytes, gsize len)
{
    g_autofree char *path = fx_path(fx, rel);
    int fd = open(path, O_WRONLY | O_CLOEXEC);

    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, bytes, len, offset), (ssize_t)len);
    close(fd);
}

static void fx_patch16(const Fixture *fx, const char *rel, guint offset, guint16 value)
{
    guint8 le[2] = {value & 0xff, value >> 8};

    fx_patch(fx, rel, offset, le, 2);
}

static int snapshot_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw);
static GString *snapshot_out;

/* Every path of the tree with its kind and content or link target, for "nothing written". */
static char *tree_snapshot(const char *root)
{
    char *result;

    snapshot_out = g_string_new(NULL);
    assert_int_equal(nftw(root, snapshot_entry, 16, FTW_PHYS), 0);
    result = g_string_free(snapshot_out, FALSE);
    snapshot_out = NULL;
    return result;
}

static int snapshot_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    g_string_append_printf(snapshot_out, "%s %o %" G_GINT64_FORMAT " %" G_GINT64_FORMAT "\n", path,
                           (unsigned)st->st_mode, (gint64)st->st_size, (gint64)st->st_mtime);
    if (S_ISLNK(st->st_mode)) {
        g_autofree char *target = g_file_read_link(path, NULL);
        g_string_append_printf(snapshot_out, "-> %s\n", target ? target : "?");
    } else if (S_ISREG(st->st_mode)) {
        g_autofree char *data = NULL;
        gsize len;

        if (g_file_get_contents(path, &data, &len, NULL)) {
            g_autofree char *sum =
                g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)data, len);
            g_string_append_printf(snapshot_out, "= %s\n", sum);
        }
    }
    return 0;
}

/* ---- helpers ----------------------------------------------------------------------------- */

static const HotplugPciFunction *pf_at(GPtrArray *pfs, guint i)
{
    assert_true(i < pfs->len);
    return g_ptr_array_index(pfs, i);
}

static const HotplugPciFunction *vf_at(const HotplugPciFunction *pf, guint i)
{
    assert_non_null(pf->vfs);
    assert_true(i < pf->vfs->len);
    return g_ptr_array_index(pf->vfs, i);
}

static void assert_str_or_null(const char *got, const char *want)
{
    if (!want)
        assert_null(got);
    else
        assert_string_equal(got, want);
}

/* The VF's fields that every VF shares with its PF's description. */
static void check_vf(const HotplugPciFunction *pf, guint index, const char *address,
                     const char *driver, int iommu, const char *netdev, guint link_type)
{
    const HotplugPciFunction *vf = vf_at(pf, index);

    assert_string_equal(vf->address, address);
    assert_string_equal(vf->pf_address, pf->address);
    assert_int_equal(vf->vf_index, index);
    assert_int_equal(vf->vendor_id, pf->vendor_id);
    assert_int_equal(vf->device_id, pf->vf_device_id);
    assert_str_or_null(vf->driver, driver);
    assert_int_equal(vf->iommu_group, iommu);
    assert_int_equal(vf->numa_node, pf->numa_node);
    assert_str_or_null(vf->netdev, netdev);
    assert_int_equal(vf->link_type, link_type);
    assert_int_equal(vf->total_vfs, 0);
    assert_int_equal(vf->num_vfs, 0);
    assert_non_null(vf->vfs);
    assert_int_equal(vf->vfs->len, 0);
    assert_null(vf->assigned_to);
    assert_false(vf->config_checked);
}

/* Lists @fx and checks that nothing in the tree changed. */
static GPtrArray *list_unchanged(const Fixture *fx)
{
    g_autofree char *before = tree_snapshot(fx->root);
    g_autofree char *after = NULL;
    g_autoptr(GError) error = NULL;
    GPtrArray *pfs = hotplug_sysfs_list_pfs(fx->root, &error);

    if (!pfs)
        fail_msg("%s", error->message);
    assert_null(error);
    after = tree_snapshot(fx->root);
    assert_string_equal(before, after);
    return pfs;
}

/* @call failed with @code and a message holding @substring and, when not NULL, @path. */
static void assert_error(const GError *error, int code, const char *substring, const char *path)
{
    assert_non_null(error);
    if (error->domain != HOTPLUG_ERROR || error->code != code)
        fail_msg("expected hotplug error %d, got %s %d: %s", code, g_quark_to_string(error->domain),
                 error->code, error->message);
    if (!strstr(error->message, substring))
        fail_msg("'%s' does not say '%s'", error->message, substring);
    if (path && !strstr(error->message, path))
        fail_msg("'%s' does not name '%s'", error->message, path);
}

static void list_fails(const Fixture *fx, const char *substring, const char *rel_path)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) pfs = hotplug_sysfs_list_pfs(fx->root, &error);
    g_autofree char *path = rel_path ? fx_path(fx, rel_path) : NULL;

    assert_null(pfs);
    assert_error(error, HOTPLUG_ERROR_SYSFS, substring, path);
}

/* ---- the good fixtures ------------------------------------------------------------------- */

static void test_cx4_eth(void **state)
{
    g_autoptr(Fixture) fx = fixture_new("cx4-eth");
    g_autoptr(GPtrArray) pfs = list_unchanged(fx);
    const HotplugPciFunction *pf0, *pf1;

    assert_int_equal(pfs->len, 2);
    pf0 = pf_at(pfs, 0);
    assert_string_equal(pf0->address, "0000:3b:00.0");
    assert_null(pf0->pf_address);
    assert_int_equal(pf0->vendor_id, 0x15b3);
    assert_int_equal(pf0->device_id, 0x1013);
    assert_string_equal(pf0->vendor_name, "Mellanox Technologies");
    assert_string_equal(pf0->device_name, "MT27700 Family [ConnectX-4]");
    assert_string_equal(pf0->driver, "mlx5_core");
    assert_int_equal(pf0->iommu_group, 40);
    assert_int_equal(pf0->numa_node, 0);
    assert_string_equal(pf0->netdev, "ens1f0");
    assert_int_equal(pf0->link_type, 1);
    assert_int_equal(pf0->total_vfs, 8);
    assert_int_equal(pf0->num_vfs, 2);
    assert_int_equal(pf0->vf_device_id, 0x1014);
    assert_int_equal(pf0->vf_offset, 2);
    assert_int_equal(pf0->vf_stride, 1);
    assert_true(pf0->config_checked);
    assert_null(pf0->assigned_to);
    assert_int_equal(pf0->vfs->len, 2);
    check_vf(pf0, 0, "0000:3b:00.2", "mlx5_core", 91, "ens1f0v0", 1);
    check_vf(pf0, 1, "0000:3b:00.3", "vfio-pci", 92, NULL, 0);
    assert_string_equal(vf_at(pf0, 0)->device_name, "MT27700 Family [ConnectX-4 Virtual Function]");

    pf1 = pf_at(pfs, 1);
    assert_string_equal(pf1->address, "0000:3b:00.1");
    assert_string_equal(pf1->netdev, "ens1f1");
    assert_int_equal(pf1->iommu_group, 41);
    assert_int_equal(pf1->total_vfs, 8);
    assert_int_equal(pf1->num_vfs, 0);
    assert_int_equal(pf1->vf_offset, 9);
    assert_int_equal(pf1->vf_device_id, 0x1014);
    assert_true(pf1->config_checked);
    assert_non_null(pf1->vfs);
    assert_int_equal(pf1->vfs->len, 0);
}

static void test_cx5_ib(void **state)
{
    g_autoptr(Fixture) fx = fixture_new("cx5-ib");
    g_autoptr(GPtrArray) pfs = list_unchanged(fx);
    const HotplugPciFunction *pf;

    assert_int_equal(pfs->len, 1);
    pf = pf_at(pfs, 0);
    assert_string_equal(pf->address, "0000:5e:00.0");
    assert_int_equal(pf->device_id, 0x1017);
    assert_string_equal(pf->device_name, "MT27800 Family [ConnectX-5]");
    assert_string_equal(pf->netdev, "ib0");
    assert_int_equal(pf->link_type, 32);
    assert_int_equal(pf->numa_node, 1);
    assert_int_equal(pf->iommu_group, 60);
    assert_int_equal(pf->total_vfs, 8);
    assert_int_equal(pf->num_vfs, 4);
    assert_int_equal(pf->vf_device_id, 0x1018);
    assert_int_equal(pf->vf_offset, 1);
    assert_true(pf->config_checked);
    assert_int_equal(pf->vfs->len, 4);
    check_vf(pf, 0, "0000:5e:00.1", "vfio-pci", 61, NULL, 0);
    check_vf(pf, 1, "0000:5e:00.2", "vfio-pci", 62, NULL, 0);
    check_vf(pf, 2, "0000:5e:00.3", "mlx5_core", 63, "ib1", 32);
    check_vf(pf, 3, "0000:5e:00.4", NULL, 64, NULL, 0);
    assert_string_equal(vf_at(pf, 3)->device_name, "MT27800 Family [ConnectX-5 Virtual Function]");
}

static void test_cx6_ib(void **state)
{
    g_autoptr(Fixture) fx = fixture_new("cx6-ib");
    g_autoptr(GPtrArray) pfs = list_unchanged(fx);
    const HotplugPciFunction *pf0, *pf1;

    assert_int_equal(pfs->len, 2);
    pf0 = pf_at(pfs, 0);
    pf1 = pf_at(pfs, 1);
    assert_string_equal(pf0->address, "0001:af:00.0");
    assert_string_equal(pf0->device_name, "MT28908 Family [ConnectX-6]");
    assert_int_equal(pf0->total_vfs, 16);
    assert_int_equal(pf0->num_vfs, 3);
    assert_int_equal(pf0->vf_device_id, 0x101c);
    check_vf(pf0, 0, "0001:af:00.2", "vfio-pci", 80, NULL, 0);
    check_vf(pf0, 1, "0001:af:00.3", "vfio-pci", 81, NULL, 0);
    check_vf(pf0, 2, "0001:af:00.4", "vfio-pci", 82, NULL, 0);
    /* PF 1's VFs start after the 16 of PF 0 (First VF Offset 17): the next slot. */
    assert_string_equal(pf1->address, "0001:af:00.1");
    assert_string_equal(pf1->netdev, "ib1");
    assert_int_equal(pf1->vf_offset, 17);
    assert_int_equal(pf1->num_vfs, 2);
    check_vf(pf1, 0, "0001:af:02.2", "mlx5_core", 90, "ib2", 32);
    check_vf(pf1, 1, "0001:af:02.3", "mlx5_core", 91, "ib3", 32);
    assert_string_equal(vf_at(pf1, 1)->device_name, "MT28908 Family [ConnectX-6 Virtual Function]");
}

static void test_cx7_ib(void **state)
{
    g_autoptr(Fixture) fx = fixture_new("cx7-ib");
    g_autoptr(GPtrArray) pfs = list_unchanged(fx);
    const HotplugPciFunction *pf;

    assert_int_equal(pfs->len, 1);
    pf = pf_at(pfs, 0);
    assert_string_equal(pf->address, "0000:17:00.0");
    assert_int_equal(pf->device_id, 0x1021);
    assert_string_equal(pf->device_name, "MT2910 Family [ConnectX-7]");
    assert_int_equal(pf->numa_node, -1);
    /* The driver's limit (sysfs) is below TotalVFs of the capability (16): accepted. */
    assert_int_equal(pf->total_vfs, 8);
    assert_int_equal(pf->num_vfs, 2);
    assert_int_equal(pf->vf_device_id, 0x101e);
    assert_true(pf->config_checked);
    check_vf(pf, 0, "0000:17:00.1", "vfio-pci", 21, NULL, 0);
    check_vf(pf, 1, "0000:17:00.2", "vfio-pci", 22, NULL, 0);
    assert_string_equal(vf_at(pf, 0)->device_name, "ConnectX Family mlx5Gen Virtual Function");
}

/* Laid out as a Linux 6.1 guest showed QEMU's emulated NVMe with 4 VFs, with the config space
 * captured there (tests/e2e/sysfs-nvme.sh): no IOMMU, no NUMA, VFs without a driver. */
static void test_qemu_nvme(void **state)
{
    g_autoptr(Fixture) fx = fixture_new("qemu-nvme");
    g_autoptr(GPtrArray) pfs = list_unchanged(fx);
    const HotplugPciFunction *pf;

    assert_int_equal(pfs->len, 1);
    pf = pf_at(pfs, 0);
    assert_string_equal(pf->address, "0000:09:00.0");
    assert_int_equal(pf->vendor_id, 0x1b36);
    assert_int_equal(pf->device_id, 0x0010);
    assert_string_equal(pf->vendor_name, "Red Hat, Inc.");
    assert_string_equal(pf->device_name, "QEMU NVM Express Controller");
    assert_string_equal(pf->driver, "nvme");
    assert_int_equal(pf->iommu_group, -1);
    assert_int_equal(pf->numa_node, -1);
    assert_null(pf->netdev);
    assert_int_equal(pf->link_type, 0);
    assert_int_equal(pf->total_vfs, 4);
    assert_int_equal(pf->num_vfs, 4);
    assert_int_equal(pf->vf_device_id, 0x0010);
    assert_int_equal(pf->vf_offset, 1);
    assert_int_equal(pf->vf_stride, 1);
    assert_true(pf->config_checked);
    for (guint i = 0; i < 4; i++) {
        g_autofree char *address = g_strdup_printf("0000:09:00.%u", i + 1);

        check_vf(pf, i, address, NULL, -1, NULL, 0);
    }
}

static void test_no_sriov(void **state)
{
    g_autoptr(Fixture) fx = fixture_new("no-sriov");
    g_autoptr(GPtrArray) pfs = list_unchanged(fx);

    assert_int_equal(pfs->len, 0);
}

/* ---- hotplug_sysfs_read ------------------------------------------------------------------ */

static void test_read_pf_and_vf(void **state)
{
    g_autoptr(Fixture) fx = fixture_new("cx4-eth");
    g_autoptr(GError) error = NULL;
    g_autoptr(HotplugPciFunction) pf = hotplug_sysfs_read(fx->root, "0000:3b:00.0", &error);
    g_autoptr(HotplugPciFunction) vf = NULL;
    g_autoptr(HotplugPciFunction) vf2 = NULL;

    assert_non_null(pf);
    assert_null(pf->pf_address);
    assert_int_equal(pf->vfs->len, 2);
    check_vf(pf, 1, "0000:3b:00.3", "vfio-pci", 92, NULL, 0);

    /* Any spelling of the address; the VF comes with its index and PF. */
    vf = hotplug_sysfs_read(fx->root, "3B:00.3", &error);
    assert_non_null(vf);
    assert_string_equal(vf->address, "0000:3b:00.3");
    assert_string_equal(vf->pf_address, "0000:3b:00.0");
    assert_int_equal(vf->vf_index, 1);
    assert_string_equal(vf->driver, "vfio-pci");
    assert_int_equal(vf->vfs->len, 0);

    vf2 = hotplug_sysfs_read(fx->root, "0000:3B:00.2", &error);
    assert_non_null(vf2);
    assert_int_equal(vf2->vf_index, 0);
    assert_string_equal(vf2->netdev, "ens1f0v0");
}

static void test_read_errors(void **state)
{
    g_autoptr(Fixture) fx = fixture_new("cx4-eth");
    g_autofree char *root_port = fx_path(fx, "bus/pci/devices/0000:3a:00.0/sriov_totalvfs");
    g_autofree char *devices = fx_path(fx, "bus/pci/devices");
    struct {
        const char *address;
        int code;
        const char *says;
        const char *path;
    } cases[] = {
        {"0000:3b:00.5", HOTPLUG_ERROR_NOT_FOUND, "No PCI device '0000:3b:00.5'", devices},
        {"0000:3a:00.0", HOTPLUG_ERROR_INVALID, "neither an SR-IOV PF", root_port},
        {"3b:00", HOTPLUG_ERROR_INVALID, "'3b:00' is not a PCI address", NULL},
        {"", HOTPLUG_ERROR_INVALID, "is not a PCI address", NULL},
        {"0000:3b:20.0", HOTPLUG_ERROR_INVALID, "is not a PCI address", NULL},
        {"0000:3b:00.8", HOTPLUG_ERROR_INVALID, "is not a PCI address", NULL},
        {"../../x", HOTPLUG_ERROR_INVALID, "is not a PCI address", NULL},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(HotplugPciFunction) fn = hotplug_sysfs_read(fx->root, cases[i].address, &error);

        assert_null(fn);
        assert_error(error, cases[i].code, cases[i].says, cases[i].path);
    }
}

static void test_read_vf_not_listed_by_pf(void **state)
{
    g_autoptr(Fixture) fx = fixture_new("cx4-eth");
    g_autoptr(GError) error = NULL;
    g_autoptr(HotplugPciFunction) fn = NULL;
    g_autofree char *physfn = fx_path(fx, "bus/pci/devices/0000:3b:00.3/physfn");

    /* 3b:00.3 claims PF 3b:00.1, which has no VFs. */
    fx_symlink(fx, "bus/pci/devices/0000:3b:00.3/physfn", "../0000:3b:00.1");
    fn = hotplug_sysfs_read(fx->root, "0000:3b:00.3", &error);
    assert_null(fn);
    assert_error(error, HOTPLUG_ERROR_SYSFS, "none of its virtfnN links points to", physfn);
}

/* ---- mark_assigned ----------------------------------------------------------------------- */

static void test_mark_assigned(void **state)
{
    g_autoptr(Fixture) fx = fixture_new("cx4-eth");
    g_autoptr(GPtrArray) pfs = list_unchanged(fx);
    g_autoptr(GHashTable) map = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) map2 = g_hash_table_new(g_str_hash, g_str_equal);
    const HotplugPciFunction *pf0 = pf_at(pfs, 0), *pf1 = pf_at(pfs, 1);

    g_hash_table_insert(map, "0000:3b:00.3", "vm7");
    g_hash_table_insert(map, "0000:3b:00.1", "vm-pf");
    g_hash_table_insert(map, "0000:99:00.0", "elsewhere");
    hotplug_sysfs_mark_assigned(pfs, map);
    assert_null(pf0->assigned_to);
    assert_null(vf_at(pf0, 0)->assigned_to);
    assert_string_equal(vf_at(pf0, 1)->assigned_to, "vm7");
    assert_string_equal(pf1->assigned_to, "vm-pf");

    /* A newer map replaces the old marks: nothing stale is left. */
    g_hash_table_insert(map2, "0000:3b:00.2", "vm8");
    hotplug_sysfs_mark_assigned(pfs, map2);
    assert_string_equal(vf_at(pf0, 0)->assigned_to, "vm8");
    assert_null(vf_at(pf0, 1)->assigned_to);
    assert_null(pf1->assigned_to);
    hotplug_sysfs_mark_assigned(pfs, NULL);
    assert_null(vf_at(pf0, 0)->assigned_to);
}

/* ---- the bad fixtures -------------------------------------------------------------------- */

static void test_bad_fixtures(void **state)
{
    struct {
        const char *name;
        const char *says;
        const char *path;
    } cases[] = {
        {"bad-missing-file", "No such file or directory", "bus/pci/devices/0000:5e:00.3/device"},
        {"bad-garbage-number", "holds 'two', not a decimal number 0..65535",
         "bus/pci/devices/0000:5e:00.0/sriov_numvfs"},
        {"bad-dangling-link", "dangling symbolic link", "bus/pci/devices/0000:5e:00.0/virtfn1"},
        {"bad-mismatched-physfn", "points to '0000:5e:00.1', not to '0000:5e:00.0'",
         "bus/pci/devices/0000:5e:00.3/physfn"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(Fixture) fx = fixture_new(cases[i].name);

        list_fails(fx, cases[i].says, cases[i].path);
    }
}

/* ---- broken trees, one change to a good fixture each ------------------------------------- */

#define PF0 "bus/pci/devices/0000:3b:00.0/"
#define PF1 "bus/pci/devices/0000:3b:00.1/"
#define VF0 "bus/pci/devices/0000:3b:00.2/"
#define VF1 "bus/pci/devices/0000:3b:00.3/"
#define SRIOV_CAP 0x180

typedef void (*Breaker)(const Fixture *fx);

static void brk_huge_file(const Fixture *fx)
{
    g_autofree char *big = g_strnfill(1 << 20, '7');
    fx_write(fx, PF0 "sriov_totalvfs", big, -1);
}
static void brk_numvfs_above_total(const Fixture *fx)
{
    fx_write(fx, PF0 "sriov_numvfs", "9\n", -1);
}
static void brk_totalvfs_range(const Fixture *fx)
{
    fx_write(fx, PF0 "sriov_totalvfs", "65536\n", -1);
}
static void brk_numvfs_negative(const Fixture *fx)
{
    fx_write(fx, PF0 "sriov_numvfs", "-1\n", -1);
}
static void brk_numvfs_space(const Fixture *fx)
{
    fx_write(fx, PF0 "sriov_numvfs", " 2\n", -1);
}
static void brk_numvfs_two_lines(const Fixture *fx)
{
    fx_write(fx, PF0 "sriov_numvfs", "2\n\n", -1);
}
static void brk_numvfs_nul(const Fixture *fx)
{
    fx_write(fx, PF0 "sriov_numvfs",
             "2\0"
             "1\n",
             4);
}
static void brk_numvfs_empty(const Fixture *fx)
{
    fx_write(fx, PF0 "sriov_numvfs", "", 0);
}
static void brk_vendor_range(const Fixture *fx)
{
    fx_write(fx, VF1 "vendor", "0x15b30\n", -1);
}
static void brk_vendor_no_prefix(const Fixture *fx)
{
    fx_write(fx, PF0 "vendor", "15b3\n", -1);
}
static void brk_vendor_hex_garbage(const Fixture *fx)
{
    fx_write(fx, PF0 "device", "0x10g3\n", -1);
}
static void brk_numa_range(const Fixture *fx)
{
    fx_write(fx, VF0 "numa_node", "70000\n", -1);
}
static void brk_numa_minus_two(const Fixture *fx)
{
    fx_write(fx, PF1 "numa_node", "-2\n", -1);
}
static void brk_net_type(const Fixture *fx)
{
    fx_write(fx, PF0 "net/ens1f0/type", "ether\n", -1);
}
static void brk_net_type_missing(const Fixture *fx)
{
    fx_unlink(fx, VF0 "net/ens1f0v0/type");
}
static void brk_iommu_group_name(const Fixture *fx)
{
    fx_symlink(fx, VF1 "iommu_group", "../../../../kernel/iommu_groups/ninety");
}
static void brk_iommu_group_trailing_slash(const Fixture *fx)
{
    fx_symlink(fx, VF1 "iommu_group", "../../../../kernel/iommu_groups/");
}
static void brk_driver_not_link(const Fixture *fx)
{
    fx_unlink(fx, PF1 "driver");
    fx_write(fx, PF1 "driver", "mlx5_core\n", -1);
}
static void brk_vendor_dir(const Fixture *fx)
{
    g_autofree char *path = fx_path(fx, VF0 "vendor");

    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0755), 0);
}
static void brk_vendor_fifo(const Fixture *fx)
{
    g_autofree char *path = fx_path(fx, VF0 "vendor");

    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkfifo(path, 0644), 0);
}
static void brk_extra_virtfn(const Fixture *fx)
{
    fx_symlink(fx, PF0 "virtfn2", "../0000:3b:00.4");
}
static void brk_missing_virtfn(const Fixture *fx)
{
    fx_unlink(fx, PF0 "virtfn0");
}
static void brk_virtfn_garbage_name(const Fixture *fx)
{
    fx_symlink(fx, PF0 "virtfnX", "../0000:3b:00.2");
}
static void brk_virtfn_leading_zero(const Fixture *fx)
{
    fx_unlink(fx, PF0 "virtfn1");
    fx_symlink(fx, PF0 "virtfn01", "../0000:3b:00.3");
}
static void brk_virtfn_to_pf(const Fixture *fx)
{
    fx_symlink(fx, PF0 "virtfn1", "../0000:3b:00.1");
}
static void brk_virtfn_not_address(const Fixture *fx)
{
    fx_symlink(fx, PF0 "virtfn1", "../../../../kernel");
}
static void brk_virtfn_elsewhere(const Fixture *fx)
{
    /* A directory named like the VF, but not the one bus/pci/devices leads to. */
    g_autofree char *copy = fx_path(fx, "devices/copy");
    g_autofree char *vf = fx_path(fx, "devices/copy/0000:3b:00.3");

    assert_int_equal(mkdir(copy, 0755), 0);
    assert_int_equal(mkdir(vf, 0755), 0);
    fx_symlink(fx, PF0 "virtfn1", "../../../copy/0000:3b:00.3");
}
static void brk_virtfn_not_in_devices(const Fixture *fx)
{
    fx_unlink(fx, "bus/pci/devices/0000:3b:00.3");
}
static void brk_link_loop(const Fixture *fx)
{
    fx_symlink(fx, "bus/pci/devices/0000:3b:00.3", "0000:3b:00.3");
}
static void brk_link_loop_pair(const Fixture *fx)
{
    fx_symlink(fx, "bus/pci/devices/0000:3b:00.3", "../../../devices/loop-a");
    fx_symlink(fx, "devices/loop-a", "../bus/pci/devices/0000:3b:00.3");
}
static void brk_devices_garbage(const Fixture *fx)
{
    fx_symlink(fx, "bus/pci/devices/not-an-address", "../../../devices");
}
static void brk_devices_uppercase(const Fixture *fx)
{
    fx_symlink(fx, "bus/pci/devices/0000:3B:00.7", "../../../devices");
}
static void brk_devices_dangling(const Fixture *fx)
{
    fx_symlink(fx, "bus/pci/devices/0000:3b:00.7", "../../../devices/nowhere");
}
static void brk_physfn_missing(const Fixture *fx)
{
    fx_unlink(fx, VF0 "physfn");
}
static void brk_physfn_dangling(const Fixture *fx)
{
    fx_symlink(fx, VF0 "physfn", "../0000:3b:00.6");
}
static void brk_config_missing(const Fixture *fx)
{
    fx_unlink(fx, PF0 "config");
}
static void brk_config_dir(const Fixture *fx)
{
    g_autofree char *path = fx_path(fx, PF0 "config");

    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0755), 0);
}
static void brk_config_too_big(const Fixture *fx)
{
    g_autofree char *zeros = g_malloc0(8192);

    fx_write(fx, PF0 "config", zeros, 8192);
}
static void brk_config_no_sriov(const Fixture *fx)
{
    /* ARI's next pointer ends the extended capability list before SR-IOV. */
    fx_patch16(fx, PF0 "config", 0x150 + 2, 0x0001);
}
static void brk_config_totalvfs(const Fixture *fx)
{
    fx_patch16(fx, PF0 "config", SRIOV_CAP + 0x0e, 4);
}
static void brk_config_numvfs(const Fixture *fx)
{
    fx_patch16(fx, PF0 "config", SRIOV_CAP + 0x10, 3);
}
static void brk_config_vf_enable_clear(const Fixture *fx)
{
    fx_patch16(fx, PF0 "config", SRIOV_CAP + 0x08, 0x0010);
}
static void brk_config_offset(const Fixture *fx)
{
    fx_patch16(fx, PF0 "config", SRIOV_CAP + 0x14, 3);
}
static void brk_config_offset_zero(const Fixture *fx)
{
    fx_patch16(fx, PF0 "config", SRIOV_CAP + 0x14, 0);
}
static void brk_config_vf_device(const Fixture *fx)
{
    fx_patch16(fx, PF0 "config", SRIOV_CAP + 0x1a, 0x1016);
}
static void brk_config_other_device(const Fixture *fx)
{
    fx_patch16(fx, PF0 "config", 0x02, 0x1017);
}
static void brk_config_cap_at_end(const Fixture *fx)
{
    /* SR-IOV moved to 0xff0, where its 0x40 bytes do not fit. */
    guint8 header[4] = {0x10, 0x00, 0x01, 0x00};

    fx_patch16(fx, PF0 "config", 0x150 + 2, 0xff01);
    fx_patch(fx, PF0 "config", 0xff0, header, 4);
}
static void brk_vf_device(const Fixture *fx)
{
    fx_write(fx, VF1 "device", "0x1016\n", -1);
}
static void brk_root_gone(const Fixture *fx)
{
    g_autofree char *devices = fx_path(fx, "bus/pci/devices");
    remove_tree(devices);
}

typedef struct {
    const char *name;
    Breaker breaker;
    const char *says;
    const char *path; /* relative to the sysfs root, or NULL */
} BreakCase;

static const BreakCase break_cases[] = {
    {"huge file", brk_huge_file, "larger than the limit of 4096 bytes", PF0 "sriov_totalvfs"},
    {"numvfs > totalvfs", brk_numvfs_above_total, "says 9 VFs, more than the 8 of",
     PF0 "sriov_numvfs"},
    {"totalvfs out of range", brk_totalvfs_range, "holds '65536', not a decimal number 0..65535",
     PF0 "sriov_totalvfs"},
    {"negative numvfs", brk_numvfs_negative, "holds '-1', not a decimal", PF0 "sriov_numvfs"},
    {"leading space", brk_numvfs_space, "holds ' 2', not a decimal", PF0 "sriov_numvfs"},
    {"two newlines", brk_numvfs_two_lines, "holds '2\\n', not a decimal", PF0 "sriov_numvfs"},
    {"NUL byte", brk_numvfs_nul, "holds a NUL byte", PF0 "sriov_numvfs"},
    {"empty file", brk_numvfs_empty, "is empty", PF0 "sriov_numvfs"},
    {"vendor out of range", brk_vendor_range, "holds '0x15b30', not a 16-bit ID", VF1 "vendor"},
    {"vendor without 0x", brk_vendor_no_prefix, "holds '15b3', not a 16-bit ID", PF0 "vendor"},
    {"device not hex", brk_vendor_hex_garbage, "holds '0x10g3', not a 16-bit ID", PF0 "device"},
    {"numa out of range", brk_numa_range, "holds '70000', not a decimal number -1..65535",
     VF0 "numa_node"},
    {"numa -2", brk_numa_minus_two, "holds '-2', not a decimal number -1..65535", PF1 "numa_node"},
    {"net type garbage", brk_net_type, "holds 'ether', not a decimal", PF0 "net/ens1f0/type"},
    {"net type missing", brk_net_type_missing, "No such file", VF0 "net/ens1f0v0/type"},
    {"iommu group name", brk_iommu_group_name, "points to group 'ninety'", VF1 "iommu_group"},
    {"iommu group slash", brk_iommu_group_trailing_slash, "which names nothing", VF1 "iommu_group"},
    {"driver not a link", brk_driver_not_link, "is not a symbolic link", PF1 "driver"},
    {"vendor a directory", brk_vendor_dir, "is not a regular file", VF0 "vendor"},
    {"vendor a fifo", brk_vendor_fifo, "is not a regular file", VF0 "vendor"},
    {"extra virtfn", brk_extra_virtfn, "exists, but", PF0 "virtfn2"},
    {"missing virtfn", brk_missing_virtfn, "is missing, but", PF0 "virtfn0"},
    {"virtfnX", brk_virtfn_garbage_name, "holds 'virtfnX', which is not virtfnN",
     "bus/pci/devices/0000:3b:00.0"},
    {"virtfn01", brk_virtfn_leading_zero, "holds 'virtfn01', which is not virtfnN",
     "bus/pci/devices/0000:3b:00.0"},
    {"virtfn to a PF", brk_virtfn_to_pf, "is missing: '0000:3b:00.1'", PF1 "physfn"},
    {"virtfn to no device", brk_virtfn_not_address, "points to 'kernel', not to a PCI device",
     PF0 "virtfn1"},
    {"virtfn elsewhere", brk_virtfn_elsewhere, "leads to", PF0 "virtfn1"},
    {"VF not in bus/pci/devices", brk_virtfn_not_in_devices, "which is not in", PF0 "virtfn1"},
    {"link loop", brk_link_loop, "a symbolic link loop", "bus/pci/devices/0000:3b:00.3"},
    {"link loop of two", brk_link_loop_pair, "a symbolic link loop",
     "bus/pci/devices/0000:3b:00.3"},
    {"garbage in devices", brk_devices_garbage,
     "holds 'not-an-address', which is not a PCI address", "bus/pci/devices"},
    {"upper case in devices", brk_devices_uppercase, "holds '0000:3B:00.7', which is not a PCI",
     "bus/pci/devices"},
    {"dangling device", brk_devices_dangling, "dangling symbolic link",
     "bus/pci/devices/0000:3b:00.7"},
    {"physfn missing", brk_physfn_missing, "is not a VF", VF0 "physfn"},
    {"physfn dangling", brk_physfn_dangling, "dangling symbolic link", VF0 "physfn"},
    {"config missing", brk_config_missing, "No such file", PF0 "config"},
    {"config a directory", brk_config_dir, "is not a regular file", PF0 "config"},
    {"config too big", brk_config_too_big, "larger than the 4096 bytes", PF0 "config"},
    {"no SR-IOV capability", brk_config_no_sriov, "has no SR-IOV capability", PF0 "config"},
    {"TotalVFs below sysfs", brk_config_totalvfs, "more than TotalVFs 4", PF0 "config"},
    {"NumVFs differs", brk_config_numvfs, "but NumVFs is 3", PF0 "config"},
    {"VF Enable clear", brk_config_vf_enable_clear, "VF Enable is clear", PF0 "config"},
    {"First VF Offset moved", brk_config_offset, "puts VF 0 at '0000:3b:00.3'", PF0 "virtfn0"},
    {"First VF Offset zero", brk_config_offset_zero, "place no VFs", PF0 "config"},
    {"VF Device ID", brk_config_vf_device, "makes VFs 15b3:1016", "bus/pci/devices/0000:3b:00.2"},
    {"config of another device", brk_config_other_device, "config space of 15b3:1017",
     PF0 "config"},
    {"capability at the end", brk_config_cap_at_end, "does not fit", PF0 "config"},
    {"VF device ID", brk_vf_device, "'0000:3b:00.3' is 15b3:1016", "bus/pci/devices/0000:3b:00.3"},
    {"no bus/pci/devices", brk_root_gone, "Cannot open the directory", "bus/pci/devices"},
};

static void test_broken_trees(void **state)
{
    for (gsize i = 0; i < G_N_ELEMENTS(break_cases); i++) {
        const BreakCase *c = &break_cases[i];
        g_autoptr(Fixture) fx = fixture_new("cx4-eth");
        g_autoptr(GError) error = NULL;
        g_autoptr(GPtrArray) pfs = NULL;
        g_autofree char *path = c->path ? fx_path(fx, c->path) : NULL;

        c->breaker(fx);
        pfs = hotplug_sysfs_list_pfs(fx->root, &error);
        if (pfs)
            fail_msg("case '%s': the broken tree was listed", c->name);
        if (!error || error->domain != HOTPLUG_ERROR || error->code != HOTPLUG_ERROR_SYSFS ||
            !strstr(error->message, c->says) || (path && !strstr(error->message, path)))
            fail_msg("case '%s': expected '%s' naming '%s', got '%s'", c->name, c->says,
                     path ? path : "-", error ? error->message : "(no error)");
        if (g_getenv("HM_TEST_VERBOSE")) /* to read the messages as a user would */
            fprintf(stderr, "%-28s %s\n", c->name, error->message);
    }
}

/* ---- config space readable only in part (not root) --------------------------------------- */

static void test_config_short(void **state)
{
    g_autoptr(Fixture) fx = fixture_new("cx4-eth");
    g_autofree char *config = fx_path(fx, PF0 "config");
    g_autoptr(GPtrArray) pfs = NULL;
    const HotplugPciFunction *pf;

    /* What a user other than root reads: the first 64 bytes. */
    assert_int_equal(truncate(config, 64), 0);
    pfs = list_unchanged(fx);
    pf = pf_at(pfs, 0);
    assert_false(pf->config_checked);
    assert_int_equal(pf->vf_device_id, 0x1014); /* from sriov_vf_device */
    assert_int_equal(pf->vf_offset, 0);
    assert_int_equal(pf->num_vfs, 2);
    check_vf(pf, 1, "0000:3b:00.3", "vfio-pci", 92, NULL, 0);
    assert_true(pf_at(pfs, 1)->config_checked);

    /* Without sriov_vf_device (kernels before 5.8) the VF device ID is unknown. */
    g_clear_pointer(&pfs, g_ptr_array_unref);
    fx_unlink(fx, PF0 "sriov_vf_device");
    pfs = list_unchanged(fx);
    assert_int_equal(pf_at(pfs, 0)->vf_device_id, 0);
    assert_int_equal(vf_at(pf_at(pfs, 0), 0)->device_id, 0x1014);
}

static void test_optional_attributes(void **state)
{
    g_autoptr(Fixture) fx = fixture_new("cx4-eth");
    g_autoptr(GPtrArray) pfs = NULL;
    const HotplugPciFunction *vf;

    fx_unlink(fx, VF0 "numa_node");          /* a kernel without NUMA */
    fx_unlink(fx, VF0 "iommu_group");        /* no IOMMU */
    fx_unlink(fx, VF0 "driver");             /* unbound */
    fx_write(fx, VF1 "numa_node", "-1", -1); /* no newline: accepted */
    pfs = list_unchanged(fx);
    vf = vf_at(pf_at(pfs, 0), 0);
    assert_int_equal(vf->numa_node, -1);
    assert_int_equal(vf->iommu_group, -1);
    assert_null(vf->driver);
    assert_int_equal(vf_at(pf_at(pfs, 0), 1)->numa_node, -1);
}

/* A sysfs root so long that libpci's own path buffer (1024 bytes) overflows: libpci calls its
 * error handler, which must come back as a GError instead of exit(). */
static void test_libpci_error_long_root(void **state)
{
    g_autofree char *tmp = g_dir_make_tmp("hm-sysfs-long-XXXXXX", NULL);
    g_autoptr(GString) root = g_string_new(tmp);
    g_autofree char *src = g_build_filename(fixtures, "sysfs", "cx5-ib", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) pfs = NULL;

    for (int i = 0; i < 6; i++) {
        g_string_append_c(root, '/');
        for (int j = 0; j < 180; j++)
            g_string_append_c(root, 'd');
        assert_int_equal(mkdir(root->str, 0755), 0);
    }
    g_string_append(root, "/sysfs");
    copy_tree(src, root->str);
    pfs = hotplug_sysfs_list_pfs(root->str, &error);
    assert_null(pfs);
    assert_error(error, HOTPLUG_ERROR_SYSFS, "libpci: File name too long", "/config");
    remove_tree(tmp);
}

/* ---- the parsers ------------------------------------------------------------------------- */

static void test_address_parse(void **state)
{
    struct {
        const char *in;
        const char *out; /* NULL: rejected */
    } cases[] = {
        {"0000:3b:00.2", "0000:3b:00.2"},
        {"3b:00.2", "0000:3b:00.2"},
        {"3B:1F.7", "0000:3b:1f.7"},
        {"1:2:3.4", "0001:02:03.4"},
        {"10000:00:00.0", "10000:00:00.0"},
        {"ffffffff:ff:1f.7", "ffffffff:ff:1f.7"},
        {"100000000:00:00.0", NULL},
        {"0000:3b:20.0", NULL},
        {"0000:3b:00.8", NULL},
        {"0000:3b:00.a", NULL},
        {"0000:3b:00.", NULL},
        {"0000:3b:00", NULL},
        {"0000:3b:000.0", NULL},
        {"0000:13b:00.0", NULL},
        {"0000:3b:00.0 ", NULL},
        {" 0000:3b:00.0", NULL},
        {"0x00:3b:00.0", NULL},
        {"0000:3b.00.0", NULL},
        {":3b:00.0", NULL},
        {"0000::00.0", NULL},
        {"0:0:0:0.0", NULL},
        {"", NULL},
        {"g0:00.0", NULL},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autofree char *out = hm_pci_address_normalize(cases[i].in, &error);

        if (cases[i].out) {
            if (!out || !g_str_equal(out, cases[i].out))
                fail_msg("'%s' gave '%s', expected '%s'", cases[i].in, out ? out : "NULL",
                         cases[i].out);
        } else if (out) {
            fail_msg("'%s' was accepted as '%s'", cases[i].in, out);
        } else {
            g_assert_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID);
            assert_non_null(strstr(error->message, "is not a PCI address"));
        }
    }
}

static void test_parse_values(void **state)
{
    guint u = 77;
    int s = 77;
    g_autoptr(GError) error = NULL;

    assert_true(hotplug_sysfs_parse_uint("f", "0\n", 2, 10, &u, NULL));
    assert_int_equal(u, 0);
    assert_true(hotplug_sysfs_parse_uint("f", "65535", 5, 65535, &u, NULL));
    assert_int_equal(u, 65535);
    assert_false(hotplug_sysfs_parse_uint("f", "65536\n", 6, 65535, &u, &error));
    assert_error(error, HOTPLUG_ERROR_SYSFS, "'f' holds '65536'", NULL);
    g_clear_error(&error);
    assert_int_equal(u, 65535); /* untouched on failure */
    assert_false(hotplug_sysfs_parse_uint("f", "+1\n", 3, 10, &u, NULL));
    assert_false(hotplug_sysfs_parse_uint("f", "1 \n", 3, 10, &u, NULL));
    assert_false(hotplug_sysfs_parse_uint("f", "0x1\n", 4, 10, &u, NULL));
    assert_false(hotplug_sysfs_parse_uint("f", "\n", 1, 10, &u, NULL));
    assert_false(hotplug_sysfs_parse_uint("f", "99999999999999999999\n", 21, G_MAXUINT, &u, NULL));

    assert_true(hotplug_sysfs_parse_int("f", "-1\n", 3, -1, 10, &s, NULL));
    assert_int_equal(s, -1);
    assert_true(hotplug_sysfs_parse_int("f", "3", 1, -1, 10, &s, NULL));
    assert_int_equal(s, 3);
    assert_false(hotplug_sysfs_parse_int("f", "-", 1, -1, 10, &s, NULL));
    assert_false(hotplug_sysfs_parse_int("f", "--1", 3, -5, 10, &s, NULL));
    assert_false(hotplug_sysfs_parse_int("f", "+3", 2, -1, 10, &s, NULL));
    assert_false(hotplug_sysfs_parse_int("f", "11", 2, -1, 10, &s, NULL));

    assert_true(hotplug_sysfs_parse_id("f", "0x15b3\n", 7, TRUE, &u, NULL));
    assert_int_equal(u, 0x15b3);
    assert_true(hotplug_sysfs_parse_id("f", "0xABCD", 6, TRUE, &u, NULL));
    assert_int_equal(u, 0xabcd);
    assert_true(hotplug_sysfs_parse_id("f", "101e\n", 5, FALSE, &u, NULL));
    assert_int_equal(u, 0x101e);
    assert_true(hotplug_sysfs_parse_id("f", "0x1\n", 4, TRUE, &u, NULL));
    assert_int_equal(u, 1);
    assert_false(hotplug_sysfs_parse_id("f", "0x\n", 3, TRUE, &u, NULL));
    assert_false(hotplug_sysfs_parse_id("f", "0x12345\n", 8, TRUE, &u, NULL));
    assert_false(hotplug_sysfs_parse_id("f", "0x101e\n", 7, FALSE, &u, NULL));
    assert_false(hotplug_sysfs_parse_id("f", "-0x1\n", 5, TRUE, &u, NULL));
    assert_false(hotplug_sysfs_parse_id("f", "0X15b3\n", 7, TRUE, &u, NULL));
}

/* ---- the libpci adapter: lspci dumps ----------------------------------------------------- */

static char *dump_path(const char *name)
{
    return g_build_filename(fixtures, "lspci", name, NULL);
}

static void read_dump(const char *name, const char *address, HotplugPciSriovStatus want,
                      HotplugPciSriov *ret)
{
    g_autofree char *path = dump_path(name);
    g_autoptr(GError) error = NULL;
    HotplugPciSriovStatus status;

    if (!hotplug_pci_read_sriov_dump(path, address, &status, ret, &error))
        fail_msg("%s", error->message);
    assert_int_equal(status, want);
}

static void test_dump_sriov(void **state)
{
    struct {
        const char *dump;
        const char *address;
        guint device, vf_device, total, num, offset, fdl;
        gboolean enabled;
    } cases[] = {
        {"connectx4.dump", "3b:00.0", 0x1013, 0x1014, 8, 2, 2, 0, TRUE},
        {"connectx4.dump", "0000:3b:00.1", 0x1013, 0x1014, 8, 0, 9, 1, FALSE},
        {"connectx5.dump", "5e:00.0", 0x1017, 0x1018, 8, 4, 1, 0, TRUE},
        {"connectx6.dump", "0001:af:00.0", 0x101b, 0x101c, 16, 3, 2, 0, TRUE},
        {"connectx6.dump", "0001:af:00.1", 0x101b, 0x101c, 16, 2, 17, 1, TRUE},
        {"connectx7.dump", "17:00.0", 0x1021, 0x101e, 16, 2, 1, 0, TRUE},
        {"connectx7.dump", NULL, 0x1021, 0x101e, 16, 2, 1, 0, TRUE},
        {"connectx4.dump", NULL, 0x1013, 0x1014, 8, 2, 2, 0, TRUE}, /* the first device */
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        HotplugPciSriov s;

        read_dump(cases[i].dump, cases[i].address, HOTPLUG_PCI_SRIOV_FOUND, &s);
        assert_int_equal(s.vendor_id, 0x15b3);
        assert_int_equal(s.device_id, cases[i].device);
        assert_int_equal(s.cap_offset, 0x180);
        assert_int_equal(s.vf_device_id, cases[i].vf_device);
        assert_int_equal(s.total_vfs, cases[i].total);
        assert_int_equal(s.initial_vfs, cases[i].total);
        assert_int_equal(s.num_vfs, cases[i].num);
        assert_int_equal(s.vf_offset, cases[i].offset);
        assert_int_equal(s.vf_stride, 1);
        assert_int_equal(s.function_link, cases[i].fdl);
        assert_int_equal(!!(s.control & HOTPLUG_PCI_SRIOV_CTRL_VFE), cases[i].enabled);
    }
}

static void test_dump_vf_and_absent(void **state)
{
    g_autofree char *path = dump_path("connectx5.dump");
    g_autoptr(GError) error = NULL;
    HotplugPciSriovStatus status;
    HotplugPciSriov s = {.vf_offset = 77};

    /* Captured from QEMU's emulated NVMe in a lab guest, VFs enabled. */
    read_dump("qemu-nvme-sriov.dump", "09:00.0", HOTPLUG_PCI_SRIOV_FOUND, &s);
    assert_int_equal(s.vendor_id, 0x1b36);
    assert_int_equal(s.device_id, 0x0010);
    assert_int_equal(s.cap_offset, 0x120);
    assert_int_equal(s.total_vfs, 4);
    assert_int_equal(s.num_vfs, 4);
    assert_true(s.control & HOTPLUG_PCI_SRIOV_CTRL_VFE);
    assert_int_equal(s.vf_offset, 1);
    assert_int_equal(s.vf_stride, 1);
    assert_int_equal(s.vf_device_id, 0x0010);
    s.vf_offset = 77;
    read_dump("qemu-nvme-sriov.dump", "09:00.1", HOTPLUG_PCI_SRIOV_ABSENT, &s);
    assert_int_equal(s.vf_offset, 77);

    /* A VF: config space reads 0xffff for the IDs and has no SR-IOV capability. */
    read_dump("connectx5.dump", "5e:00.1", HOTPLUG_PCI_SRIOV_ABSENT, &s);
    assert_int_equal(s.vf_offset, 77); /* untouched */

    assert_false(hotplug_pci_read_sriov_dump(path, "5e:00.5", &status, &s, &error));
    assert_error(error, HOTPLUG_ERROR_NOT_FOUND, "has no device '5e:00.5'", path);
}

/* Writes @content as a dump file in a temp dir; returns its path (owned). */
static char *write_temp_dump(const char *tmp, const char *name, const char *content)
{
    char *path = g_build_filename(tmp, name, NULL);

    write_file(path, content, -1);
    return path;
}

static void test_dump_errors(void **state)
{
    g_autofree char *tmp = g_dir_make_tmp("hm-dump-XXXXXX", NULL);
    g_autofree char *long_line = g_strnfill(300, 'a');
    g_autofree char *too_long = g_strconcat("00:00.0 x\n", long_line, "\n", NULL);
    struct {
        const char *name;
        const char *content; /* NULL: no such file */
        int code;
        const char *says;
    } cases[] = {
        {"missing.dump", NULL, HOTPLUG_ERROR_INVALID, "libpci: dump: Cannot open"},
        {"malformed.dump", "00:00.0 Host bridge\n00: 86 80 zz\n", HOTPLUG_ERROR_INVALID,
         "libpci: dump: Malformed line"},
        {"long.dump", too_long, HOTPLUG_ERROR_INVALID, "libpci: dump: line too long"},
        {"beyond.dump", "00:00.0 x\n1000: 00 01\n", HOTPLUG_ERROR_INVALID,
         "At most 4096 bytes of config space"},
        {"empty.dump", "", HOTPLUG_ERROR_NOT_FOUND, "has no device"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *path = cases[i].content
                                    ? write_temp_dump(tmp, cases[i].name, cases[i].content)
                                    : g_build_filename(tmp, cases[i].name, NULL);
        g_autoptr(GError) error = NULL;
        HotplugPciSriovStatus status = 77;

        assert_false(hotplug_pci_read_sriov_dump(path, NULL, &status, NULL, &error));
        assert_error(error, cases[i].code, cases[i].says, path);
        assert_int_equal(status, 77);
    }
    remove_tree(tmp);
}

/* `lspci -xxx` (256 bytes) has no extended config space: SHORT, not ABSENT. */
static void test_dump_short(void **state)
{
    g_autofree char *tmp = g_dir_make_tmp("hm-dump-XXXXXX", NULL);
    g_autofree char *full = dump_path("connectx5.dump");
    g_autofree char *data = NULL;
    g_autoptr(GString) cut = g_string_new(NULL);
    g_auto(GStrv) lines = NULL;
    g_autofree char *path = NULL;
    g_autoptr(GError) error = NULL;
    HotplugPciSriovStatus status;

    assert_true(g_file_get_contents(full, &data, NULL, NULL));
    lines = g_strsplit(data, "\n", -1);
    for (int i = 0; lines[i] && i < 17; i++) /* the title and 16 lines of 16 bytes */
        g_string_append_printf(cut, "%s\n", lines[i]);
    path = write_temp_dump(tmp, "short.dump", cut->str);
    assert_true(hotplug_pci_read_sriov_dump(path, "5e:00.0", &status, NULL, &error));
    assert_int_equal(status, HOTPLUG_PCI_SRIOV_SHORT);
    remove_tree(tmp);
}

/* The config files of the sysfs fixtures are the dumps' bytes: libpci reads the same SR-IOV
 * capability through both access methods. */
static void test_dump_matches_sysfs(void **state)
{
    struct {
        const char *tree, *dump, *address, *dump_address;
    } cases[] = {
        {"cx4-eth", "connectx4.dump", "0000:3b:00.0", "3b:00.0"},
        {"cx4-eth", "connectx4.dump", "0000:3b:00.1", "3b:00.1"},
        {"cx5-ib", "connectx5.dump", "0000:5e:00.0", "5e:00.0"},
        {"cx6-ib", "connectx6.dump", "0001:af:00.0", "0001:af:00.0"},
        {"cx6-ib", "connectx6.dump", "0001:af:00.1", "0001:af:00.1"},
        {"cx7-ib", "connectx7.dump", "0000:17:00.0", "17:00.0"},
        {"qemu-nvme", "qemu-nvme-sriov.dump", "0000:09:00.0", "09:00.0"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(Fixture) fx = fixture_new(cases[i].tree);
        g_autoptr(HotplugPci) pci = NULL;
        g_autoptr(GError) error = NULL;
        HotplugPciSriovStatus status;
        HotplugPciSriov from_sysfs, from_dump;

        memset(&from_sysfs, 0, sizeof(from_sysfs));
        memset(&from_dump, 0, sizeof(from_dump));
        pci = hotplug_pci_open(fx->root, &error);
        assert_non_null(pci);
        if (!hotplug_pci_read_sriov(pci, cases[i].address, &status, &from_sysfs, &error))
            fail_msg("%s", error->message);
        assert_int_equal(status, HOTPLUG_PCI_SRIOV_FOUND);
        read_dump(cases[i].dump, cases[i].dump_address, HOTPLUG_PCI_SRIOV_FOUND, &from_dump);
        assert_memory_equal(&from_sysfs, &from_dump, sizeof(from_dump));
    }
}

/* ---- the libpci adapter: names ----------------------------------------------------------- */

static void test_names(void **state)
{
    g_autoptr(HotplugPci) pci = hotplug_pci_open("/nonexistent", NULL);
    g_autofree char *vendor = NULL;
    g_autofree char *device = NULL;
    g_autofree char *unknown_vendor = NULL;
    g_autofree char *unknown_device = NULL;

    assert_non_null(pci);
    assert_true(hotplug_pci_lookup_names(pci, 0x1b36, 0x0010, &vendor, &device, NULL));
    assert_string_equal(vendor, "Red Hat, Inc.");
    assert_string_equal(device, "QEMU NVM Express Controller");
    g_clear_pointer(&device, g_free);
    /* A known vendor, an unknown device; then neither. */
    assert_true(hotplug_pci_lookup_names(pci, 0x15b3, 0xfffe, NULL, &device, NULL));
    assert_null(device);
    assert_true(
        hotplug_pci_lookup_names(pci, 0xabcd, 0x1234, &unknown_vendor, &unknown_device, NULL));
    assert_null(unknown_vendor);
    assert_null(unknown_device);
}

static void test_names_bad_database(void **state)
{
    g_autofree char *tmp = g_dir_make_tmp("hm-ids-XXXXXX", NULL);
    g_autofree char *ids = g_build_filename(tmp, "pci.ids", NULL);
    g_autofree char *good = g_build_filename(fixtures, "pci.ids", NULL);
    g_autofree char *missing = g_build_filename(tmp, "missing.ids", NULL);
    g_autoptr(GError) error = NULL;
    g_autofree char *vendor = NULL;
    g_autoptr(Fixture) fx = fixture_new("cx5-ib");
    g_autoptr(GPtrArray) pfs = NULL;

    write_file(ids, "15b3  Mellanox\n\tnot an entry at all\n", -1);
    hotplug_pci_set_ids_path(ids);
    {
        g_autoptr(HotplugPci) pci = hotplug_pci_open("/nonexistent", NULL);

        /* libpci's parser calls its error handler: a GError, not exit(). */
        assert_false(hotplug_pci_lookup_names(pci, 0x15b3, 0x1017, &vendor, NULL, &error));
        assert_error(error, HOTPLUG_ERROR_FAILED,
                     "Cannot look up the names of 15b3:1017: libpci:", ids);
        assert_null(vendor);
        g_clear_error(&error);
        /* libpci gives up on the database after that: no names, no more errors. */
        assert_true(hotplug_pci_lookup_names(pci, 0x15b3, 0x1017, &vendor, NULL, &error));
        assert_null(vendor);
    }
    /* Discovery goes on without names. */
    pfs = list_unchanged(fx);
    assert_null(pf_at(pfs, 0)->vendor_name);
    assert_null(pf_at(pfs, 0)->device_name);
    assert_int_equal(pf_at(pfs, 0)->vfs->len, 4);

    /* A missing database knows no names and is no error. */
    hotplug_pci_set_ids_path(missing);
    {
        g_autoptr(HotplugPci) pci = hotplug_pci_open("/nonexistent", NULL);

        assert_true(hotplug_pci_lookup_names(pci, 0x15b3, 0x1017, &vendor, NULL, &error));
        assert_null(vendor);
    }
    hotplug_pci_set_ids_path(good);
    remove_tree(tmp);
}

/* libpci's own database, where the system has one. */
static void test_names_system_database(void **state)
{
    g_autofree char *good = g_build_filename(fixtures, "pci.ids", NULL);
    g_autofree char *vendor = NULL;
    gboolean have = g_file_test("/usr/share/misc/pci.ids", G_FILE_TEST_EXISTS) ||
                    g_file_test("/usr/share/hwdata/pci.ids", G_FILE_TEST_EXISTS) ||
                    g_file_test("/usr/share/misc/pci.ids.gz", G_FILE_TEST_EXISTS);

    /* tests/deps.list declares pci.ids: without it this case would test nothing. */
    if (!have)
        fail_msg("no system pci.ids (package pci.ids): run tests/install-deps");
    hotplug_pci_set_ids_path(NULL);
    {
        g_autoptr(HotplugPci) pci = hotplug_pci_open("/nonexistent", NULL);

        assert_true(hotplug_pci_lookup_names(pci, 0x15b3, 0x1017, &vendor, NULL, NULL));
    }
    hotplug_pci_set_ids_path(good);
    assert_non_null(vendor);
    assert_non_null(strstr(vendor, "Mellanox"));
}

/* ---- hotmig-sriov ------------------------------------------------------------------------ */

/* Runs the tool; returns its exit status, output in *ret_out and *ret_err (owned). */
static int run_tool(const char *const *args, char **ret_out, char **ret_err)
{
    const char *tool = g_getenv("HM_SRIOV_TOOL");
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_autoptr(GError) error = NULL;
    int status;

    assert_non_null(tool);
    g_ptr_array_add(argv, (gpointer)tool);
    g_ptr_array_add(argv, (gpointer) "--pci-ids");
    g_ptr_array_add(argv, pci_ids_path);
    for (int i = 0; args[i]; i++)
        g_ptr_array_add(argv, (gpointer)args[i]);
    g_ptr_array_add(argv, NULL);
    if (!g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, ret_out,
                      ret_err, &status, &error))
        fail_msg("%s", error->message);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void test_tool_text(void **state)
{
    g_autoptr(Fixture) fx = fixture_new("cx5-ib");
    const char *args[] = {"--sysfs-root", fx->root, NULL};
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    g_auto(GStrv) lines = NULL;

    assert_int_equal(run_tool(args, &out, &err), 0);
    assert_string_equal(err, "");
    lines = g_strsplit(out, "\n", -1);
    assert_int_equal(g_strv_length(lines), 7); /* header, PF, 4 VFs, "" */
    assert_non_null(strstr(lines[0], "ADDRESS"));
    assert_true(g_str_has_prefix(lines[1], "0000:5e:00.0  PF "));
    assert_non_null(strstr(lines[1], "15b3:1017"));
    assert_non_null(strstr(lines[1], " ib0 "));
    assert_non_null(strstr(lines[1], " infiniband "));
    assert_non_null(strstr(lines[1], " 4/8 "));
    assert_non_null(strstr(lines[1], "Mellanox Technologies MT27800 Family [ConnectX-5]"));
    assert_true(g_str_has_prefix(lines[2], "0000:5e:00.1  VF0 "));
    assert_non_null(strstr(lines[2], "vfio-pci"));
    assert_true(g_str_has_prefix(lines[5], "0000:5e:00.4  VF3 "));
}

static void test_tool_json(void **state)
{
    g_autoptr(Fixture) fx = fixture_new("cx4-eth");
    const char *args[] = {"--sysfs-root", fx->root, "--json", NULL};
    const char *args_vf[] = {"--sysfs-root", fx->root, "--json", "--address", "3b:00.3", NULL};
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    JsonObject *top, *pf, *vf;
    JsonArray *pfs, *vfs;

    assert_int_equal(run_tool(args, &out, &err), 0);
    if (!json_parser_load_from_data(parser, out, -1, &error))
        fail_msg("%s: %s", error->message, out);
    top = json_node_get_object(json_parser_get_root(parser));
    assert_string_equal(json_object_get_string_member(top, "sysfs_root"), fx->root);
    pfs = json_object_get_array_member(top, "pfs");
    assert_int_equal(json_array_get_length(pfs), 2);
    pf = json_array_get_object_element(pfs, 0);
    assert_string_equal(json_object_get_string_member(pf, "address"), "0000:3b:00.0");
    assert_string_equal(json_object_get_string_member(pf, "kind"), "pf");
    assert_string_equal(json_object_get_string_member(pf, "vendor_id"), "15b3");
    assert_string_equal(json_object_get_string_member(pf, "device_id"), "1013");
    assert_string_equal(json_object_get_string_member(pf, "vf_device_id"), "1014");
    assert_string_equal(json_object_get_string_member(pf, "driver"), "mlx5_core");
    assert_int_equal(json_object_get_int_member(pf, "iommu_group"), 40);
    assert_int_equal(json_object_get_int_member(pf, "total_vfs"), 8);
    assert_int_equal(json_object_get_int_member(pf, "num_vfs"), 2);
    assert_int_equal(json_object_get_int_member(pf, "link_type"), 1);
    assert_true(json_object_get_boolean_member(pf, "config_checked"));
    vfs = json_object_get_array_member(pf, "vfs");
    assert_int_equal(json_array_get_length(vfs), 2);
    vf = json_array_get_object_element(vfs, 1);
    assert_string_equal(json_object_get_string_member(vf, "kind"), "vf");
    assert_string_equal(json_object_get_string_member(vf, "pf_address"), "0000:3b:00.0");
    assert_int_equal(json_object_get_int_member(vf, "vf_index"), 1);
    assert_true(json_object_get_null_member(vf, "netdev"));
    assert_false(json_object_has_member(vf, "total_vfs"));

    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    assert_int_equal(run_tool(args_vf, &out, &err), 0);
    assert_true(json_parser_load_from_data(parser, out, -1, NULL));
    top = json_node_get_object(json_parser_get_root(parser));
    vf = json_object_get_object_member(top, "function");
    assert_string_equal(json_object_get_string_member(vf, "address"), "0000:3b:00.3");
    assert_int_equal(json_object_get_int_member(vf, "vf_index"), 1);
}

/* A netdev name with bytes that are not UTF-8, quotes and control characters: the JSON stays
 * valid, the table escapes them. */
static void test_tool_hostile_names(void **state)
{
    g_autoptr(Fixture) fx = fixture_new("cx5-ib");
    g_autofree char *net = fx_path(fx, "bus/pci/devices/0000:5e:00.0/net");
    g_autofree char *odd = g_build_filename(net, "i\"b\\0\x01\xff", NULL);
    g_autofree char *old = g_build_filename(net, "ib0", NULL);
    const char *args[] = {"--sysfs-root", fx->root, "--json", NULL};
    const char *args_text[] = {"--sysfs-root", fx->root, NULL};
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    JsonObject *pf;

    assert_int_equal(rename(old, odd), 0);
    assert_int_equal(run_tool(args, &out, &err), 0);
    assert_true(g_utf8_validate(out, -1, NULL));
    if (!json_parser_load_from_data(parser, out, -1, &error))
        fail_msg("%s: %s", error->message, out);
    pf = json_array_get_object_element(
        json_object_get_array_member(json_node_get_object(json_parser_get_root(parser)), "pfs"), 0);
    assert_string_equal(json_object_get_string_member(pf, "netdev"), "i\"b\\0\x01\xef\xbf\xbd");

    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    assert_int_equal(run_tool(args_text, &out, &err), 0);
    assert_non_null(strstr(out, "i\\\"b\\\\0\\001\\377"));
}

static void test_tool_errors(void **state)
{
    g_autoptr(Fixture) fx = fixture_new("bad-garbage-number");
    g_autofree char *numvfs = fx_path(fx, "bus/pci/devices/0000:5e:00.0/sriov_numvfs");
    const char *bad_tree[] = {"--sysfs-root", fx->root, NULL};
    const char *bad_option[] = {"--no-such-option", NULL};
    const char *extra_arg[] = {"extra", NULL};
    const char *bad_address[] = {"--sysfs-root", fx->root, "--address", "zz", NULL};
    const char *absent[] = {"--sysfs-root", fx->root, "--address", "0000:5e:00.6", NULL};
    const char *version[] = {"--version", NULL};
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;

    assert_int_equal(run_tool(bad_tree, &out, &err), 1);
    assert_string_equal(out, "");
    assert_true(g_str_has_prefix(err, "hotmig-sriov: "));
    assert_non_null(strstr(err, numvfs));
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    assert_int_equal(run_tool(bad_option, &out, &err), 2);
    assert_non_null(strstr(err, "--no-such-option"));
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    assert_int_equal(run_tool(extra_arg, &out, &err), 2);
    assert_non_null(strstr(err, "'extra'"));
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    assert_int_equal(run_tool(bad_address, &out, &err), 1);
    assert_non_null(strstr(err, "'zz' is not a PCI address"));
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    assert_int_equal(run_tool(absent, &out, &err), 1);
    assert_non_null(strstr(err, "No PCI device '0000:5e:00.6'"));
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    assert_int_equal(run_tool(version, &out, &err), 0);
    assert_true(g_str_has_prefix(out, "hotmig-sriov "));
}

/* ---- main -------------------------------------------------------------------------------- */

static int setup(void **state)
{
    fixtures = g_getenv("HM_FIXTURES");
    if (!fixtures) {
        fprintf(stderr, "HM_FIXTURES (tests/fixtures) is not set\n");
        return -1;
    }
    pci_ids_path = g_build_filename(fixtures, "pci.ids", NULL);
    hotplug_sysfs_set_pci_ids(pci_ids_path);
    return 0;
}

static int teardown(void **state)
{
    hotplug_sysfs_set_pci_ids(NULL);
    g_clear_pointer(&pci_ids_path, g_free);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cx4_eth),
        cmocka_unit_test(test_cx5_ib),
        cmocka_unit_test(test_cx6_ib),
        cmocka_unit_test(test_cx7_ib),
        cmocka_unit_test(test_qemu_nvme),
        cmocka_unit_test(test_no_sriov),
        cmocka_unit_test(test_read_pf_and_vf),
        cmocka_unit_test(test_read_errors),
        cmocka_unit_test(test_read_vf_not_listed_by_pf),
        cmocka_unit_test(test_mark_assigned),
        cmocka_unit_test(test_bad_fixtures),
        cmocka_unit_test(test_broken_trees),
        cmocka_unit_test(test_config_short),
        cmocka_unit_test(test_optional_attributes),
        cmocka_unit_test(test_libpci_error_long_root),
        cmocka_unit_test(test_address_parse),
        cmocka_unit_test(test_parse_values),
        cmocka_unit_test(test_dump_sriov),
        cmocka_unit_test(test_dump_vf_and_absent),
        cmocka_unit_test(test_dump_errors),
        cmocka_unit_test(test_dump_short),
        cmocka_unit_test(test_dump_matches_sysfs),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_names_bad_database),
        cmocka_unit_test(test_names_system_database),
        cmocka_unit_test(test_tool_text),
        cmocka_unit_test(test_tool_json),
        cmocka_unit_test(test_tool_hostile_names),
        cmocka_unit_test(test_tool_errors),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
