/* Unit tests for hm-hotplug's vfio binding, on a sysfs fixture tree the test builds in a temp
 * dir. A "kernel" thread reads the FIFO that stands in for bus/pci/drivers_probe and, as the
 * kernel would, binds the device to the driver its driver_override names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hotplug/hotplug.h"
#include "test-dir.h"

#define VF "0000:3b:00.1"

typedef struct {
    char *root;
    GThread *kernel; /* NULL: drivers_probe is a plain file, nothing binds */
    gint probes;     /* drivers_probe writes the kernel thread saw (atomic) */
} Fixture;

static char *fx_path(const Fixture *fx, const char *rel)
{
    return g_build_filename(fx->root, rel, NULL);
}

static void fx_mkdir(const Fixture *fx, const char *rel)
{
    g_autofree char *p = fx_path(fx, rel);

    assert_int_equal(g_mkdir_with_parents(p, 0755), 0);
}

static void fx_write(const Fixture *fx, const char *rel, const char *content)
{
    g_autofree char *p = fx_path(fx, rel);

    assert_true(g_file_set_contents(p, content, -1, NULL));
}

static char *fx_read(const Fixture *fx, const char *rel)
{
    g_autofree char *p = fx_path(fx, rel);
    char *content = NULL;

    assert_true(g_file_get_contents(p, &content, NULL, NULL));
    return content;
}

/* The device's driver link points at bus/pci/drivers/@driver (NULL: no link). */
static void fx_link_driver(const Fixture *fx, const char *driver)
{
    g_autofree char *link = fx_path(fx, "bus/pci/devices/" VF "/driver");
    g_autofree char *target = driver ? g_strconcat("../../drivers/", driver, NULL) : NULL;

    (void)unlink(link);
    if (target)
        assert_int_equal(symlink(target, link), 0);
}

/* The kernel's side of drivers_probe: each write names a device; bind it to the driver its
 * driver_override names when that driver exists. "quit" ends the thread. */
static gpointer kernel_thread(gpointer data)
{
    Fixture *fx = data;
    g_autofree char *fifo = fx_path(fx, "bus/pci/drivers_probe");

    for (;;) {
        char buf[128];
        ssize_t n;
        int fd = open(fifo, O_RDONLY | O_CLOEXEC);
        g_autoptr(GString) got = g_string_new(NULL);

        g_assert(fd >= 0);
        while ((n = read(fd, buf, sizeof(buf))) > 0)
            g_string_append_len(got, buf, n);
        close(fd);
        if (g_str_equal(got->str, "quit"))
            return NULL;
        g_atomic_int_inc(&fx->probes);
        {
            g_autofree char *rel = g_strdup_printf("bus/pci/devices/%s/driver_override", got->str);
            g_autofree char *override = fx_read(fx, rel);
            g_autofree char *drv = NULL;

            g_strchomp(override);
            drv = g_build_filename(fx->root, "bus/pci/drivers", override, NULL);
            if (*override && g_file_test(drv, G_FILE_TEST_IS_DIR))
                fx_link_driver(fx, override);
        }
    }
}

/* ROOT/bus/pci/{drivers_probe, drivers/{vfio-pci,mlx5_core}/unbind,
 *               devices/VF/{driver -> ../../drivers/@driver, driver_override, iommu_group}} */
static Fixture *fx_new(const char *driver, gboolean with_kernel)
{
    Fixture *fx = g_new0(Fixture, 1);
    g_autofree char *probe = NULL;
    g_autofree char *group = NULL;

    fx->root = g_dir_make_tmp("hm-vfio-test-XXXXXX", NULL);
    assert_non_null(fx->root);
    fx_mkdir(fx, "bus/pci/drivers/vfio-pci");
    fx_mkdir(fx, "bus/pci/drivers/mlx5_core");
    fx_write(fx, "bus/pci/drivers/vfio-pci/unbind", "");
    fx_write(fx, "bus/pci/drivers/mlx5_core/unbind", "");
    fx_mkdir(fx, "bus/pci/devices/" VF);
    fx_write(fx, "bus/pci/devices/" VF "/driver_override", "(null)\n");
    fx_mkdir(fx, "kernel/iommu_groups/42");
    group = fx_path(fx, "bus/pci/devices/" VF "/iommu_group");
    assert_int_equal(symlink("../../../../kernel/iommu_groups/42", group), 0);
    fx_link_driver(fx, driver);
    probe = fx_path(fx, "bus/pci/drivers_probe");
    if (with_kernel) {
        assert_int_equal(mkfifo(probe, 0600), 0);
        fx->kernel = g_thread_new("kernel", kernel_thread, fx);
    } else {
        fx_write(fx, "bus/pci/drivers_probe", "");
    }
    return fx;
}

static void fx_free(Fixture *fx)
{
    if (fx->kernel) {
        g_autofree char *fifo = fx_path(fx, "bus/pci/drivers_probe");
        int fd = open(fifo, O_WRONLY | O_CLOEXEC);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, "quit", 4), 4);
        close(fd);
        g_thread_join(fx->kernel);
    }
    test_dir_remove(fx->root);
    g_free(fx->root);
    g_free(fx);
}

static char *fx_driver(const Fixture *fx)
{
    g_autoptr(GError) error = NULL;
    char *driver = NULL;

    assert_true(hotplug_vfio_get_driver(fx->root, VF, &driver, &error));
    assert_null(error);
    return driver;
}

static void test_already_bound(void **state)
{
    Fixture *fx = fx_new("vfio-pci", TRUE);
    g_autoptr(GError) error = NULL;
    g_autofree char *previous = NULL;
    g_autofree char *override = NULL;
    gboolean changed = TRUE;

    assert_true(hotplug_vfio_bind(fx->root, "3b:00.1", 1000, &changed, &previous, &error));
    assert_null(error);
    assert_false(changed);
    assert_string_equal(previous, "vfio-pci");
    override = fx_read(fx, "bus/pci/devices/" VF "/driver_override");
    assert_string_equal(override, "(null)\n"); /* nothing written */
    assert_int_equal(g_atomic_int_get(&fx->probes), 0);
    fx_free(fx);
}

static void test_bind_from_mlx5(void **state)
{
    Fixture *fx = fx_new("mlx5_core", TRUE);
    g_autoptr(GError) error = NULL;
    g_autofree char *previous = NULL;
    g_autofree char *unbind = NULL;
    g_autofree char *override = NULL;
    g_autofree char *driver = NULL;
    gboolean changed = FALSE;

    assert_true(hotplug_vfio_bind(fx->root, VF, 5000, &changed, &previous, &error));
    assert_null(error);
    assert_true(changed);
    assert_string_equal(previous, "mlx5_core");
    unbind = fx_read(fx, "bus/pci/drivers/mlx5_core/unbind");
    assert_string_equal(unbind, VF);
    override = fx_read(fx, "bus/pci/devices/" VF "/driver_override");
    assert_string_equal(override, "vfio-pci");
    assert_int_equal(g_atomic_int_get(&fx->probes), 1);
    driver = fx_driver(fx);
    assert_string_equal(driver, "vfio-pci");
    fx_free(fx);
}

static void test_bind_unbound(void **state)
{
    Fixture *fx = fx_new(NULL, TRUE);
    g_autoptr(GError) error = NULL;
    g_autofree char *previous = NULL;
    g_autofree char *driver = fx_driver(fx);
    gboolean changed = FALSE;

    assert_null(driver);
    assert_true(hotplug_vfio_bind(fx->root, VF, 5000, &changed, &previous, &error));
    assert_null(error);
    assert_true(changed);
    assert_null(previous);
    assert_int_equal(g_atomic_int_get(&fx->probes), 1);
    g_free(driver);
    driver = fx_driver(fx);
    assert_string_equal(driver, "vfio-pci");
    fx_free(fx);
}

static void test_vfio_not_loaded(void **state)
{
    Fixture *fx = fx_new("mlx5_core", FALSE);
    g_autoptr(GError) error = NULL;
    g_autofree char *vfio = fx_path(fx, "bus/pci/drivers/vfio-pci");
    g_autofree char *unbind = g_build_filename(vfio, "unbind", NULL);
    g_autofree char *override = NULL;
    g_autofree char *driver = NULL;

    assert_int_equal(g_unlink(unbind), 0);
    assert_int_equal(g_rmdir(vfio), 0);
    assert_false(hotplug_vfio_bind(fx->root, VF, 1000, NULL, NULL, &error));
    assert_true(g_error_matches(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED));
    assert_non_null(strstr(error->message, "modprobe vfio-pci"));
    override = fx_read(fx, "bus/pci/devices/" VF "/driver_override");
    assert_string_equal(override, "(null)\n");
    driver = fx_driver(fx);
    assert_string_equal(driver, "mlx5_core");
    fx_free(fx);
}

static void test_no_iommu_group(void **state)
{
    Fixture *fx = fx_new("mlx5_core", FALSE);
    g_autoptr(GError) error = NULL;
    g_autofree char *group = fx_path(fx, "bus/pci/devices/" VF "/iommu_group");
    g_autofree char *override = NULL;
    g_autofree char *unbind = NULL;

    assert_int_equal(g_unlink(group), 0);
    assert_false(hotplug_vfio_bind(fx->root, VF, 1000, NULL, NULL, &error));
    assert_true(g_error_matches(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED));
    assert_non_null(strstr(error->message, "no IOMMU group"));
    override = fx_read(fx, "bus/pci/devices/" VF "/driver_override");
    assert_string_equal(override, "(null)\n");
    unbind = fx_read(fx, "bus/pci/drivers/mlx5_core/unbind");
    assert_string_equal(unbind, "");
    fx_free(fx);
}

/* Nothing binds (drivers_probe is a plain file): the bind fails once its deadline passes and is
 * undone: driver_override cleared, the original driver probed again. */
static void test_probe_does_not_bind(void **state)
{
    Fixture *fx = fx_new("mlx5_core", FALSE);
    g_autoptr(GError) error = NULL;
    g_autofree char *override = NULL;
    g_autofree char *probe = NULL;
    gboolean changed = FALSE;

    assert_false(hotplug_vfio_bind(fx->root, VF, 50, &changed, NULL, &error));
    assert_false(changed);
    assert_true(g_error_matches(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED));
    assert_non_null(strstr(error->message, "Cannot bind '" VF "' to vfio-pci"));
    assert_non_null(strstr(error->message, "its driver is 'mlx5_core', not vfio-pci"));
    override = fx_read(fx, "bus/pci/devices/" VF "/driver_override");
    assert_string_equal(override, "\n"); /* cleared */
    probe = fx_read(fx, "bus/pci/drivers_probe");
    assert_string_equal(probe, VF); /* and probed again for the original driver */
    fx_free(fx);
}

static void test_unbind_fails(void **state)
{
    Fixture *fx = fx_new("mlx5_core", TRUE);
    g_autoptr(GError) error = NULL;
    g_autofree char *unbind = fx_path(fx, "bus/pci/drivers/mlx5_core/unbind");
    g_autofree char *override = NULL;

    assert_int_equal(g_unlink(unbind), 0);
    assert_false(hotplug_vfio_bind(fx->root, VF, 1000, NULL, NULL, &error));
    assert_true(g_error_matches(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED));
    assert_non_null(strstr(error->message, "Cannot unbind '" VF "' from 'mlx5_core'"));
    override = fx_read(fx, "bus/pci/devices/" VF "/driver_override");
    assert_string_equal(override, "\n");
    assert_int_equal(g_atomic_int_get(&fx->probes), 0);
    fx_free(fx);
}

static void test_bad_addresses(void **state)
{
    Fixture *fx = fx_new("mlx5_core", FALSE);
    g_autoptr(GError) error = NULL;
    char *driver = NULL;

    assert_false(hotplug_vfio_bind(fx->root, "3b:00.9", 1000, NULL, NULL, &error));
    assert_true(g_error_matches(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID));
    assert_non_null(strstr(error->message, "'3b:00.9' is not a PCI address"));
    g_clear_error(&error);
    assert_false(hotplug_vfio_bind(fx->root, "../../etc", 1000, NULL, NULL, &error));
    assert_true(g_error_matches(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID));
    g_clear_error(&error);
    assert_false(hotplug_vfio_bind(fx->root, "0000:3b:00.2", 1000, NULL, NULL, &error));
    assert_true(g_error_matches(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND));
    assert_non_null(strstr(error->message, "PCI function '0000:3b:00.2' does not exist"));
    g_clear_error(&error);
    assert_false(hotplug_vfio_get_driver(fx->root, "0000:3b:00.2", &driver, &error));
    assert_null(driver);
    fx_free(fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_already_bound),  cmocka_unit_test(test_bind_from_mlx5),
        cmocka_unit_test(test_bind_unbound),   cmocka_unit_test(test_vfio_not_loaded),
        cmocka_unit_test(test_no_iommu_group), cmocka_unit_test(test_probe_does_not_bind),
        cmocka_unit_test(test_unbind_fails),   cmocka_unit_test(test_bad_addresses),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
