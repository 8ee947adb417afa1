/* Unit tests for hm-hotplug: VFs from node device XML, choosing a VF on the destination. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hotplug/hotplug.h"

/* A ConnectX-6 VF bound to vfio-pci, as virNodeDeviceGetXMLDesc shows it. */
static const char nodedev_vf[] =
    "<device>\n"
    "  <name>pci_0000_3b_00_3</name>\n"
    "  <path>/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.3</path>\n"
    "  <parent>pci_0000_3a_00_0</parent>\n"
    "  <driver>\n    <name>vfio-pci</name>\n  </driver>\n"
    "  <capability type='pci'>\n"
    "    <class>0x020700</class>\n"
    "    <domain>0</domain>\n    <bus>59</bus>\n    <slot>0</slot>\n    <function>3</function>\n"
    "    <product id='0x101c'>MT28908 Family [ConnectX-6 Virtual Function]</product>\n"
    "    <vendor id='0x15b3'>Mellanox Technologies</vendor>\n"
    "    <capability type='phys_function'>\n"
    "      <address domain='0x0000' bus='0x3b' slot='0x00' function='0x0'/>\n"
    "    </capability>\n"
    "    <iommuGroup number='91'>\n"
    "      <address domain='0x0000' bus='0x3b' slot='0x00' function='0x3'/>\n"
    "    </iommuGroup>\n"
    "    <pci-express>\n"
    "      <link validity='cap' port='0' speed='16' width='16'/>\n"
    "    </pci-express>\n"
    "  </capability>\n"
    "</device>\n";

static const char nodedev_vf_no_driver[] =
    "<device><name>pci_0001_d8_01_7</name><parent>pci_0001_d7_00_0</parent>"
    "<capability type='pci'><domain>1</domain><bus>216</bus><slot>1</slot>"
    "<function>7</function><product id='0x101e'/><vendor id='0x15b3'/>"
    "<capability type='phys_function'><address domain='0x0001' bus='0xd8' slot='0x00' "
    "function='0x1'/></capability></capability></device>";

static const char nodedev_pf[] =
    "<device><name>pci_0000_3b_00_0</name><parent>pci_0000_3a_00_0</parent>"
    "<driver><name>mlx5_core</name></driver>"
    "<capability type='pci'><class>0x020700</class><domain>0</domain><bus>59</bus>"
    "<slot>0</slot><function>0</function><product id='0x101b'>MT28908 Family [ConnectX-6]"
    "</product><vendor id='0x15b3'>Mellanox Technologies</vendor>"
    "<capability type='virt_functions' maxCount='8'>"
    "<address domain='0x0000' bus='0x3b' slot='0x00' function='0x1'/>"
    "<address domain='0x0000' bus='0x3b' slot='0x00' function='0x2'/>"
    "</capability></capability></device>";

static const char nodedev_net[] =
    "<device><name>net_ib0_00_00_10_29_fe_80</name><path>/sys/devices/net/ib0</path>"
    "<parent>pci_0000_3b_00_0</parent><capability type='net'><interface>ib0</interface>"
    "<address>00:00:10:29:fe:80:00:00</address><link state='up'/>"
    "<capability type='80203'/></capability></device>";

static void test_vf_from_nodedev(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(HotplugVf) vf = hotplug_vf_from_nodedev_xml(nodedev_vf, &error);

    assert_null(error);
    assert_non_null(vf);
    assert_string_equal(vf->pci_address, "0000:3b:00.3");
    assert_string_equal(vf->pf_address, "0000:3b:00.0");
    assert_int_equal(vf->vendor_id, 0x15b3);
    assert_int_equal(vf->product_id, 0x101c);
    assert_string_equal(vf->driver, "vfio-pci");
}

static void test_vf_from_nodedev_no_driver(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(HotplugVf) vf = hotplug_vf_from_nodedev_xml(nodedev_vf_no_driver, &error);

    assert_null(error);
    assert_string_equal(vf->pci_address, "0001:d8:01.7");
    assert_string_equal(vf->pf_address, "0001:d8:00.1");
    assert_null(vf->driver);
}

static void test_pf_is_not_vf(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(HotplugVf) vf = hotplug_vf_from_nodedev_xml(nodedev_pf, &error);

    assert_null(vf);
    assert_null(error);
}

static void test_non_pci_is_not_vf(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(HotplugVf) vf = hotplug_vf_from_nodedev_xml(nodedev_net, &error);

    assert_null(vf);
    assert_null(error);
}

static void test_bad_nodedev(void **state)
{
    static const char *const cases[] = {
        "",
        "<device><name>x</name>",
        "<device/>",
        "<!DOCTYPE device SYSTEM 'http://203.0.113.1/x.dtd'><device><name>x</name></device>",
        ("<device><name>pci_0000_3b_00_3</name><capability type='pci'><domain>0</domain>"
         "<bus>0x3b</bus><slot>0</slot><function>3</function></capability></device>"),
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(HotplugVf) vf = hotplug_vf_from_nodedev_xml(cases[i], &error);

        assert_null(vf);
        assert_non_null(error);
        assert_true(error->domain == HOTPLUG_ERROR);
        assert_int_equal(error->code, HOTPLUG_ERROR_INVALID);
        assert_true(g_str_has_prefix(error->message, "node device XML"));
    }
}

/* ---- choose ------------------------------------------------------------------------------ */

static HotplugVf *vf_new(const char *addr, guint vendor, guint product)
{
    HotplugVf *vf = g_new0(HotplugVf, 1);

    vf->pci_address = g_strdup(addr);
    vf->pf_address = g_strdup("0000:af:00.0");
    vf->vendor_id = vendor;
    vf->product_id = product;
    vf->driver = g_strdup("vfio-pci");
    return vf;
}

static GPtrArray *candidates_new(void)
{
    GPtrArray *c = g_ptr_array_new_with_free_func((GDestroyNotify)hotplug_vf_free);

    g_ptr_array_add(c, vf_new("0000:af:00.1", 0x8086, 0x154c)); /* Intel X710 VF */
    g_ptr_array_add(c, vf_new("0000:af:00.2", 0x15b3, 0x101c));
    g_ptr_array_add(c, vf_new("0000:af:00.3", 0x15b3, 0x101c));
    g_ptr_array_add(c, vf_new("0000:af:00.4", 0x15b3, 0x101e)); /* other product */
    return c;
}

static GPtrArray *strv_array(const char *first, ...)
{
    GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
    va_list ap;

    va_start(ap, first);
    for (const char *s = first; s; s = va_arg(ap, const char *))
        g_ptr_array_add(a, g_strdup(s));
    va_end(ap);
    return a;
}

static void test_choose_first_match(void **state)
{
    g_autoptr(HotplugVf) like = vf_new("0000:3b:00.3", 0x15b3, 0x101c);
    g_autoptr(GPtrArray) candidates = candidates_new();
    g_autoptr(GPtrArray) in_use = strv_array("0000:af:00.1", NULL);
    g_autoptr(GError) error = NULL;
    g_autofree char *chosen = hotplug_vf_choose(like, candidates, in_use, &error);

    assert_null(error);
    assert_string_equal(chosen, "0000:af:00.2");
}

static void test_choose_skips_in_use(void **state)
{
    g_autoptr(HotplugVf) like = vf_new("0000:3b:00.3", 0x15b3, 0x101c);
    g_autoptr(GPtrArray) candidates = candidates_new();
    /* Spelled differently from the candidate: compared by value. */
    g_autoptr(GPtrArray) in_use = strv_array("AF:00.2", NULL);
    g_autoptr(GError) error = NULL;
    g_autofree char *chosen = hotplug_vf_choose(like, candidates, in_use, &error);

    assert_null(error);
    assert_string_equal(chosen, "0000:af:00.3");
}

static void test_choose_no_in_use(void **state)
{
    g_autoptr(HotplugVf) like = vf_new("0000:3b:00.3", 0x15b3, 0x101e);
    g_autoptr(GPtrArray) candidates = candidates_new();
    g_autoptr(GError) error = NULL;
    g_autofree char *chosen = hotplug_vf_choose(like, candidates, NULL, &error);

    assert_null(error);
    assert_string_equal(chosen, "0000:af:00.4");
}

static void test_choose_all_in_use(void **state)
{
    g_autoptr(HotplugVf) like = vf_new("0000:3b:00.3", 0x15b3, 0x101c);
    g_autoptr(GPtrArray) candidates = candidates_new();
    g_autoptr(GPtrArray) in_use = strv_array("0000:af:00.3", "0000:af:00.2", NULL);
    g_autoptr(GError) error = NULL;
    g_autofree char *chosen = hotplug_vf_choose(like, candidates, in_use, &error);

    assert_null(chosen);
    assert_non_null(error);
    assert_true(error->domain == HOTPLUG_ERROR);
    assert_int_equal(error->code, HOTPLUG_ERROR_NO_VF);
    assert_non_null(strstr(error->message, "'0000:3b:00.3'"));
    assert_non_null(strstr(error->message, "vendor 0x15b3, product 0x101c"));
    assert_non_null(strstr(error->message, "all 2 that match are in use"));
}

static void test_choose_vendor_mismatch(void **state)
{
    g_autoptr(HotplugVf) like = vf_new("0000:3b:00.3", 0x1234, 0x101c);
    g_autoptr(GPtrArray) candidates = candidates_new();
    g_autoptr(GError) error = NULL;
    g_autofree char *chosen = hotplug_vf_choose(like, candidates, NULL, &error);

    assert_null(chosen);
    assert_non_null(error);
    assert_int_equal(error->code, HOTPLUG_ERROR_NO_VF);
    assert_non_null(strstr(error->message, "vendor 0x1234"));
    assert_non_null(strstr(error->message, "none of the 4 candidates"));
}

static void test_choose_no_candidates(void **state)
{
    g_autoptr(HotplugVf) like = vf_new("0000:3b:00.3", 0x15b3, 0x101c);
    g_autoptr(GPtrArray) candidates = g_ptr_array_new();
    g_autoptr(GError) error = NULL;
    g_autofree char *chosen = hotplug_vf_choose(like, candidates, NULL, &error);

    assert_null(chosen);
    assert_int_equal(error->code, HOTPLUG_ERROR_NO_VF);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vf_from_nodedev),
        cmocka_unit_test(test_vf_from_nodedev_no_driver),
        cmocka_unit_test(test_pf_is_not_vf),
        cmocka_unit_test(test_non_pci_is_not_vf),
        cmocka_unit_test(test_bad_nodedev),
        cmocka_unit_test(test_choose_first_match),
        cmocka_unit_test(test_choose_skips_in_use),
        cmocka_unit_test(test_choose_no_in_use),
        cmocka_unit_test(test_choose_all_in_use),
        cmocka_unit_test(test_choose_vendor_mismatch),
        cmocka_unit_test(test_choose_no_candidates),
    };

    return cmocka_run_group_tests_name("hotplug", tests, NULL, NULL);
}
