/* hm-hotplug: hand a PCI function to vfio-pci through sysfs (driver_override, unbind,
 * drivers_probe), the way libvirt's managed='yes' and driverctl do. Every path is under a sysfs
 * root so that tests run on a fixture tree. */
#define G_LOG_DOMAIN "hm-hotplug"

#include "hotplug/hotplug.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define VFIO_DRIVER "vfio-pci"
/* A driver name, a PCI address: short. More in a sysfs attribute is not what we wrote. */
#define VFIO_ATTR_MAX 256
#define VFIO_PROBE_POLL_MS 10

/* "ROOT/bus/pci/devices/ADDR" for a valid address in the kernel's spelling, or NULL with
 * HOTPLUG_ERROR_INVALID. *ret_address gets that spelling (owned). */
static char *vfio_device_dir(const char *sysfs_root, const char *address, char **ret_address,
                             GError **error)
{
    g_autoptr(GError) local = NULL;

    *ret_address = hm_pci_address_normalize(address, &local);
    if (!*ret_address) {
        g_set_error_literal(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, local->message);
        return NULL;
    }
    return g_build_filename(sysfs_root, "bus", "pci", "devices", *ret_address, NULL);
}

/* The basename of the 'driver' link of @dev_dir (owned), NULL without error when no driver is
 * bound. */
static gboolean vfio_read_driver(const char *dev_dir, char **ret_driver, GError **error)
{
    g_autofree char *link = g_build_filename(dev_dir, "driver", NULL);
    g_autoptr(GError) local = NULL;
    g_autofree char *target = g_file_read_link(link, &local);

    if (!target) {
        if (g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
            *ret_driver = NULL;
            return TRUE;
        }
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED,
                    "Cannot read the driver link of '%s': %s", dev_dir, local->message);
        return FALSE;
    }
    *ret_driver = g_path_get_basename(target);
    return TRUE;
}

/* Writes @value to the sysfs attribute @path in one write(2), as sysfs wants. The file must
 * exist (sysfs attributes are never created). */
static gboolean vfio_write_attr(const char *path, const char *value, GError **error)
{
    g_autofree char *shown = g_strchomp(g_strdup(value)); /* for messages */
    gsize len = strlen(value);
    ssize_t n;
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);

    if (fd < 0) {
        int errsv = errno;

        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED, "Cannot open '%s' for writing: %s",
                    path, g_strerror(errsv));
        return FALSE;
    }
    do {
        n = write(fd, value, len);
    } while (n < 0 && errno == EINTR);
    if (n < 0 || (gsize)n != len) {
        int errsv = n < 0 ? errno : EIO;

        close(fd);
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED, "Cannot write '%s' to '%s': %s",
                    shown, path, g_strerror(errsv));
        return FALSE;
    }
    if (close(fd) < 0) {
        int errsv = errno;

        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED, "Cannot write '%s' to '%s': %s",
                    shown, path, g_strerror(errsv));
        return FALSE;
    }
    return TRUE;
}

gboolean hotplug_vfio_get_driver(const char *sysfs_root, const char *address, char **ret_driver,
                                 GError **error)
{
    g_autofree char *canonical = NULL;
    g_autofree char *dev_dir = NULL;

    g_return_val_if_fail(sysfs_root && address && ret_driver, FALSE);

    dev_dir = vfio_device_dir(sysfs_root, address, &canonical, error);
    if (!dev_dir)
        return FALSE;
    if (!g_file_test(dev_dir, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND,
                    "PCI function '%s' does not exist (no %s)", canonical, dev_dir);
        return FALSE;
    }
    return vfio_read_driver(dev_dir, ret_driver, error);
}

/* Waits until the driver of @dev_dir is vfio-pci or @deadline passes. A driver may probe
 * asynchronously; the wait is short and has a deadline. */
static gboolean vfio_wait_bound(const char *dev_dir, HmDeadline deadline, char **ret_driver,
                                GError **error)
{
    for (;;) {
        g_autofree char *driver = NULL;

        if (!vfio_read_driver(dev_dir, &driver, error))
            return FALSE;
        if (g_strcmp0(driver, VFIO_DRIVER) == 0 || hm_deadline_remaining_ms(deadline) == 0) {
            *ret_driver = g_steal_pointer(&driver);
            return TRUE;
        }
        g_usleep(VFIO_PROBE_POLL_MS * G_TIME_SPAN_MILLISECOND);
    }
}

/* After a failed bind: clear driver_override and let the kernel probe the original driver
 * again. Best effort; says what it could not do in @note. */
static void vfio_undo(const char *sysfs_root, const char *dev_dir, const char *address,
                      const char *previous, GString *note)
{
    g_autofree char *override = g_build_filename(dev_dir, "driver_override", NULL);
    g_autofree char *probe = g_build_filename(sysfs_root, "bus", "pci", "drivers_probe", NULL);
    g_autoptr(GError) local = NULL;

    if (!vfio_write_attr(override, "\n", &local)) {
        g_string_append_printf(note, "; undo failed: %s", local->message);
        return;
    }
    if (previous && !vfio_write_attr(probe, address, &local))
        g_string_append_printf(note, "; undo failed, '%s' has no driver now: %s", address,
                               local->message);
}

/* What would make binding @canonical (in @dev_dir) to vfio-pci fail, checked before anything is
 * written: the driver not loaded, no IOMMU group. */
static gboolean vfio_bind_check(const char *sysfs_root, const char *dev_dir, const char *canonical,
                                GError **error)
{
    g_autofree char *vfio_dir =
        g_build_filename(sysfs_root, "bus", "pci", "drivers", VFIO_DRIVER, NULL);
    g_autofree char *iommu = g_build_filename(dev_dir, "iommu_group", NULL);

    if (!g_file_test(vfio_dir, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED,
                    "Cannot bind '%s' to %s: the driver is not loaded (no %s; modprobe vfio-pci)",
                    canonical, VFIO_DRIVER, vfio_dir);
        return FALSE;
    }
    if (!g_file_test(iommu, G_FILE_TEST_EXISTS)) {
        g_set_error(
            error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED,
            "Cannot bind '%s' to %s: it has no IOMMU group (no %s; is the IOMMU on, e.g. intel_iommu=on?)",
            canonical, VFIO_DRIVER, iommu);
        return FALSE;
    }
    return TRUE;
}

/* Moves @canonical from driver @previous (NULL: none) to vfio-pci: driver_override, unbind,
 * drivers_probe, then waits up to @timeout_ms for the bind; undone when it fails. */
static gboolean vfio_bind_switch(const char *sysfs_root, const char *dev_dir, const char *canonical,
                                 const char *previous, guint timeout_ms, GError **error)
{
    g_autofree char *override = g_build_filename(dev_dir, "driver_override", NULL);
    g_autofree char *probe = g_build_filename(sysfs_root, "bus", "pci", "drivers_probe", NULL);
    g_autofree char *now = NULL;
    g_autoptr(GError) local = NULL;
    HmDeadline deadline;

    if (!vfio_write_attr(override, VFIO_DRIVER, &local)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED, "Cannot bind '%s' to %s: %s",
                    canonical, VFIO_DRIVER, local->message);
        return FALSE;
    }
    if (previous) {
        g_autofree char *unbind = g_build_filename(dev_dir, "driver", "unbind", NULL);

        if (!vfio_write_attr(unbind, canonical, &local)) {
            g_autoptr(GString) msg = g_string_new(local->message);

            vfio_undo(sysfs_root, dev_dir, canonical, NULL, msg);
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED,
                        "Cannot unbind '%s' from '%s': %s", canonical, previous, msg->str);
            return FALSE;
        }
    }
    deadline = hm_deadline_in_ms(timeout_ms);
    if (!vfio_write_attr(probe, canonical, &local) ||
        !vfio_wait_bound(dev_dir, deadline, &now, &local)) {
        g_autoptr(GString) msg = g_string_new(local->message);

        vfio_undo(sysfs_root, dev_dir, canonical, previous, msg);
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED, "Cannot bind '%s' to %s: %s",
                    canonical, VFIO_DRIVER, msg->str);
        return FALSE;
    }
    if (g_strcmp0(now, VFIO_DRIVER) != 0) {
        g_autoptr(GString) msg = g_string_new(NULL);

        g_string_printf(msg, "after drivers_probe its driver is %s%s%s, not %s (%u ms)",
                        now ? "'" : "", now ? now : "none", now ? "'" : "", VFIO_DRIVER,
                        timeout_ms);
        vfio_undo(sysfs_root, dev_dir, canonical, previous, msg);
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED, "Cannot bind '%s' to %s: %s",
                    canonical, VFIO_DRIVER, msg->str);
        return FALSE;
    }
    return TRUE;
}

gboolean hotplug_vfio_bind(const char *sysfs_root, const char *address, guint timeout_ms,
                           gboolean *ret_changed, char **ret_previous_driver, GError **error)
{
    g_autofree char *canonical = NULL;
    g_autofree char *dev_dir = NULL;
    g_autofree char *previous = NULL;
    gboolean changed = FALSE;

    g_return_val_if_fail(sysfs_root && address, FALSE);

    if (!hotplug_vfio_get_driver(sysfs_root, address, &previous, error))
        return FALSE;
    dev_dir = vfio_device_dir(sysfs_root, address, &canonical, error);
    g_assert(dev_dir); /* hotplug_vfio_get_driver() checked the address */
    if (g_strcmp0(previous, VFIO_DRIVER) == 0) {
        g_debug("'%s' is bound to %s already", canonical, VFIO_DRIVER);
    } else {
        if (!vfio_bind_check(sysfs_root, dev_dir, canonical, error) ||
            !vfio_bind_switch(sysfs_root, dev_dir, canonical, previous, timeout_ms, error))
            return FALSE;
        g_debug("'%s' bound to %s (was %s)", canonical, VFIO_DRIVER,
                previous ? previous : "unbound");
        changed = TRUE;
    }
    if (ret_changed)
        *ret_changed = changed;
    if (ret_previous_driver)
        *ret_previous_driver = g_steal_pointer(&previous);
    return TRUE;
}
