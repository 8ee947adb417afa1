/* Fuzz target for hm-xml: whatever bytes arrive as a domain XML (or a node device XML) must be
 * rejected with an error or read without crashing, leaking or tripping a sanitizer; every VF
 * found must format to attach XML or fail cleanly, and that attach XML must take another alias.
 *
 * libFuzzer: see tests/fuzz/xml.cmake (clang, -DHM_FUZZ=ON). Without libFuzzer the corpus in
 * tests/fuzz/corpus/xml/ is replayed by xml-fuzz-replay as a normal CTest (label fuzz). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "xml/xml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autofree char *xml = NULL;
    g_autoptr(XmlDomain) dom = NULL;
    g_autoptr(XmlNodeDev) nodedev = NULL;
    g_autoptr(GPtrArray) vfs = NULL;
    g_autoptr(GError) error = NULL;

    if (size > XML_DOMAIN_MAX_BYTES + 1)
        return 0;
    /* The API takes C strings: the input up to its first NUL is what a caller could pass. */
    xml = g_strndup((const char *)data, size);

    dom = xml_domain_parse(xml, &error);
    g_assert((dom == NULL) == (error != NULL));
    g_clear_error(&error);
    if (dom) {
        g_autofree char *job = NULL;

        g_assert(xml_domain_get_name(dom) != NULL);
        job = xml_domain_get_job(dom, &error);
        g_assert(job == NULL || (*job && strlen(job) <= XML_JOB_MAX_BYTES));
        g_assert(job == NULL || error == NULL);
        g_clear_error(&error);
        vfs = xml_domain_find_vfs(dom, NULL, &error);
        g_assert((vfs == NULL) == (error != NULL));
        g_clear_error(&error);
    }
    for (guint i = 0; vfs && i < vfs->len; i++) {
        const XmlVf *vf = g_ptr_array_index(vfs, i);
        gboolean standin = vf->kind == XML_VF_KIND_STANDIN;
        g_autofree char *attach = NULL;
        g_autofree char *back = NULL;

        g_assert(vf->alias != NULL && vf->device_xml != NULL);
        g_assert(standin == (vf->host_pci == NULL));
        if (vf->host_pci)
            g_assert(hm_pci_address_parse(vf->host_pci, NULL, NULL));
        attach = xml_vf_format_attach(vf, standin ? NULL : "0000:af:00.2", &error);
        g_assert((attach == NULL) == (error != NULL));
        g_clear_error(&error);
        /* Putting the VF back where it was also works. */
        back = xml_vf_format_attach(vf, vf->host_pci, &error);
        g_assert((back == NULL) == (error != NULL));
        g_clear_error(&error);
        /* Attach XML takes another alias (recovery's plug-back). */
        if (back) {
            g_autofree char *realiased = xml_device_set_alias(back, "ua-fuzz-r", &error);

            g_assert(realiased != NULL && error == NULL);
        }
    }
    /* Whatever arrives as a device XML is refused or takes the alias. */
    {
        g_autofree char *realiased = xml_device_set_alias(xml, "ua-fuzz-r", &error);

        g_assert((realiased == NULL) == (error != NULL));
        g_clear_error(&error);
    }

    nodedev = xml_nodedev_parse(xml, &error);
    g_assert((nodedev == NULL) == (error != NULL));
    g_clear_error(&error);
    return 0;
}
