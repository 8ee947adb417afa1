/* Golden tests for hm-xml: tests/golden/<case>.in.xml is a domain XML; the expected result is
 * <case>.out.txt (what xml_domain_find_vfs found, each VF's device XML, its attach XML and that
 * under another alias) or
 * <case>.err (the error). Adding a case: one line in xml_golden_cases[] and two files.
 * HM_GOLDEN_REGENERATE=1 rewrites the expected files from the actual results for review.
 *
 * Usage: xml-golden GOLDEN_DIR */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "xml/xml.h"

/* The host PCI address every hostdev kind VF is re-attached with. */
#define GOLDEN_NEW_HOST_PCI "0000:af:00.2"
/* The alias every attach XML is given once more (xml_device_set_alias(), as recovery does). */
#define GOLDEN_ALIAS "ua-golden-r"

static const char *const xml_golden_cases[] = {
    "xml-hostdev-ib",      "xml-interface-hostdev", "xml-standin",    "xml-two-vfs",
    "xml-no-vf",           "xml-hostdev-no-alias",  "xml-malformed",  "xml-dtd-entity",
    "xml-external-entity", "xml-live-q35",          "xml-user-alias", "xml-hostdev-bad-address",
    "xml-not-domain",      "xml-no-name",
};

static const char *golden_dir;

static const char *xml_error_name(int code)
{
    static const char *const names[] = {"XML_ERROR_FAILED", "XML_ERROR_PARSE", "XML_ERROR_INVALID",
                                        "XML_ERROR_NOT_FOUND"};

    G_STATIC_ASSERT(G_N_ELEMENTS(names) == XML_ERROR_LAST);
    if (code < 0 || code >= XML_ERROR_LAST)
        return "XML_ERROR_?";
    return names[code];
}

/* Runs hm-xml over @input. Returns TRUE with the rendering in @out, or FALSE with the error
 * rendered in @out. */
static gboolean golden_render(const char *input, GString *out)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(XmlDomain) dom = NULL;
    g_autoptr(GPtrArray) vfs = NULL;

    dom = xml_domain_parse(input, &error);
    if (dom)
        vfs = xml_domain_find_vfs(dom, NULL, &error);
    if (!vfs)
        goto fail;

    g_string_append_printf(out, "domain: %s\nvfs: %u\n", xml_domain_get_name(dom), vfs->len);
    for (guint i = 0; i < vfs->len; i++) {
        const XmlVf *vf = g_ptr_array_index(vfs, i);
        const char *new_pci = vf->kind == XML_VF_KIND_STANDIN ? NULL : GOLDEN_NEW_HOST_PCI;
        g_autofree char *attach = xml_vf_format_attach(vf, new_pci, &error);
        g_autofree char *realiased = attach ? xml_device_set_alias(attach, GOLDEN_ALIAS, &error)
                                            : NULL;

        if (!realiased)
            goto fail;
        g_string_append_printf(out, "\n--- vf %u\n", i + 1);
        g_string_append_printf(out, "kind: %s\n", xml_vf_kind_to_string(vf->kind));
        g_string_append_printf(out, "alias: %s\n", vf->alias);
        g_string_append_printf(out, "host_pci: %s\n", vf->host_pci ? vf->host_pci : "-");
        g_string_append_printf(out, "mac: %s\n", vf->mac ? vf->mac : "-");
        g_string_append_printf(out, "device_xml:\n%s\n", vf->device_xml);
        g_string_append_printf(out, "attach_xml (new host PCI %s):\n%s\n", new_pci ? new_pci : "-",
                               attach);
        g_string_append_printf(out, "attach_xml as '%s':\n%s\n", GOLDEN_ALIAS, realiased);
    }
    return TRUE;

fail:
    g_assert(error != NULL);
    g_assert(error->domain == XML_ERROR);
    g_string_truncate(out, 0);
    g_string_append_printf(out, "%s: %s\n", xml_error_name(error->code), error->message);
    return FALSE;
}

static void golden_case(void **state)
{
    const char *name = *state;
    g_autofree char *in_path = g_strdup_printf("%s/%s.in.xml", golden_dir, name);
    g_autofree char *out_path = g_strdup_printf("%s/%s.out.txt", golden_dir, name);
    g_autofree char *err_path = g_strdup_printf("%s/%s.err", golden_dir, name);
    g_autoptr(GError) error = NULL;
    g_autoptr(GString) actual = g_string_new(NULL);
    g_autofree char *input = NULL;
    g_autofree char *expected = NULL;
    const char *path;
    const char *other;
    gboolean ok;

    if (!g_file_get_contents(in_path, &input, NULL, &error))
        fail_msg("%s", error->message);
    ok = golden_render(input, actual);
    path = ok ? out_path : err_path;
    other = ok ? err_path : out_path;

    if (g_getenv("HM_GOLDEN_REGENERATE")) {
        if (!g_file_set_contents(path, actual->str, (gssize)actual->len, &error))
            fail_msg("%s", error->message);
        (void)unlink(other);
        print_message("regenerated %s\n", path);
        return;
    }
    if (g_file_test(other, G_FILE_TEST_EXISTS))
        fail_msg("case '%s' %s, but '%s' exists; actual result:\n%s", name,
                 ok ? "succeeded" : "failed", other, actual->str);
    if (!g_file_get_contents(path, &expected, NULL, &error))
        fail_msg("%s; actual result:\n%s", error->message, actual->str);
    if (!g_str_equal(expected, actual->str))
        fail_msg("case '%s' differs from %s (HM_GOLDEN_REGENERATE=1 rewrites it)\n"
                 "--- expected\n%s--- actual\n%s",
                 name, path, expected, actual->str);
}

/* Every xml-*.in.xml in the directory is a listed case: none is forgotten. */
static void golden_all_listed(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GDir) dir = g_dir_open(golden_dir, 0, &error);
    const char *entry;

    if (!dir)
        fail_msg("%s", error->message);
    while ((entry = g_dir_read_name(dir))) {
        g_autofree char *name = NULL;
        gboolean listed = FALSE;

        if (!g_str_has_prefix(entry, "xml-") || !g_str_has_suffix(entry, ".in.xml"))
            continue;
        name = g_strndup(entry, strlen(entry) - strlen(".in.xml"));
        for (gsize i = 0; i < G_N_ELEMENTS(xml_golden_cases); i++)
            listed = listed || g_str_equal(name, xml_golden_cases[i]);
        if (!listed)
            fail_msg("'%s' is not in xml_golden_cases[]", entry);
    }
}

int main(int argc, char **argv)
{
    g_autofree struct CMUnitTest *tests = NULL;
    gsize n = G_N_ELEMENTS(xml_golden_cases);

    if (argc != 2) {
        fprintf(stderr, "usage: %s GOLDEN_DIR\n", argv[0]);
        return 2;
    }
    golden_dir = argv[1];

    tests = g_new0(struct CMUnitTest, n + 1);
    for (gsize i = 0; i < n; i++) {
        tests[i].name = xml_golden_cases[i];
        tests[i].test_func = golden_case;
        tests[i].initial_state = (void *)xml_golden_cases[i];
    }
    tests[n].name = "all-listed";
    tests[n].test_func = golden_all_listed;
    return _cmocka_run_group_tests("xml-golden", tests, n + 1, NULL, NULL);
}
