/* Unit tests for hm-xml: PCI addresses, the VF kind table, domain parsing limits, alias
 * prefixes, attach XML errors, user aliases and setting a device's alias, node device XML.
 * Golden cases cover the common paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "xml/xml.h"

#define assert_error(err, dom, code_)                                                              \
    do {                                                                                           \
        assert_non_null(err);                                                                      \
        assert_true((err)->domain == (dom));                                                       \
        assert_int_equal((err)->code, (code_));                                                    \
    } while (0)

/* ---- PCI addresses (common/pci-address.c, the one parser the libraries share) ------------ */

static void test_pci_parse_valid(void **state)
{
    static const struct {
        const char *str;
        guint domain, bus, slot, function;
    } cases[] = {
        {"0000:3b:02.1", 0, 0x3b, 0x02, 1},      {"3b:02.1", 0, 0x3b, 0x02, 1},
        {"ffff:ff:1f.7", 0xffff, 0xff, 0x1f, 7}, {"0:0:0.0", 0, 0, 0, 0},
        {"0000:3B:1F.6", 0, 0x3b, 0x1f, 6},      {"0001:d8:00.0", 1, 0xd8, 0, 0},
        {"10000:3b:02.1", 0x10000, 0x3b, 0x02, 1}, /* a VMD domain: five digits */
        {"ffffffff:ff:1f.7", 0xffffffff, 0xff, 0x1f, 7},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        HmPciAddress a = {99, 99, 99, 99};

        assert_true(hm_pci_address_parse(cases[i].str, &a, &error));
        assert_null(error);
        assert_int_equal(a.domain, cases[i].domain);
        assert_int_equal(a.bus, cases[i].bus);
        assert_int_equal(a.slot, cases[i].slot);
        assert_int_equal(a.function, cases[i].function);
    }
}

static void test_pci_parse_invalid(void **state)
{
    static const char *const cases[] = {
        "",
        "0000:3b:02",
        "0000:3b:20.0",  /* slot > 0x1f */
        "0000:3b:02.8",  /* function > 7 */
        "100000000:3b:02.1", /* nine domain digits: more than 32 bits */
        "0000:100:02.1", /* three bus digits */
        "0000:3b:002.1",
        "0000:3b:02.01",
        "0000:3b:02.1 ",
        " 0000:3b:02.1",
        "0x00:3b:02.1",
        "0000:3b:02.1.2",
        "0000:3b:2g.1",
        "::.",
        "-1:3b:02.1",
        "0000:3b:02:1",
        "a:b:c:d.1",
        "0000:+3b:02.1",
        "3b.02.1",
        "0000:3b:02.",
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        HmPciAddress a = {99, 99, 99, 99};

        if (hm_pci_address_parse(cases[i], &a, &error))
            fail_msg("'%s' parsed", cases[i]);
        assert_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID);
        assert_non_null(strstr(error->message, cases[i]));
        /* Outputs stay untouched on failure. */
        assert_int_equal(a.domain, 99);
        assert_int_equal(a.bus, 99);
        assert_int_equal(a.slot, 99);
        assert_int_equal(a.function, 99);
    }
}

static void test_pci_parse_null_outputs(void **state)
{
    assert_true(hm_pci_address_parse("0000:3b:02.1", NULL, NULL));
    assert_false(hm_pci_address_parse("nope", NULL, NULL));
}

/* ---- enum table -------------------------------------------------------------------------- */

static void test_vf_kind_strings(void **state)
{
    assert_string_equal(xml_vf_kind_to_string(XML_VF_KIND_HOSTDEV), "hostdev");
    assert_string_equal(xml_vf_kind_to_string(XML_VF_KIND_INTERFACE_HOSTDEV), "interface-hostdev");
    assert_string_equal(xml_vf_kind_to_string(XML_VF_KIND_STANDIN), "standin");
    assert_null(xml_vf_kind_to_string(XML_VF_KIND_LAST));
    for (int k = 0; k < XML_VF_KIND_LAST; k++)
        assert_int_equal(xml_vf_kind_from_string(xml_vf_kind_to_string(k)), k);
    assert_int_equal(xml_vf_kind_from_string("hostdev "), -1);
    assert_int_equal(xml_vf_kind_from_string(NULL), -1);
}

/* ---- domain parsing ---------------------------------------------------------------------- */

static void test_domain_parse_ok(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(XmlDomain) dom =
        xml_domain_parse("<domain type='kvm'><name> a&amp;b&#x41; </name></domain>", &error);

    assert_null(error);
    assert_non_null(dom);
    assert_string_equal(xml_domain_get_name(dom), "a&bA");
}

static void test_domain_parse_rejects(void **state)
{
    static const struct {
        const char *xml;
        int code;
        const char *needle;
    } cases[] = {
        {"", XML_ERROR_PARSE, "empty"},
        {"<domain><name>x</name>", XML_ERROR_PARSE, "not well-formed"},
        {"<domain><name>&undefined;</name></domain>", XML_ERROR_PARSE, "undefined"},
        {"<!DOCTYPE domain><domain><name>x</name></domain>", XML_ERROR_PARSE, "DOCTYPE"},
        {"<?xml version='1.0'?>\n<!DOCTYPE domain SYSTEM 'file:///etc/passwd'><domain/>",
         XML_ERROR_PARSE, "DOCTYPE"},
        {"<domain><name>x</name></domain><domain/>", XML_ERROR_PARSE, "not well-formed"},
        {"<capabilities/>", XML_ERROR_PARSE, "<capabilities>"},
        {"<domain><name/></domain>", XML_ERROR_INVALID, "<name>"},
        {"<domain><uuid>x</uuid></domain>", XML_ERROR_INVALID, "<name>"},
        {"<domain><name>x</name><devices><hostdev type='pci'><alias name='h0'/></hostdev>"
         "</devices></domain>",
         -1, NULL},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(XmlDomain) dom = xml_domain_parse(cases[i].xml, &error);

        if (cases[i].code < 0) {
            assert_non_null(dom);
            continue;
        }
        if (dom)
            fail_msg("case %zu parsed", i);
        assert_error(error, XML_ERROR, cases[i].code);
        assert_true(g_str_has_prefix(error->message, "domain XML: "));
        if (!strstr(error->message, cases[i].needle))
            fail_msg("case %zu: '%s' lacks '%s'", i, error->message, cases[i].needle);
    }
}

static void test_domain_parse_size_limit(void **state)
{
    const char *head = "<domain><name>big</name><description>";
    const char *tail = "</description></domain>";
    gsize len = XML_DOMAIN_MAX_BYTES;
    g_autofree char *xml = g_malloc(len + 2);
    g_autoptr(GError) error = NULL;
    g_autoptr(XmlDomain) dom = NULL;

    /* Exactly at the limit: parses. */
    memset(xml, 'x', len);
    memcpy(xml, head, strlen(head));
    memcpy(xml + len - strlen(tail), tail, strlen(tail));
    xml[len] = '\0';
    dom = xml_domain_parse(xml, &error);
    assert_null(error);
    assert_non_null(dom);
    g_clear_pointer(&dom, xml_domain_free);

    /* One byte more: rejected before parsing. */
    memmove(xml + len - strlen(tail) + 1, xml + len - strlen(tail), strlen(tail));
    xml[len - strlen(tail)] = 'x';
    xml[len + 1] = '\0';
    dom = xml_domain_parse(xml, &error);
    assert_null(dom);
    assert_error(error, XML_ERROR, XML_ERROR_PARSE);
    assert_non_null(strstr(error->message, "larger than"));
}

/* ---- VFs --------------------------------------------------------------------------------- */

static const char standin_domain[] =
    "<domain><name>lab</name><devices>\n"
    "  <interface type='udp'><mac address='52:54:00:aa:00:01'/><alias name='ua-hmvf0'/>"
    "</interface>\n"
    "  <interface type='udp'><mac address='52:54:00:bb:00:01'/><alias name='ua-net0'/>"
    "</interface>\n"
    "  <interface type='udp'><mac address='52:54:00:cc:00:01'/></interface>\n"
    "  <hostdev mode='subsystem' type='pci'><source><address bus='0x3b' slot='0x02' "
    "function='0x1'/></source><alias name='hostdev0'/></hostdev>\n"
    "</devices></domain>";

static GPtrArray *find_vfs(const char *xml, const char *prefix)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(XmlDomain) dom = xml_domain_parse(xml, &error);
    GPtrArray *vfs;

    assert_null(error);
    vfs = xml_domain_find_vfs(dom, prefix, &error);
    assert_null(error);
    assert_non_null(vfs);
    return vfs;
}

static void test_find_vfs_prefix(void **state)
{
    g_autoptr(GPtrArray) vfs = NULL;
    const XmlVf *vf;

    vfs = find_vfs(standin_domain, NULL);
    assert_int_equal(vfs->len, 2);
    vf = g_ptr_array_index(vfs, 0);
    assert_int_equal(vf->kind, XML_VF_KIND_STANDIN);
    assert_string_equal(vf->alias, "ua-hmvf0");
    assert_string_equal(vf->mac, "52:54:00:aa:00:01");
    assert_null(vf->host_pci);
    vf = g_ptr_array_index(vfs, 1);
    assert_int_equal(vf->kind, XML_VF_KIND_HOSTDEV);
    assert_string_equal(vf->host_pci, "0000:3b:02.1"); /* domain defaults to 0 */
    assert_null(vf->mac);
    g_clear_pointer(&vfs, g_ptr_array_unref);

    vfs = find_vfs(standin_domain, "ua-net");
    assert_int_equal(vfs->len, 2);
    assert_string_equal(((XmlVf *)g_ptr_array_index(vfs, 0))->alias, "ua-net0");
    g_clear_pointer(&vfs, g_ptr_array_unref);

    vfs = find_vfs(standin_domain, "");
    assert_int_equal(vfs->len, 1);
    assert_int_equal(((XmlVf *)g_ptr_array_index(vfs, 0))->kind, XML_VF_KIND_HOSTDEV);
    g_clear_pointer(&vfs, g_ptr_array_unref);

    vfs = find_vfs("<domain><name>x</name></domain>", NULL);
    assert_int_equal(vfs->len, 0);
}

static void test_find_vfs_errors(void **state)
{
    static const struct {
        const char *devices;
        const char *needle;
    } cases[] = {
        {"<hostdev mode='subsystem' type='pci'><alias name='hostdev0'/></hostdev>",
         "<hostdev> #1 has no <source><address>"},
        {"<hostdev type='usb'/><hostdev type='pci'><source><address bus='1' slot='2'/>"
         "</source><alias name='h'/></hostdev>",
         "<hostdev> #2 has no function"},
        {"<interface type='hostdev'><source><address type='usb' bus='1' slot='2' "
         "function='0'/></source><alias name='h'/></interface>",
         "type 'usb'"},
        {"<interface type='hostdev'><source><address type='pci' domain='0x100000000' bus='1' "
         "slot='2' function='0'/></source><alias name='h'/></interface>",
         "domain='0x100000000'"},
        {"<interface type='network'/><interface type='hostdev'><source><address type='pci' "
         "bus='1' slot='2' function='0'/></source></interface>",
         "<interface> #2 (0000:01:02.0) has no <alias"},
        {"<hostdev mode='subsystem' type='pci'><source><address bus='-1' slot='2' "
         "function='0'/></source><alias name='h'/></hostdev>",
         "bus='-1'"},
        {"<hostdev mode='subsystem' type='pci'><source><address bus='0x' slot='2' "
         "function='0'/></source><alias name='h'/></hostdev>",
         "bus='0x'"},
        {"<hostdev mode='subsystem' type='pci'><source><address bus='09' slot='2' "
         "function='0'/></source><alias name='h'/></hostdev>",
         "bus='09'"}, /* leading 0 is octal, as in libvirt */
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autofree char *xml = g_strdup_printf(
            "<domain><name>x</name><devices>%s</devices></domain>", cases[i].devices);
        g_autoptr(XmlDomain) dom = xml_domain_parse(xml, &error);
        g_autoptr(GPtrArray) vfs = NULL;

        assert_non_null(dom);
        vfs = xml_domain_find_vfs(dom, NULL, &error);
        assert_null(vfs);
        assert_error(error, XML_ERROR, XML_ERROR_INVALID);
        if (!strstr(error->message, cases[i].needle))
            fail_msg("case %zu: '%s' lacks '%s'", i, error->message, cases[i].needle);
    }
}

static void test_address_number_syntax(void **state)
{
    g_autoptr(GPtrArray) vfs = find_vfs(
        "<domain><name>x</name><devices><hostdev type='pci'><source><address domain='0' "
        "bus='073' slot='0X1f' function='7'/></source><alias name='h'/></hostdev></devices>"
        "</domain>",
        NULL);

    assert_int_equal(vfs->len, 1);
    assert_string_equal(((XmlVf *)g_ptr_array_index(vfs, 0))->host_pci, "0000:3b:1f.7");
}

static void test_list_host_pci(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(XmlDomain) dom = xml_domain_parse(
        "<domain><name>inactive</name><devices>"
        "<hostdev mode='subsystem' type='pci'><source><address domain='0x0000' bus='0x3b' "
        "slot='0x00' function='0x2'/></source></hostdev>" /* no alias: counted */
        "<hostdev mode='subsystem' type='usb'><source><address bus='1' device='2'/></source>"
        "</hostdev>" /* USB: not counted */
        "<interface type='hostdev'><source><address type='pci' bus='0x5e' slot='0x01' "
        "function='0x3'/></source><alias name='hostdev1'/></interface>"
        "<interface type='udp'><alias name='ua-hmvf0'/></interface>" /* stand-in: no PCI */
        "<hostdev mode='subsystem' type='pci'><source/></hostdev>"   /* unreadable: skipped */
        "</devices></domain>",
        &error);
    g_autoptr(GPtrArray) list = NULL;

    assert_non_null(dom);
    list = xml_domain_list_host_pci(dom);
    assert_int_equal(list->len, 2);
    assert_string_equal(g_ptr_array_index(list, 0), "0000:3b:00.2");
    assert_string_equal(g_ptr_array_index(list, 1), "0000:5e:01.3");
}

/* ---- attach XML -------------------------------------------------------------------------- */

static void test_attach_errors(void **state)
{
    XmlVf hostdev = {
        .kind = XML_VF_KIND_HOSTDEV,
        .alias = (char *)"hostdev0",
        .host_pci = (char *)"0000:3b:02.1",
        .device_xml = (char *)"<hostdev mode='subsystem' type='pci'><source><address "
                              "domain='0' bus='0x3b' slot='2' function='1'/></source>"
                              "<alias name='hostdev0'/></hostdev>",
    };
    XmlVf standin = {
        .kind = XML_VF_KIND_STANDIN,
        .alias = (char *)"ua-hmvf0",
        .device_xml = (char *)"<interface type='udp'><alias name='ua-hmvf0'/></interface>",
    };
    XmlVf wrong = hostdev;
    XmlVf no_source = hostdev;
    XmlVf dtd = standin;
    struct {
        const XmlVf *vf;
        const char *new_pci;
        int code;
        const char *needle;
    } cases[] = {
        {&hostdev, NULL, XML_ERROR_INVALID, "required"},
        {&hostdev, "0000:3b:20.1", XML_ERROR_INVALID, "0000:3b:20.1"},
        {&hostdev, "garbage", XML_ERROR_INVALID, "garbage"},
        {&standin, "0000:af:00.2", XML_ERROR_INVALID, "stand-in"},
        {&wrong, "0000:af:00.2", XML_ERROR_INVALID, "not <hostdev>"},
        {&no_source, "0000:af:00.2", XML_ERROR_INVALID, "<source><address>"},
        {&dtd, NULL, XML_ERROR_PARSE, "DOCTYPE"},
    };

    wrong.device_xml = standin.device_xml;
    no_source.device_xml = (char *)"<hostdev type='pci'><alias name='hostdev0'/></hostdev>";
    dtd.device_xml = (char *)"<!DOCTYPE x><interface/>";

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autofree char *xml = xml_vf_format_attach(cases[i].vf, cases[i].new_pci, &error);

        assert_null(xml);
        assert_error(error, XML_ERROR, cases[i].code);
        if (!strstr(error->message, cases[i].needle))
            fail_msg("case %zu: '%s' lacks '%s'", i, error->message, cases[i].needle);
        assert_non_null(strstr(error->message, cases[i].vf->alias));
    }
}

static void test_attach_roundtrip(void **state)
{
    /* The attach XML of a VF is itself a VF in a domain, at the new address, under its user
     * alias: libvirt's "hostdev0" plugs as "ua-hostdev0" (a device plugged without an alias
     * gets a libvirt name, maybe one whose removal is still queued: issue 19). */
    g_autoptr(GPtrArray) vfs = find_vfs(standin_domain, NULL);
    const XmlVf *vf = g_ptr_array_index(vfs, 1);
    g_autoptr(GError) error = NULL;
    g_autofree char *attach = xml_vf_format_attach(vf, "12:1f.7", &error);
    g_autofree char *standin = xml_vf_format_attach(g_ptr_array_index(vfs, 0), NULL, &error);
    g_autofree char *domain = NULL;
    g_autoptr(GPtrArray) again = NULL;
    const XmlVf *vf2;

    assert_null(error);
    assert_non_null(attach);
    assert_string_equal(vf->alias, "hostdev0");
    domain = g_strdup_printf("<domain><name>y</name><devices>%s%s</devices></domain>", attach,
                             standin);
    again = find_vfs(domain, NULL);
    assert_int_equal(again->len, 2);
    vf2 = g_ptr_array_index(again, 0);
    assert_int_equal(vf2->kind, XML_VF_KIND_HOSTDEV);
    assert_string_equal(vf2->host_pci, "0000:12:1f.7");
    assert_string_equal(vf2->alias, "ua-hostdev0");
    /* A user alias stays as it is. */
    vf2 = g_ptr_array_index(again, 1);
    assert_int_equal(vf2->kind, XML_VF_KIND_STANDIN);
    assert_string_equal(vf2->alias, "ua-hmvf0");
}

static void test_user_alias(void **state)
{
    static const char *const cases[][2] = {
        {"hostdev0", "ua-hostdev0"},
        {"hostdev12", "ua-hostdev12"},
        {"net3", "ua-net3"},
        {"ua-hmvf0", "ua-hmvf0"},
        {"ua-hmvf0-r", "ua-hmvf0-r"},
        {"ua-hostdev0", "ua-hostdev0"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *alias = xml_vf_user_alias(cases[i][0]);

        assert_string_equal(alias, cases[i][1]);
    }
}

/* Sets @alias in @xml, checks the result reads back with that alias (and the rest as it was:
 * setting @back, the original alias, gives @xml again when it is in libxml2's form). */
static char *set_alias_checked(const char *xml, const char *alias, const char *back)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *out = xml_device_set_alias(xml, alias, &error);
    g_autofree char *needle = g_strdup_printf("<alias name=\"%s\"/>", alias);

    if (!out)
        fail_msg("'%s' as '%s': %s", xml, alias, error->message);
    assert_null(error);
    assert_non_null(strstr(out, needle));
    /* One alias, not two. */
    assert_null(strstr(strstr(out, "<alias") + 1, "<alias"));
    if (back) {
        g_autofree char *again = xml_device_set_alias(out, back, &error);

        assert_non_null(again);
        assert_string_equal(again, xml);
    }
    return g_steal_pointer(&out);
}

static void test_set_alias(void **state)
{
    /* As libxml2 writes attach XML (double quotes): renamed in place, the rest unchanged. */
    static const char hostdev[] =
        "<hostdev mode=\"subsystem\" type=\"pci\" managed=\"yes\"><source><address "
        "domain=\"0x0000\" bus=\"0x3b\" slot=\"0x02\" function=\"0x1\"/></source>"
        "<alias name=\"ua-hostdev0\"/><address type=\"pci\" domain=\"0x0000\" bus=\"0x05\" "
        "slot=\"0x00\" function=\"0x0\"/></hostdev>";
    static const char standin[] =
        "<interface type=\"ethernet\">\n  <mac address=\"52:54:00:48:01:01\"/>\n  <target "
        "dev=\"hmtap1\" managed=\"no\"/>\n  <model type=\"virtio\"/>\n  <alias "
        "name=\"ua-hmvf0\"/>\n</interface>";
    /* As libvirt writes it (single quotes). */
    static const char single[] =
        "<interface type='ethernet'><mac address='52:54:00:48:01:01'/>"
        "<alias name='ua-hmvf0'/></interface>";
    /* Without an alias (a hostdev's attach XML before user aliases): added before the guest
     * <address>, or last without one. */
    static const char no_alias[] =
        "<hostdev mode='subsystem' type='pci'><source><address bus='0x3b' slot='0x02' "
        "function='0x1'/></source><address type='pci' bus='0x05' slot='0x00' "
        "function='0x0'/></hostdev>";
    static const char no_alias_no_address[] =
        "<interface type='hostdev'><source><address type='pci' bus='0x3b' slot='0x02' "
        "function='0x1'/></source></interface>";
    g_autofree char *h = set_alias_checked(hostdev, "ua-hostdev0-r", "ua-hostdev0");
    g_autofree char *s = set_alias_checked(standin, "ua-hmvf0-r", "ua-hmvf0");
    g_autofree char *q = set_alias_checked(single, "ua-hmvf0-r", NULL);
    g_autofree char *n = set_alias_checked(no_alias, "ua-hostdev0", NULL);
    g_autofree char *l = set_alias_checked(no_alias_no_address, "ua-x_1", NULL);

    assert_non_null(strstr(h, "</source><alias name=\"ua-hostdev0-r\"/><address type"));
    assert_non_null(strstr(s, "<model type=\"virtio\"/>\n  <alias name=\"ua-hmvf0-r\"/>\n"));
    assert_non_null(strstr(q, "<mac address=\"52:54:00:48:01:01\"/><alias name=\"ua-hmvf0-r\"/>"
                              "</interface>"));
    assert_non_null(strstr(n, "</source><alias name=\"ua-hostdev0\"/><address type=\"pci\""));
    assert_true(g_str_has_suffix(l, "</source><alias name=\"ua-x_1\"/></interface>"));
}

static void test_set_alias_errors(void **state)
{
    static const char good[] = "<interface type='udp'><alias name='ua-hmvf0'/></interface>";
    static const struct {
        const char *xml;
        const char *alias;
        int code;
        const char *needle;
    } cases[] = {
        {"", "ua-hmvf0-r", XML_ERROR_PARSE, "device XML: empty"},
        {"<interface type='udp'><alias name='ua-hmvf0'/>", "ua-hmvf0-r", XML_ERROR_PARSE,
         "device XML: not well-formed"},
        {"just text", "ua-hmvf0-r", XML_ERROR_PARSE, "device XML: not well-formed"},
        {"<!DOCTYPE x><interface/>", "ua-hmvf0-r", XML_ERROR_PARSE, "DOCTYPE"},
        {"<domain><name>x</name><devices>"
         "<interface type='udp'><alias name='ua-hmvf0'/></interface></devices></domain>",
         "ua-hmvf0-r", XML_ERROR_INVALID, "the root element is <domain>, not <hostdev> or"},
        {"<disk type='file'><alias name='ua-d'/></disk>", "ua-hmvf0-r", XML_ERROR_INVALID,
         "<disk>"},
        {"<hostdev><alias name='hostdev0'/><alias name='ua-x'/></hostdev>", "ua-hmvf0-r",
         XML_ERROR_INVALID, "<hostdev> has more than one <alias>"},
        {good, "hostdev0", XML_ERROR_INVALID, "alias 'hostdev0' is not a user alias"},
        {good, "ua-", XML_ERROR_INVALID, "alias 'ua-' is not a user alias"},
        {good, "", XML_ERROR_INVALID, "alias '' is not"},
        {good, "ua-a b", XML_ERROR_INVALID, "alias 'ua-a b' is not"},
        {good, "ua-x'/><hostdev", XML_ERROR_INVALID, "is not a user alias"},
        {good, "ua-\xc3\xa9", XML_ERROR_INVALID, "is not a user alias"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autofree char *xml = xml_device_set_alias(cases[i].xml, cases[i].alias, &error);

        if (xml)
            fail_msg("case %zu: '%s' as '%s' gave '%s'", i, cases[i].xml, cases[i].alias, xml);
        assert_error(error, XML_ERROR, cases[i].code);
        if (!strstr(error->message, cases[i].needle))
            fail_msg("case %zu: '%s' lacks '%s'", i, error->message, cases[i].needle);
    }
}

/* A VF whose alias libvirt would not take as a user alias cannot be plugged: refused by name
 * before anything is plugged. */
static void test_attach_bad_alias(void **state)
{
    XmlVf standin = {
        .kind = XML_VF_KIND_STANDIN,
        .alias = (char *)"ua-hm vf0",
        .device_xml = (char *)"<interface type='udp'><alias name='ua-hm vf0'/></interface>",
    };
    g_autoptr(GError) error = NULL;
    g_autofree char *xml = xml_vf_format_attach(&standin, NULL, &error);

    assert_null(xml);
    assert_error(error, XML_ERROR, XML_ERROR_INVALID);
    assert_non_null(strstr(error->message, "VF 'ua-hm vf0': alias 'ua-hm vf0' is not a user"));
}

/* ---- node devices ------------------------------------------------------------------------ */

static const char nodedev_vf[] =
    "<device>\n"
    "  <name>pci_0000_3b_02_1</name>\n"
    "  <path>/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:02.1</path>\n"
    "  <parent>pci_0000_3a_00_0</parent>\n"
    "  <driver>\n    <name>vfio-pci</name>\n  </driver>\n"
    "  <capability type='pci'>\n"
    "    <class>0x020700</class>\n"
    "    <domain>0</domain>\n    <bus>59</bus>\n    <slot>2</slot>\n    <function>1</function>\n"
    "    <product id='0x101e'>ConnectX Family mlx5Gen Virtual Function</product>\n"
    "    <vendor id='0x15b3'>Mellanox Technologies</vendor>\n"
    "    <capability type='phys_function'>\n"
    "      <address domain='0x0000' bus='0x3b' slot='0x00' function='0x0'/>\n"
    "    </capability>\n"
    "    <iommuGroup number='87'>\n"
    "      <address domain='0x0000' bus='0x3b' slot='0x02' function='0x1'/>\n"
    "    </iommuGroup>\n"
    "  </capability>\n"
    "</device>\n";

static const char nodedev_pf[] =
    "<device>\n"
    "  <name>pci_0000_3b_00_0</name>\n"
    "  <parent>pci_0000_3a_00_0</parent>\n"
    "  <driver><name>mlx5_core</name></driver>\n"
    "  <capability type='pci'>\n"
    "    <domain>0</domain><bus>59</bus><slot>0</slot><function>0</function>\n"
    "    <product id='0x101b'>MT28908 Family [ConnectX-6]</product>\n"
    "    <vendor id='0x15b3'>Mellanox Technologies</vendor>\n"
    "    <capability type='virt_functions' maxCount='16'>\n"
    "      <address domain='0x0000' bus='0x3b' slot='0x00' function='0x1'/>\n"
    "      <address domain='0x0000' bus='0x3b' slot='0x02' function='0x1'/>\n"
    "    </capability>\n"
    "  </capability>\n"
    "</device>\n";

static void test_nodedev_vf(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(XmlNodeDev) dev = xml_nodedev_parse(nodedev_vf, &error);

    assert_null(error);
    assert_non_null(dev);
    assert_string_equal(dev->name, "pci_0000_3b_02_1");
    assert_string_equal(dev->parent, "pci_0000_3a_00_0");
    assert_string_equal(dev->driver, "vfio-pci");
    assert_string_equal(dev->pci_address, "0000:3b:02.1"); /* bus 59 is decimal */
    assert_int_equal(dev->vendor_id, 0x15b3);
    assert_int_equal(dev->product_id, 0x101e);
    assert_string_equal(dev->pf_address, "0000:3b:00.0");
    assert_int_equal(dev->vf_addresses->len, 0);
}

static void test_nodedev_pf(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(XmlNodeDev) dev = xml_nodedev_parse(nodedev_pf, &error);

    assert_null(error);
    assert_string_equal(dev->pci_address, "0000:3b:00.0");
    assert_string_equal(dev->driver, "mlx5_core");
    assert_null(dev->pf_address);
    assert_int_equal(dev->vf_addresses->len, 2);
    assert_string_equal(g_ptr_array_index(dev->vf_addresses, 0), "0000:3b:00.1");
    assert_string_equal(g_ptr_array_index(dev->vf_addresses, 1), "0000:3b:02.1");
}

static void test_nodedev_not_pci(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(XmlNodeDev) dev = xml_nodedev_parse(
        "<device><name>net_ib0_80_00_01_08_fe_80</name><parent>pci_0000_3b_00_0</parent>"
        "<capability type='net'><interface>ib0</interface><link state='up'/>"
        "<capability type='80203'/></capability></device>",
        &error);

    assert_null(error);
    assert_string_equal(dev->name, "net_ib0_80_00_01_08_fe_80");
    assert_null(dev->driver);
    assert_null(dev->pci_address);
    assert_null(dev->pf_address);
    assert_int_equal(dev->vendor_id, 0);
}

static void test_nodedev_bad(void **state)
{
    static const struct {
        const char *xml;
        int code;
        const char *needle;
    } cases[] = {
        {"<device><name>x</name>", XML_ERROR_PARSE, "not well-formed"},
        {"<domain><name>x</name></domain>", XML_ERROR_PARSE, "<domain>"},
        {"<!DOCTYPE device [<!ENTITY e 'x'>]><device><name>&e;</name></device>", XML_ERROR_PARSE,
         "DOCTYPE"},
        {"<device><capability type='pci'/></device>", XML_ERROR_INVALID, "<name>"},
        {"<device><name>p</name><capability type='pci'><domain>0</domain><bus>0x3b</bus>"
         "</capability></device>",
         XML_ERROR_INVALID, "<bus>0x3b</bus>"},
        {"<device><name>p</name><capability type='pci'><domain>0</domain><bus>256</bus>"
         "</capability></device>",
         XML_ERROR_INVALID, "<bus>256</bus>"},
        {"<device><name>p</name><capability type='pci'><domain>0</domain><bus>1</bus>"
         "<function>0</function></capability></device>",
         XML_ERROR_INVALID, "no <slot>"},
        {"<device><name>p</name><capability type='pci'><domain>0</domain><bus>1</bus>"
         "<slot>0</slot><function>0</function><product id='0x1'/></capability></device>",
         XML_ERROR_INVALID, "no <vendor id=...>"},
        {"<device><name>p</name><capability type='pci'><domain>0</domain><bus>1</bus>"
         "<slot>0</slot><function>0</function><product id='0x1'/><vendor id='0x1ffff'/>"
         "</capability></device>",
         XML_ERROR_INVALID, "0x1ffff"},
        {"<device><name>p</name><capability type='pci'><domain>0</domain><bus>1</bus>"
         "<slot>0</slot><function>0</function><product id='1'/><vendor id='2'/>"
         "<capability type='phys_function'/></capability></device>",
         XML_ERROR_INVALID, "phys_function'> has no <address>"},
        {"<device><name>p</name><capability type='pci'><domain>0</domain><bus>1</bus>"
         "<slot>0</slot><function>0</function><product id='1'/><vendor id='2'/>"
         "<capability type='virt_functions'><address bus='1' slot='40' function='0'/>"
         "</capability></capability></device>",
         XML_ERROR_INVALID, "slot='40'"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(XmlNodeDev) dev = xml_nodedev_parse(cases[i].xml, &error);

        if (dev)
            fail_msg("case %zu parsed", i);
        assert_error(error, XML_ERROR, cases[i].code);
        assert_true(g_str_has_prefix(error->message, "node device XML"));
        if (!strstr(error->message, cases[i].needle))
            fail_msg("case %zu: '%s' lacks '%s'", i, error->message, cases[i].needle);
    }
}


static void test_domain_needs(void **state)
{
    static const char xml[] =
        "<domain type='qemu'><name>vm1</name>"
        "<os><type arch='x86_64' machine='q35'>hvm</type><kernel>/boot/vmlinuz</kernel>"
        "<initrd>/boot/initrd.img</initrd><cmdline>console=ttyS0</cmdline></os>"
        "<cpu mode='custom' match='exact'><model>Skylake-Server</model></cpu>"
        "<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>"
        "<disk type='file'><source file='/var/lib/images/vm1.qcow2'/></disk>"
        "<disk type='block'><source dev='/dev/vg/vm1'/></disk>"
        "<disk type='file'><source file='/var/lib/images/vm1.qcow2'/></disk>"
        "<disk type='network'><source protocol='rbd' name='pool/img'/></disk>"
        "<filesystem><source dir='/srv/share'/></filesystem>"
        "<interface type='ethernet'><target dev='hmlab0vf1' managed='no'/>"
        "<alias name='ua-hmvf0'/></interface>"
        "</devices></domain>";
    g_autoptr(XmlDomain) dom = xml_domain_parse(xml, NULL);
    g_autoptr(XmlDomainNeeds) needs = NULL;
    g_autoptr(GPtrArray) vfs = NULL;
    static const char *const want[] = {"/boot/vmlinuz", "/boot/initrd.img",
                                       "/var/lib/images/vm1.qcow2", "/dev/vg/vm1", "/srv/share"};

    assert_non_null(dom);
    needs = xml_domain_get_needs(dom);
    assert_string_equal(needs->type, "qemu");
    assert_string_equal(needs->arch, "x86_64");
    assert_string_equal(needs->machine, "q35");
    assert_string_equal(needs->emulator, "/usr/bin/qemu-system-x86_64");
    assert_non_null(strstr(needs->cpu_xml, "<model>Skylake-Server</model>"));
    assert_int_equal(needs->paths->len, G_N_ELEMENTS(want));
    for (guint i = 0; i < G_N_ELEMENTS(want); i++)
        assert_string_equal(g_ptr_array_index(needs->paths, i), want[i]);

    vfs = xml_domain_find_vfs(dom, NULL, NULL);
    assert_int_equal(vfs->len, 1);
    assert_string_equal(((XmlVf *)g_ptr_array_index(vfs, 0))->netdev, "hmlab0vf1");
}

static void test_caps_offer_guest(void **state)
{
    static const char caps[] =
        "<capabilities><host/><guest><os_type>hvm</os_type><arch name='x86_64'>"
        "<machine canonical='pc-q35-7.2'>q35</machine><machine>pc-q35-7.2</machine>"
        "<domain type='qemu'/><domain type='kvm'><machine>pc-kvm-only</machine></domain>"
        "</arch></guest><guest><os_type>hvm</os_type><arch name='i686'><domain type='test'/>"
        "</arch></guest></capabilities>";
    gboolean ok = FALSE;
    g_autofree char *why = NULL;
    g_autoptr(GError) error = NULL;

    assert_true(xml_caps_offer_guest(caps, "qemu", "x86_64", "q35", &ok, &why, NULL));
    assert_true(ok);
    assert_true(xml_caps_offer_guest(caps, "kvm", "x86_64", "pc-kvm-only", &ok, &why, NULL));
    assert_true(ok);
    assert_true(xml_caps_offer_guest(caps, "qemu", "x86_64", "pc-kvm-only", &ok, &why, NULL));
    assert_false(ok);
    assert_string_equal(why, "no machine 'pc-kvm-only' for 'qemu' guests of arch 'x86_64'");
    g_clear_pointer(&why, g_free);
    assert_true(xml_caps_offer_guest(caps, "qemu", "aarch64", NULL, &ok, &why, NULL));
    assert_false(ok);
    assert_string_equal(why, "no guest of arch 'aarch64'");
    g_clear_pointer(&why, g_free);
    assert_true(xml_caps_offer_guest(caps, "qemu", "i686", NULL, &ok, &why, NULL));
    assert_false(ok);
    assert_string_equal(why, "no 'qemu' guest for arch 'i686'");
    assert_false(xml_caps_offer_guest("<domain/>", "qemu", NULL, NULL, &ok, &why, &error));
    assert_true(g_error_matches(error, XML_ERROR, XML_ERROR_PARSE));
}

static void test_domain_needs_minimal(void **state)
{
    g_autoptr(XmlDomain) dom =
        xml_domain_parse("<domain><name>x</name><cpu mode='host-passthrough'/></domain>", NULL);
    g_autoptr(XmlDomainNeeds) needs = xml_domain_get_needs(dom);

    assert_null(needs->type);
    assert_null(needs->arch);
    assert_null(needs->cpu_xml);
    assert_int_equal(needs->paths->len, 0);
}

/* The job id in a domain's metadata: only hotmig's namespace counts, any prefix; bad ids are
 * refused naming the domain. */
static void test_domain_job(void **state)
{
    static const struct {
        const char *metadata;
        const char *job; /* NULL: none, or refused when bad */
        gboolean bad;
    } cases[] = {
        {"", NULL, FALSE},
        {"<metadata/>", NULL, FALSE},
        {"<metadata><hm:job xmlns:hm='urn:hotmig:1'>mpi-42</hm:job></metadata>", "mpi-42", FALSE},
        {"<metadata><other xmlns='urn:x'/><job xmlns='urn:hotmig:1'> lu.C </job></metadata>",
         "lu.C", FALSE},
        {"<metadata><job>plain</job></metadata>", NULL, FALSE},
        {"<metadata><o:job xmlns:o='urn:other'>x</o:job></metadata>", NULL, FALSE},
        {"<metadata><hm:job xmlns:hm='urn:hotmig:1'></hm:job></metadata>", NULL, TRUE},
        {"<metadata><hm:job xmlns:hm='urn:hotmig:1'>a&#9;b</hm:job></metadata>", NULL, TRUE},
    };
    g_autofree char *long_id = g_strnfill(XML_JOB_MAX_BYTES + 1, 'j');

    for (gsize i = 0; i <= G_N_ELEMENTS(cases); i++) {
        g_autofree char *meta =
            i < G_N_ELEMENTS(cases)
                ? g_strdup(cases[i].metadata)
                : g_strdup_printf("<metadata><job xmlns='urn:hotmig:1'>%s</job></metadata>",
                                  long_id);
        gboolean bad = i < G_N_ELEMENTS(cases) ? cases[i].bad : TRUE;
        g_autofree char *xml =
            g_strdup_printf("<domain type='kvm'><name>vm1</name>%s<devices/></domain>", meta);
        g_autoptr(GError) error = NULL;
        g_autoptr(XmlDomain) dom = xml_domain_parse(xml, &error);
        g_autofree char *job = NULL;

        assert_non_null(dom);
        job = xml_domain_get_job(dom, &error);
        if (bad) {
            assert_null(job);
            assert_error(error, XML_ERROR, XML_ERROR_INVALID);
            assert_non_null(strstr(error->message, "domain 'vm1': the job id"));
        } else {
            assert_null(error);
            if (cases[i].job)
                assert_string_equal(job, cases[i].job);
            else
                assert_null(job);
        }
    }
}

/* A Nova instance: an <instance> in Nova's namespace (any version, any prefix) in <metadata>. */
static void test_domain_is_nova(void **state)
{
    static const struct {
        const char *metadata;
        gboolean nova;
    } cases[] = {
        {"", FALSE},
        {"<metadata><hm:job xmlns:hm='urn:hotmig:1'>mpi-42</hm:job></metadata>", FALSE},
        {"<metadata><nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'>"
         "<nova:name>vm1</nova:name></nova:instance></metadata>",
         TRUE},
        {"<metadata><other xmlns='urn:x'/><instance "
         "xmlns='http://openstack.org/xmlns/libvirt/nova/1.0'/></metadata>",
         TRUE},
        {"<metadata><instance/></metadata>", FALSE},
        {"<metadata><x:instance xmlns:x='http://example.org/nova/1.1'/></metadata>", FALSE},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *xml = g_strdup_printf(
            "<domain type='kvm'><name>vm1</name>%s<devices/></domain>", cases[i].metadata);
        g_autoptr(GError) error = NULL;
        g_autoptr(XmlDomain) dom = xml_domain_parse(xml, &error);

        assert_non_null(dom);
        if (xml_domain_is_nova(dom) != cases[i].nova)
            fail_msg("case %zu: nova %d, expected %d", i, !cases[i].nova, cases[i].nova);
    }
}

/* Whether a guest may answer on a channel: the live XML's state of that virtio channel. */
static void test_domain_channel_may_answer(void **state)
{
    static const struct {
        const char *devices;
        gboolean may;
    } cases[] = {
        {"", FALSE},
        {"<channel type='unix'><target type='virtio' name='org.hotmig.agent.0' "
         "state='connected'/></channel>",
         TRUE},
        {"<channel type='unix'><target type='virtio' name='org.hotmig.agent.0' "
         "state='disconnected'/></channel>",
         FALSE},
        /* No state (an inactive definition, an old QEMU): not known, so it may. */
        {"<channel type='unix'><target type='virtio' name='org.hotmig.agent.0'/></channel>", TRUE},
        {"<channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0' "
         "state='connected'/></channel><channel type='unix'><target type='virtio' "
         "name='org.hotmig.agent.0' state='disconnected'/></channel>",
         FALSE},
        {"<channel type='pty'><target type='guestfwd' name='org.hotmig.agent.0'/></channel>",
         FALSE},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *xml = g_strdup_printf(
            "<domain type='kvm'><name>vm1</name><devices>%s</devices></domain>", cases[i].devices);
        g_autoptr(GError) error = NULL;
        g_autoptr(XmlDomain) dom = xml_domain_parse(xml, &error);

        assert_non_null(dom);
        if (xml_domain_channel_may_answer(dom, "org.hotmig.agent.0") != cases[i].may)
            fail_msg("case %zu: may answer %d, expected %d", i, !cases[i].may, cases[i].may);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pci_parse_valid),
        cmocka_unit_test(test_pci_parse_invalid),
        cmocka_unit_test(test_pci_parse_null_outputs),
        cmocka_unit_test(test_vf_kind_strings),
        cmocka_unit_test(test_domain_parse_ok),
        cmocka_unit_test(test_domain_parse_rejects),
        cmocka_unit_test(test_domain_parse_size_limit),
        cmocka_unit_test(test_find_vfs_prefix),
        cmocka_unit_test(test_find_vfs_errors),
        cmocka_unit_test(test_address_number_syntax),
        cmocka_unit_test(test_list_host_pci),
        cmocka_unit_test(test_attach_errors),
        cmocka_unit_test(test_attach_roundtrip),
        cmocka_unit_test(test_user_alias),
        cmocka_unit_test(test_set_alias),
        cmocka_unit_test(test_set_alias_errors),
        cmocka_unit_test(test_attach_bad_alias),
        cmocka_unit_test(test_nodedev_vf),
        cmocka_unit_test(test_nodedev_pf),
        cmocka_unit_test(test_nodedev_not_pci),
        cmocka_unit_test(test_nodedev_bad),
        cmocka_unit_test(test_domain_needs),
        cmocka_unit_test(test_domain_needs_minimal),
        cmocka_unit_test(test_caps_offer_guest),
        cmocka_unit_test(test_domain_job),
        cmocka_unit_test(test_domain_is_nova),
        cmocka_unit_test(test_domain_channel_may_answer),
    };

    return cmocka_run_group_tests_name("xml", tests, NULL, NULL);
}
