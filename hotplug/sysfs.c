/* hm-hotplug: SR-IOV discovery from sysfs, with libpci (pci-libpci.c) for the ID database and
 * the SR-IOV capability in config space. What is read from where: docs/sriov.md. */
#define G_LOG_DOMAIN "hm-hotplug"

#include "hotplug/hotplug.h"
#include "common/pci-address.h"
#include "hotplug/pci-priv.h"
#include "hotplug/sysfs-priv.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- attribute parsers ------------------------------------------------------------------- */

/* The value part of an attribute: @text without its one trailing newline, as a new string, or
 * NULL (error set) when it holds a NUL byte or is empty. */
static char *attr_value(const char *path, const char *text, gsize len, GError **error)
{
    if (len > 0 && text[len - 1] == '\n')
        len--;
    if (memchr(text, '\0', len)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS, "'%s' holds a NUL byte", path);
        return NULL;
    }
    if (len == 0) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS, "'%s' is empty", path);
        return NULL;
    }
    return g_strndup(text, len);
}

/* @value for a message: escaped, at most 40 bytes of it. Owned. */
static char *attr_quote(const char *value)
{
    g_autofree char *head = g_strndup(value, 40);
    g_autofree char *escaped = g_strescape(head, NULL);

    return strlen(value) > 40 ? g_strconcat(escaped, "...", NULL) : g_steal_pointer(&escaped);
}

static gboolean attr_bad(const char *path, const char *value, const char *what, GError **error)
{
    g_autofree char *quoted = attr_quote(value);

    g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS, "'%s' holds '%s', not %s", path, quoted,
                what);
    return FALSE;
}

gboolean hotplug_sysfs_parse_uint(const char *path, const char *text, gsize len, guint max,
                                  guint *ret, GError **error)
{
    g_autofree char *value = attr_value(path, text, len, error);
    g_autofree char *what = NULL;
    guint64 n;

    if (!value)
        return FALSE;
    what = g_strdup_printf("a decimal number 0..%u", max);
    if (!g_ascii_isdigit(value[0]) || !g_ascii_string_to_unsigned(value, 10, 0, max, &n, NULL))
        return attr_bad(path, value, what, error);
    *ret = (guint)n;
    return TRUE;
}

gboolean hotplug_sysfs_parse_int(const char *path, const char *text, gsize len, int min, int max,
                                 int *ret, GError **error)
{
    g_autofree char *value = attr_value(path, text, len, error);
    g_autofree char *what = NULL;
    gint64 n;

    if (!value)
        return FALSE;
    what = g_strdup_printf("a decimal number %d..%d", min, max);
    if (!(g_ascii_isdigit(value[0]) || (value[0] == '-' && g_ascii_isdigit(value[1]))) ||
        !g_ascii_string_to_signed(value, 10, min, max, &n, NULL))
        return attr_bad(path, value, what, error);
    *ret = (int)n;
    return TRUE;
}

gboolean hotplug_sysfs_parse_id(const char *path, const char *text, gsize len, gboolean with_prefix,
                                guint *ret, GError **error)
{
    g_autofree char *value = attr_value(path, text, len, error);
    const char *digits;
    gsize n;
    guint id = 0;

    if (!value)
        return FALSE;
    digits = value;
    if (with_prefix) {
        if (!g_str_has_prefix(value, "0x"))
            return attr_bad(path, value, "a 16-bit ID (0x and 1-4 hex digits)", error);
        digits += 2;
    }
    n = strlen(digits);
    if (n == 0 || n > 4)
        return attr_bad(path, value,
                        with_prefix ? "a 16-bit ID (0x and 1-4 hex digits)"
                                    : "a 16-bit ID (1-4 hex digits)",
                        error);
    for (gsize i = 0; i < n; i++) {
        if (!g_ascii_isxdigit(digits[i]))
            return attr_bad(path, value,
                            with_prefix ? "a 16-bit ID (0x and 1-4 hex digits)"
                                        : "a 16-bit ID (1-4 hex digits)",
                            error);
        id = id * 16 + (guint)g_ascii_xdigit_value(digits[i]);
    }
    *ret = id;
    return TRUE;
}

/* ---- file system helpers ----------------------------------------------------------------- */

/* Errors of hm-common (hm_file_read_limited) in hm-hotplug's domain, message kept. */
static void sysfs_error_from(GError **error, GError *local)
{
    g_set_error_literal(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS, local->message);
}

static void sysfs_error_errno(GError **error, int errsv, const char *what, const char *path)
{
    if (errsv == ELOOP)
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                    "Cannot %s '%s': a symbolic link loop (%s)", what, path, g_strerror(errsv));
    else
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS, "Cannot %s '%s': %s", what, path,
                    g_strerror(errsv));
}

/* Reads attribute @name of directory @dir (a sysfs attribute: at most a page). */
static gboolean sysfs_read_attr(const char *dir, const char *name, char **ret_path, char **ret_text,
                                gsize *ret_len, GError **error)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autoptr(GError) local = NULL;
    struct stat st;

    /* A fifo would block the read, a device node read anything: attributes are files. */
    if (stat(path, &st) != 0) {
        sysfs_error_errno(error, errno, "read", path);
        return FALSE;
    }
    if (!S_ISREG(st.st_mode)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS, "'%s' is not a regular file", path);
        return FALSE;
    }
    if (!hm_file_read_limited(path, HOTPLUG_SYSFS_ATTR_MAX_BYTES, ret_text, ret_len, &local)) {
        sysfs_error_from(error, local);
        return FALSE;
    }
    *ret_path = g_steal_pointer(&path);
    return TRUE;
}

static gboolean sysfs_read_uint(const char *dir, const char *name, guint max, guint *ret,
                                GError **error)
{
    g_autofree char *path = NULL;
    g_autofree char *text = NULL;
    gsize len;

    return sysfs_read_attr(dir, name, &path, &text, &len, error) &&
           hotplug_sysfs_parse_uint(path, text, len, max, ret, error);
}

static gboolean sysfs_read_id(const char *dir, const char *name, gboolean with_prefix, guint *ret,
                              GError **error)
{
    g_autofree char *path = NULL;
    g_autofree char *text = NULL;
    gsize len;

    return sysfs_read_attr(dir, name, &path, &text, &len, error) &&
           hotplug_sysfs_parse_id(path, text, len, with_prefix, ret, error);
}

/* Whether @path exists (following links). A dangling link counts as an error, not as absent:
 * the kernel never leaves one. */
static gboolean sysfs_exists(const char *path, gboolean *ret_exists, GError **error)
{
    struct stat st;

    if (stat(path, &st) == 0) {
        *ret_exists = TRUE;
        return TRUE;
    }
    if (errno == ENOENT || errno == ENOTDIR) {
        if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                        "'%s' is a dangling symbolic link", path);
            return FALSE;
        }
        *ret_exists = FALSE;
        return TRUE;
    }
    sysfs_error_errno(error, errno, "look at", path);
    return FALSE;
}

/* The target of symbolic link @path (owned), or NULL without error when @path does not exist
 * and @optional. */
static gboolean sysfs_read_link(const char *path, gboolean optional, char **ret_target,
                                GError **error)
{
    g_autoptr(GError) local = NULL;
    char *target = g_file_read_link(path, &local);

    if (target) {
        *ret_target = target;
        return TRUE;
    }
    if (optional && g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
        *ret_target = NULL;
        return TRUE;
    }
    if (g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_INVAL))
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS, "'%s' is not a symbolic link", path);
    else
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS, "Cannot read the link '%s': %s",
                    path, local->message);
    return FALSE;
}

/* The last component of link @path's target (owned: "mlx5_core" for
 * "../../../../bus/pci/drivers/mlx5_core"), NULL without error when absent and @optional. */
static gboolean sysfs_link_name(const char *path, gboolean optional, char **ret_name,
                                GError **error)
{
    g_autofree char *target = NULL;
    g_autofree char *name = NULL;
    g_autofree char *quoted = NULL;

    if (!sysfs_read_link(path, optional, &target, error))
        return FALSE;
    if (!target) {
        *ret_name = NULL;
        return TRUE;
    }
    name = g_path_get_basename(target);
    if (g_str_has_suffix(target, "/") || g_str_equal(name, ".") || g_str_equal(name, "..") ||
        g_str_equal(name, "/")) {
        quoted = attr_quote(target);
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                    "The link '%s' points to '%s', which names nothing", path, quoted);
        return FALSE;
    }
    *ret_name = g_steal_pointer(&name);
    return TRUE;
}

/* realpath(3) of @path (owned), with an error naming it when it dangles or loops. */
static char *sysfs_resolve(const char *path, GError **error)
{
    char *real = realpath(path, NULL);
    struct stat st;

    if (real)
        return real;
    if (errno == ENOENT && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS, "'%s' is a dangling symbolic link",
                    path);
    else
        sysfs_error_errno(error, errno, "resolve", path);
    return NULL;
}

/* g_ptr_array_sort() passes pointers to the elements. */
static gint names_compare(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The names in directory @path, sorted; at most @max of them. An absent directory gives an
 * empty array when @optional. */
static GPtrArray *sysfs_list_dir(const char *path, gboolean optional, guint max, GError **error)
{
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    DIR *dir = opendir(path); /* O_CLOEXEC in glibc */
    struct dirent *entry;

    if (!dir) {
        if (optional && errno == ENOENT)
            return g_steal_pointer(&names);
        sysfs_error_errno(error, errno, "open the directory", path);
        return NULL;
    }
    for (;;) {
        errno = 0;
        entry = readdir(dir);
        if (!entry)
            break;
        if (g_str_equal(entry->d_name, ".") || g_str_equal(entry->d_name, ".."))
            continue;
        if (names->len >= max) {
            closedir(dir);
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                        "'%s' holds more than %u entries", path, max);
            return NULL;
        }
        g_ptr_array_add(names, g_strdup(entry->d_name));
    }
    if (errno != 0) {
        int errsv = errno;
        closedir(dir);
        sysfs_error_errno(error, errsv, "read the directory", path);
        return NULL;
    }
    closedir(dir);
    g_ptr_array_sort(names, names_compare);
    return g_steal_pointer(&names);
}

/* ---- functions --------------------------------------------------------------------------- */

void hotplug_pci_function_free(HotplugPciFunction *fn)
{
    if (!fn)
        return;
    g_free(fn->address);
    g_free(fn->pf_address);
    g_free(fn->vendor_name);
    g_free(fn->device_name);
    g_free(fn->driver);
    g_free(fn->netdev);
    g_ptr_array_unref(fn->vfs);
    g_free(fn->assigned_to);
    g_free(fn);
}

static HotplugPciFunction *pci_function_new(const char *address)
{
    HotplugPciFunction *fn = g_new0(HotplugPciFunction, 1);

    fn->address = g_strdup(address);
    fn->iommu_group = -1;
    fn->numa_node = -1;
    fn->vfs = g_ptr_array_new_with_free_func((GDestroyNotify)hotplug_pci_function_free);
    return fn;
}

/* One discovery: the sysfs root, its bus/pci/devices and the libpci handle. */
typedef struct {
    const char *root;
    char *devices;
    HotplugPci *pci;
} SysfsCtx;

static gboolean sysfs_ctx_init(SysfsCtx *ctx, const char *sysfs_root, GError **error)
{
    ctx->root = sysfs_root;
    ctx->devices = g_build_filename(sysfs_root, "bus", "pci", "devices", NULL);
    ctx->pci = hotplug_pci_open(sysfs_root, error);
    return ctx->pci != NULL;
}

static void sysfs_ctx_clear(SysfsCtx *ctx)
{
    g_clear_pointer(&ctx->devices, g_free);
    g_clear_pointer(&ctx->pci, hotplug_pci_close);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(SysfsCtx, sysfs_ctx_clear)

static char *device_dir(const SysfsCtx *ctx, const char *address)
{
    return g_build_filename(ctx->devices, address, NULL);
}

/* iommu_group: a link to kernel/iommu_groups/N; -1 without one. */
static gboolean read_iommu_group(const char *dir, int *ret, GError **error)
{
    g_autofree char *path = g_build_filename(dir, "iommu_group", NULL);
    g_autofree char *name = NULL;
    g_autoptr(GError) local = NULL;

    if (!sysfs_link_name(path, TRUE, &name, error))
        return FALSE;
    if (!name) {
        *ret = -1;
        return TRUE;
    }
    if (!hotplug_sysfs_parse_int(path, name, strlen(name), 0, INT_MAX, ret, &local)) {
        g_autofree char *quoted = attr_quote(name);
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                    "The link '%s' points to group '%s', not a group number", path, quoted);
        return FALSE;
    }
    return TRUE;
}

/* numa_node: "-1" when unknown; absent (a kernel without NUMA) counts as unknown. */
static gboolean read_numa_node(const char *dir, int *ret, GError **error)
{
    g_autofree char *path = g_build_filename(dir, "numa_node", NULL);
    g_autofree char *text = NULL;
    gboolean exists;
    gsize len;

    if (!sysfs_exists(path, &exists, error))
        return FALSE;
    if (!exists) {
        *ret = -1;
        return TRUE;
    }
    g_clear_pointer(&path, g_free);
    return sysfs_read_attr(dir, "numa_node", &path, &text, &len, error) &&
           hotplug_sysfs_parse_int(path, text, len, -1, HOTPLUG_SYSFS_MAX_NUMA_NODE, ret, error);
}

/* net/: the first interface by name and its ARPHRD type (net/X/type). */
static gboolean read_netdev(const char *dir, char **ret_netdev, guint *ret_type, GError **error)
{
    g_autofree char *net = g_build_filename(dir, "net", NULL);
    g_autofree char *netdir = NULL;
    g_autoptr(GPtrArray) names = sysfs_list_dir(net, TRUE, HOTPLUG_SYSFS_MAX_NETDEVS, error);
    guint type;

    if (!names)
        return FALSE;
    if (names->len == 0) {
        *ret_netdev = NULL;
        *ret_type = 0;
        return TRUE;
    }
    netdir = g_build_filename(net, g_ptr_array_index(names, 0), NULL);
    if (!sysfs_read_uint(netdir, "type", 0xffff, &type, error))
        return FALSE;
    *ret_netdev = g_strdup(g_ptr_array_index(names, 0));
    *ret_type = type;
    return TRUE;
}

/* What every function has: IDs, names, driver, IOMMU group, NUMA node, net device. */
static HotplugPciFunction *read_function(SysfsCtx *ctx, const char *address, GError **error)
{
    g_autoptr(HotplugPciFunction) fn = pci_function_new(address);
    g_autofree char *dir = device_dir(ctx, address);
    g_autofree char *driver_link = g_build_filename(dir, "driver", NULL);
    g_autoptr(GError) local = NULL;

    if (!sysfs_read_id(dir, "vendor", TRUE, &fn->vendor_id, error) ||
        !sysfs_read_id(dir, "device", TRUE, &fn->device_id, error) ||
        !sysfs_link_name(driver_link, TRUE, &fn->driver, error) ||
        !read_iommu_group(dir, &fn->iommu_group, error) ||
        !read_numa_node(dir, &fn->numa_node, error) ||
        !read_netdev(dir, &fn->netdev, &fn->link_type, error))
        return NULL;
    /* Names are for people: a broken pci.ids costs them, not the discovery. */
    if (!hotplug_pci_lookup_names(ctx->pci, fn->vendor_id, fn->device_id, &fn->vendor_name,
                                  &fn->device_name, &local))
        g_debug("%s", local->message);
    return g_steal_pointer(&fn);
}

/* The routing ID of VF @index of @pf by the SR-IOV capability, as an address (owned), or NULL
 * when it falls outside the PF's domain's 16-bit routing ID space. */
static char *vf_address_by_capability(const HotplugPciFunction *pf, guint index)
{
    HmPciAddress addr;
    guint64 rid;

    if (!hm_pci_address_parse(pf->address, &addr, NULL))
        return NULL;
    rid = ((guint64)addr.bus << 8 | addr.slot << 3 | addr.function) + pf->vf_offset +
          (guint64)pf->vf_stride * index;
    if (rid > 0xffff)
        return NULL;
    addr.bus = (guint)(rid >> 8);
    addr.slot = (guint)(rid >> 3) & 0x1f;
    addr.function = (guint)rid & 7;
    return hm_pci_address_format(&addr);
}

/* The SR-IOV capability (config space, through libpci) against what sysfs says. */
static gboolean check_sriov_config(SysfsCtx *ctx, HotplugPciFunction *pf, const char *dir,
                                   GError **error)
{
    g_autofree char *config = g_build_filename(dir, "config", NULL);
    HotplugPciSriovStatus status;
    HotplugPciSriov sriov;
    gboolean exists;

    if (!hotplug_pci_read_sriov(ctx->pci, pf->address, &status, &sriov, error))
        return FALSE;
    switch (status) {
    case HOTPLUG_PCI_SRIOV_SHORT:
        /* Not root: the kernel shows the first 64 bytes only. sysfs has the VF device ID. */
        g_debug(
            "'%s' is not readable beyond the standard header: the SR-IOV capability of '%s' is not checked",
            config, pf->address);
        {
            g_autofree char *path = g_build_filename(dir, "sriov_vf_device", NULL);

            if (!sysfs_exists(path, &exists, error))
                return FALSE;
            if (exists && !sysfs_read_id(dir, "sriov_vf_device", FALSE, &pf->vf_device_id, error))
                return FALSE;
        }
        return TRUE;
    case HOTPLUG_PCI_SRIOV_ABSENT:
        g_set_error(
            error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
            "'%s' has no SR-IOV capability, but '%s/sriov_totalvfs' says '%s' is an SR-IOV PF",
            config, dir, pf->address);
        return FALSE;
    case HOTPLUG_PCI_SRIOV_FOUND:
        break;
    }

    if (sriov.vendor_id != pf->vendor_id || sriov.device_id != pf->device_id) {
        g_set_error(
            error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
            "'%s' is the config space of %04x:%04x, but '%s/vendor' and 'device' say %04x:%04x",
            config, sriov.vendor_id, sriov.device_id, dir, pf->vendor_id, pf->device_id);
        return FALSE;
    }
    /* A driver may lower sriov_totalvfs below TotalVFs (pci_sriov_set_totalvfs), never raise it. */
    if (pf->total_vfs > sriov.total_vfs) {
        g_set_error(
            error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
            "'%s/sriov_totalvfs' says %u VFs, more than TotalVFs %u of the SR-IOV capability in '%s'",
            dir, pf->total_vfs, sriov.total_vfs, config);
        return FALSE;
    }
    if (sriov.control & HOTPLUG_PCI_SRIOV_CTRL_VFE) {
        if (sriov.num_vfs != pf->num_vfs) {
            g_set_error(
                error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                "'%s/sriov_numvfs' says %u VFs, but NumVFs is %u in the SR-IOV capability in '%s'",
                dir, pf->num_vfs, sriov.num_vfs, config);
            return FALSE;
        }
    } else if (pf->num_vfs > 0) {
        g_set_error(
            error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
            "'%s/sriov_numvfs' says %u VFs, but VF Enable is clear in the SR-IOV capability in '%s'",
            dir, pf->num_vfs, config);
        return FALSE;
    }
    /* The kernel refuses to enable VFs without an offset, or more than one without a stride. */
    if (pf->num_vfs > 0 && (sriov.vf_offset == 0 || (pf->num_vfs > 1 && sriov.vf_stride == 0))) {
        g_set_error(
            error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
            "The SR-IOV capability in '%s' has First VF Offset %u and VF Stride %u, which place no VFs",
            config, sriov.vf_offset, sriov.vf_stride);
        return FALSE;
    }
    pf->vf_device_id = sriov.vf_device_id;
    pf->vf_offset = sriov.vf_offset;
    pf->vf_stride = sriov.vf_stride;
    pf->config_checked = TRUE;
    return TRUE;
}

/* VF @index of @pf: follows PF/virtfnN, checks it is the device of that name in
 * bus/pci/devices and that its physfn leads back to @pf. */
/* The device that @link (a PF's virtfnN) names: a PCI address (*@ret_address) whose directory
 * under the devices (*@ret_dir) is where the link leads. */
static gboolean vf_link_target(SysfsCtx *ctx, const char *link, char **ret_address, char **ret_dir,
                               GError **error)
{
    g_autofree char *name = NULL;
    g_autofree char *address = NULL;
    g_autofree char *dir = NULL;
    g_autofree char *real_link = NULL;
    g_autofree char *real_dir = NULL;
    gboolean exists;

    if (!sysfs_link_name(link, FALSE, &name, error))
        return FALSE;
    address = hm_pci_address_normalize(name, NULL);
    if (!address || !g_str_equal(address, name)) {
        g_autofree char *quoted = attr_quote(name);
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                    "The link '%s' points to '%s', not to a PCI device", link, quoted);
        return FALSE;
    }
    real_link = sysfs_resolve(link, error);
    if (!real_link)
        return FALSE;
    dir = device_dir(ctx, address);
    if (!sysfs_exists(dir, &exists, error))
        return FALSE;
    if (!exists) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                    "The link '%s' points to '%s', which is not in '%s'", link, address,
                    ctx->devices);
        return FALSE;
    }
    real_dir = sysfs_resolve(dir, error);
    if (!real_dir)
        return FALSE;
    if (!g_str_equal(real_link, real_dir)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                    "The link '%s' leads to '%s', but '%s' to '%s'", link, real_link, dir,
                    real_dir);
        return FALSE;
    }
    *ret_address = g_steal_pointer(&address);
    *ret_dir = g_steal_pointer(&dir);
    return TRUE;
}

/* The physfn link of VF @address (in @dir, the target of @pf_dir's @link_name) leads back to
 * @pf. */
static gboolean vf_physfn_check(const HotplugPciFunction *pf, const char *pf_dir,
                                const char *link_name, const char *link, const char *address,
                                const char *dir, GError **error)
{
    g_autofree char *physfn = g_build_filename(dir, "physfn", NULL);
    g_autofree char *physfn_name = NULL;
    g_autofree char *real_physfn = NULL;
    g_autofree char *real_pf = NULL;

    if (!sysfs_link_name(physfn, TRUE, &physfn_name, error))
        return FALSE;
    if (!physfn_name) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                    "'%s' is missing: '%s' (the target of '%s') is not a VF", physfn, address,
                    link);
        return FALSE;
    }
    real_physfn = sysfs_resolve(physfn, error);
    if (!real_physfn)
        return FALSE;
    real_pf = sysfs_resolve(pf_dir, error);
    if (!real_pf)
        return FALSE;
    if (!g_str_equal(physfn_name, pf->address) || !g_str_equal(real_physfn, real_pf)) {
        g_autofree char *quoted = attr_quote(physfn_name);
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                    "The link '%s' points to '%s', not to '%s' whose '%s' points to '%s'", physfn,
                    quoted, pf->address, link_name, address);
        return FALSE;
    }
    return TRUE;
}

/* VF @vf (read from @dir, the target of @link) is what its PF @pf makes: where the SR-IOV
 * capability puts VF @index, and the IDs. */
static gboolean vf_matches_pf(const HotplugPciFunction *pf, const HotplugPciFunction *vf,
                              guint index, const char *link, const char *dir, GError **error)
{
    if (pf->config_checked) {
        g_autofree char *expected = vf_address_by_capability(pf, index);

        if (!expected || !g_str_equal(expected, vf->address)) {
            g_set_error(
                error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                "The link '%s' points to '%s', but the SR-IOV capability of '%s' (First VF Offset %u, VF Stride %u) puts VF %u at '%s'",
                link, vf->address, pf->address, pf->vf_offset, pf->vf_stride, index,
                expected ? expected : "(beyond the routing ID space)");
            return FALSE;
        }
    }
    if (vf->vendor_id != pf->vendor_id ||
        (pf->vf_device_id != 0 && vf->device_id != pf->vf_device_id)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                    "VF '%s' is %04x:%04x in '%s', but its PF '%s' makes VFs %04x:%04x",
                    vf->address, vf->vendor_id, vf->device_id, dir, pf->address, pf->vendor_id,
                    pf->vf_device_id);
        return FALSE;
    }
    return TRUE;
}

static HotplugPciFunction *read_vf(SysfsCtx *ctx, const HotplugPciFunction *pf, const char *pf_dir,
                                   guint index, GError **error)
{
    g_autofree char *link_name = g_strdup_printf("virtfn%u", index);
    g_autofree char *link = g_build_filename(pf_dir, link_name, NULL);
    g_autofree char *address = NULL;
    g_autofree char *dir = NULL;
    g_autoptr(HotplugPciFunction) vf = NULL;

    if (!vf_link_target(ctx, link, &address, &dir, error) ||
        !vf_physfn_check(pf, pf_dir, link_name, link, address, dir, error))
        return NULL;
    vf = read_function(ctx, address, error);
    if (!vf)
        return NULL;
    vf->pf_address = g_strdup(pf->address);
    vf->vf_index = index;
    if (!vf_matches_pf(pf, vf, index, link, dir, error))
        return NULL;
    return g_steal_pointer(&vf);
}

/* The virtfnN entries of @dir must be exactly virtfn0 .. virtfn(num_vfs - 1). */
static gboolean check_virtfn_links(const HotplugPciFunction *pf, const char *dir, GError **error)
{
    g_autoptr(GPtrArray) names = sysfs_list_dir(dir, FALSE, HOTPLUG_SYSFS_MAX_DIR_ENTRIES, error);
    g_autofree guint8 *seen = g_new0(guint8, pf->num_vfs + 1);
    guint count = 0;

    if (!names)
        return FALSE;
    for (guint i = 0; i < names->len; i++) {
        const char *name = g_ptr_array_index(names, i);
        guint64 n;

        if (!g_str_has_prefix(name, "virtfn"))
            continue;
        /* "virtfn" then a decimal number as the kernel prints it ("%u": no leading zero). */
        if (!g_ascii_isdigit(name[6]) || (name[6] == '0' && name[7] != '\0') ||
            !g_ascii_string_to_unsigned(name + 6, 10, 0, G_MAXUINT, &n, NULL)) {
            g_autofree char *quoted = attr_quote(name);
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                        "'%s' holds '%s', which is not virtfnN", dir, quoted);
            return FALSE;
        }
        if (n >= pf->num_vfs) {
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                        "'%s/%s' exists, but '%s/sriov_numvfs' says %u VFs", dir, name, dir,
                        pf->num_vfs);
            return FALSE;
        }
        seen[n] = 1;
        count++;
    }
    if (count != pf->num_vfs) {
        guint missing = 0;

        while (seen[missing])
            missing++;
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                    "'%s/virtfn%u' is missing, but '%s/sriov_numvfs' says %u VFs", dir, missing,
                    dir, pf->num_vfs);
        return FALSE;
    }
    return TRUE;
}

/* A PF (sriov_totalvfs exists) with its VFs. */
static HotplugPciFunction *read_pf(SysfsCtx *ctx, const char *address, GError **error)
{
    g_autofree char *dir = device_dir(ctx, address);
    g_autoptr(HotplugPciFunction) pf = read_function(ctx, address, error);

    if (!pf)
        return NULL;
    if (!sysfs_read_uint(dir, "sriov_totalvfs", HOTPLUG_SYSFS_MAX_VFS, &pf->total_vfs, error) ||
        !sysfs_read_uint(dir, "sriov_numvfs", HOTPLUG_SYSFS_MAX_VFS, &pf->num_vfs, error))
        return NULL;
    if (pf->num_vfs > pf->total_vfs) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                    "'%s/sriov_numvfs' says %u VFs, more than the %u of '%s/sriov_totalvfs'", dir,
                    pf->num_vfs, pf->total_vfs, dir);
        return NULL;
    }
    if (!check_sriov_config(ctx, pf, dir, error) || !check_virtfn_links(pf, dir, error))
        return NULL;
    for (guint i = 0; i < pf->num_vfs; i++) {
        HotplugPciFunction *vf = read_vf(ctx, pf, dir, i, error);

        if (!vf)
            return NULL;
        g_ptr_array_add(pf->vfs, vf);
    }
    g_debug("PF '%s': %u of %u VFs", pf->address, pf->num_vfs, pf->total_vfs);
    return g_steal_pointer(&pf);
}

/* ---- the entry points -------------------------------------------------------------------- */

typedef struct {
    HmPciAddress addr;
    char *name;
} SysfsEntry;

static gint entry_compare(gconstpointer pa, gconstpointer pb)
{
    const HmPciAddress *a = &((const SysfsEntry *)pa)->addr;
    const HmPciAddress *b = &((const SysfsEntry *)pb)->addr;

    if (a->domain != b->domain)
        return a->domain < b->domain ? -1 : 1;
    if (a->bus != b->bus)
        return a->bus < b->bus ? -1 : 1;
    if (a->slot != b->slot)
        return a->slot < b->slot ? -1 : 1;
    if (a->function != b->function)
        return a->function < b->function ? -1 : 1;
    return 0;
}

GPtrArray *hotplug_sysfs_list_pfs(const char *sysfs_root, GError **error)
{
    g_auto(SysfsCtx) ctx = {0};
    g_autoptr(GPtrArray) names = NULL;
    g_autoptr(GArray) entries = g_array_new(FALSE, TRUE, sizeof(SysfsEntry));
    g_autoptr(GPtrArray) pfs =
        g_ptr_array_new_with_free_func((GDestroyNotify)hotplug_pci_function_free);

    g_return_val_if_fail(sysfs_root != NULL, NULL);

    if (!sysfs_ctx_init(&ctx, sysfs_root, error))
        return NULL;
    names = sysfs_list_dir(ctx.devices, FALSE, HOTPLUG_SYSFS_MAX_DEVICES, error);
    if (!names)
        return NULL;
    for (guint i = 0; i < names->len; i++) {
        SysfsEntry entry = {.name = g_ptr_array_index(names, i)};
        g_autofree char *normal = NULL;

        if (hm_pci_address_parse(entry.name, &entry.addr, NULL))
            normal = hm_pci_address_format(&entry.addr);
        if (!normal || !g_str_equal(normal, entry.name)) {
            g_autofree char *quoted = attr_quote(entry.name);
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                        "'%s' holds '%s', which is not a PCI address", ctx.devices, quoted);
            return NULL;
        }
        g_array_append_val(entries, entry);
    }
    g_array_sort(entries, entry_compare);

    for (guint i = 0; i < entries->len; i++) {
        const SysfsEntry *entry = &g_array_index(entries, SysfsEntry, i);
        g_autofree char *dir = device_dir(&ctx, entry->name);
        g_autofree char *totalvfs = g_build_filename(dir, "sriov_totalvfs", NULL);
        HotplugPciFunction *pf;
        gboolean exists;

        if (!sysfs_exists(dir, &exists, error) || !sysfs_exists(totalvfs, &exists, error))
            return NULL;
        if (!exists)
            continue;
        pf = read_pf(&ctx, entry->name, error);
        if (!pf)
            return NULL;
        g_ptr_array_add(pfs, pf);
    }
    return g_steal_pointer(&pfs);
}

HotplugPciFunction *hotplug_sysfs_read(const char *sysfs_root, const char *address, GError **error)
{
    g_auto(SysfsCtx) ctx = {0};
    g_autoptr(GError) local = NULL;
    g_autofree char *normal = NULL;
    g_autofree char *dir = NULL;
    g_autofree char *path = NULL;
    g_autofree char *pf_name = NULL;
    g_autofree char *pf_address = NULL;
    g_autoptr(HotplugPciFunction) pf = NULL;
    struct stat st;
    gboolean exists;

    g_return_val_if_fail(sysfs_root != NULL, NULL);
    g_return_val_if_fail(address != NULL, NULL);

    normal = hm_pci_address_normalize(address, &local);
    if (!normal) {
        g_set_error_literal(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, local->message);
        return NULL;
    }
    if (!sysfs_ctx_init(&ctx, sysfs_root, error))
        return NULL;
    dir = device_dir(&ctx, normal);
    if (lstat(dir, &st) != 0) {
        if (errno == ENOENT) {
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND, "No PCI device '%s' in '%s'",
                        normal, ctx.devices);
            return NULL;
        }
        sysfs_error_errno(error, errno, "look at", dir);
        return NULL;
    }
    if (!sysfs_exists(dir, &exists, error))
        return NULL;

    path = g_build_filename(dir, "sriov_totalvfs", NULL);
    if (!sysfs_exists(path, &exists, error))
        return NULL;
    if (exists)
        return read_pf(&ctx, normal, error);

    g_clear_pointer(&path, g_free);
    path = g_build_filename(dir, "physfn", NULL);
    if (!sysfs_link_name(path, TRUE, &pf_name, error))
        return NULL;
    if (!pf_name) {
        g_set_error(
            error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
            "'%s' is neither an SR-IOV PF (no '%s/sriov_totalvfs') nor a VF (no '%s/physfn')",
            normal, dir, dir);
        return NULL;
    }
    pf_address = hm_pci_address_normalize(pf_name, NULL);
    if (!pf_address || !g_str_equal(pf_address, pf_name)) {
        g_autofree char *quoted = attr_quote(pf_name);
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                    "The link '%s' points to '%s', not to a PCI device", path, quoted);
        return NULL;
    }
    /* The whole PF, so the VF is checked against it and its index is known. */
    pf = read_pf(&ctx, pf_address, error);
    if (!pf)
        return NULL;
    for (guint i = 0; i < pf->vfs->len; i++) {
        HotplugPciFunction *vf = g_ptr_array_index(pf->vfs, i);

        if (g_str_equal(vf->address, normal))
            return g_ptr_array_steal_index(pf->vfs, i);
    }
    g_set_error(
        error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
        "The link '%s' names '%s' as the PF of '%s', but none of its virtfnN links points to '%s'",
        path, pf_address, normal, normal);
    return NULL;
}

void hotplug_sysfs_set_pci_ids(const char *path)
{
    hotplug_pci_set_ids_path(path);
}

static void mark_one(HotplugPciFunction *fn, GHashTable *pci_to_domain)
{
    const char *domain = pci_to_domain ? g_hash_table_lookup(pci_to_domain, fn->address) : NULL;

    g_free(fn->assigned_to);
    fn->assigned_to = g_strdup(domain);
}

void hotplug_sysfs_mark_assigned(GPtrArray *pfs, GHashTable *pci_to_domain)
{
    g_return_if_fail(pfs != NULL);

    for (guint i = 0; i < pfs->len; i++) {
        HotplugPciFunction *pf = g_ptr_array_index(pfs, i);

        mark_one(pf, pci_to_domain);
        for (guint j = 0; j < pf->vfs->len; j++)
            mark_one(g_ptr_array_index(pf->vfs, j), pci_to_domain);
    }
}
