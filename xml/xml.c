/* hm-xml: libvirt domain XML. The only place, with nodedev.c, that talks to libxml2. */
#define G_LOG_DOMAIN "hm-xml"

#include "xml/xml.h"
#include "xml/xml-priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/catalog.h>
#include <libxml/parser.h>
#include <libxml/xmlerror.h>

G_DEFINE_QUARK(hm - xml - error - quark, xml_error)

void xml_init(void)
{
    xmlInitParser();
    xmlInitializeCatalog();
}

HM_ENUM_IMPL(xml_vf_kind, XmlVfKind, XML_VF_KIND_LAST, "hostdev", "interface-hostdev", "standin")

/* libvirt accepts an alias on hot-plug only when it is a user alias. */
#define XML_USER_ALIAS_PREFIX "ua-"

struct XmlDomain {
    xmlDoc *doc;
    char *name;
};

/* ---- hardened parsing -------------------------------------------------------------------- */

typedef struct {
    gboolean saw_dtd;
    char *first_error; /* the first error libxml2 reported: the cause, not a consequence */
    int first_error_line;
} XmlParseState;

/* A <!DOCTYPE> is the only way to declare entities: stop right there. */
static void xml_sax_internal_subset(void *ctx, const xmlChar *name, const xmlChar *external_id,
                                    const xmlChar *system_id)
{
    xmlParserCtxt *ctxt = ctx;
    XmlParseState *state = ctxt->_private;

    state->saw_dtd = TRUE;
    xmlStopParser(ctxt);
}

/* Keeps libxml2 quiet and remembers its first error for our message. */
static void xml_sax_structured_error(void *user_data, xmlError *err)
{
    xmlParserCtxt *ctxt = user_data;
    XmlParseState *state = ctxt ? ctxt->_private : NULL;

    if (!state || state->first_error || !err || err->level < XML_ERR_ERROR)
        return;
    state->first_error = g_strstrip(g_strdup(err->message ? err->message : "unknown error"));
    state->first_error_line = err->line;
}

xmlDoc *xml_doc_parse(const char *what, const char *xml, gsize len, gsize max, GError **error)
{
    g_autoptr(xmlParserCtxt) ctxt = NULL;
    g_autoptr(xmlDoc) doc = NULL;
    XmlParseState state = {FALSE, NULL, 0};
    g_autofree char *first_error = NULL;
    const int options = XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING;

    g_return_val_if_fail(what != NULL, NULL);
    g_return_val_if_fail(xml != NULL, NULL);

    if (len > max || len > G_MAXINT) {
        g_set_error(error, XML_ERROR, XML_ERROR_PARSE,
                    "%s: larger than the limit of %" G_GSIZE_FORMAT " bytes", what, max);
        return NULL;
    }
    if (len == 0) {
        g_set_error(error, XML_ERROR, XML_ERROR_PARSE, "%s: empty", what);
        return NULL;
    }

    xmlInitParser();
    ctxt = xmlNewParserCtxt();
    if (!ctxt) {
        g_set_error(error, XML_ERROR, XML_ERROR_FAILED, "%s: cannot create an XML parser", what);
        return NULL;
    }
    ctxt->_private = &state;
    ctxt->sax->internalSubset = xml_sax_internal_subset;
    ctxt->sax->serror = xml_sax_structured_error;
    ctxt->sax->warning = NULL;
    ctxt->sax->error = NULL;
    ctxt->sax->fatalError = NULL;

    doc = xmlCtxtReadMemory(ctxt, xml, (int)len, NULL, NULL, options);
    first_error = g_steal_pointer(&state.first_error);
    if (state.saw_dtd) {
        g_set_error(error, XML_ERROR, XML_ERROR_PARSE,
                    "%s: a document type declaration (<!DOCTYPE>) is not allowed", what);
        return NULL;
    }
    if (!doc || !ctxt->wellFormed) {
        const xmlError *err = xmlCtxtGetLastError(ctxt);

        if (!first_error && err && err->message) {
            first_error = g_strstrip(g_strdup(err->message));
            state.first_error_line = err->line;
        }
        g_set_error(error, XML_ERROR, XML_ERROR_PARSE, "%s: not well-formed (line %d): %s", what,
                    state.first_error_line, first_error ? first_error : "unknown error");
        return NULL;
    }
    if (doc->intSubset || doc->extSubset) {
        /* Not reachable with the handler above; kept so a libxml2 change cannot open it. */
        g_set_error(error, XML_ERROR, XML_ERROR_PARSE,
                    "%s: a document type declaration (<!DOCTYPE>) is not allowed", what);
        return NULL;
    }
    return g_steal_pointer(&doc);
}

/* ---- small helpers ----------------------------------------------------------------------- */

gboolean xml_node_is(const xmlNode *node, const char *name)
{
    return node && node->type == XML_ELEMENT_NODE && xmlStrEqual(node->name, BAD_CAST name);
}

xmlNode *xml_node_child(const xmlNode *node, const char *name)
{
    for (xmlNode *cur = node ? node->children : NULL; cur; cur = cur->next) {
        if (xml_node_is(cur, name))
            return cur;
    }
    return NULL;
}

xmlNode *xml_node_next(const xmlNode *node, const char *name)
{
    for (xmlNode *cur = node ? node->next : NULL; cur; cur = cur->next) {
        if (xml_node_is(cur, name))
            return cur;
    }
    return NULL;
}

char *xml_node_prop(const xmlNode *node, const char *name)
{
    xmlChar *value = xmlGetNoNsProp(node, BAD_CAST name);
    char *ret;

    if (!value)
        return NULL;
    ret = g_strdup((const char *)value);
    xmlFree(value);
    return ret;
}

char *xml_node_text(const xmlNode *node)
{
    xmlChar *value = xmlNodeGetContent(node);
    char *ret = g_strdup(value ? (const char *)value : "");

    xmlFree(value);
    return g_strstrip(ret);
}

char *xml_node_dump(xmlNode *node)
{
    g_autoptr(xmlBuffer) buf = xmlBufferCreate();

    if (!buf || xmlNodeDump(buf, node->doc, node, 0, 0) < 0)
        g_error("hm-xml: out of memory serializing <%s>", (const char *)node->name);
    return g_strndup((const char *)xmlBufferContent(buf), (gsize)xmlBufferLength(buf));
}

gboolean xml_uint_parse_base(const char *str, guint base, guint max, guint *ret)
{
    guint64 value = 0;
    const char *p = str;

    g_return_val_if_fail(base == 10 || base == 16 || base == 8, FALSE);

    if (!str)
        return FALSE;
    if (base == 16 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        p += 2;
    if (*p == '\0')
        return FALSE;
    for (; *p; p++) {
        int digit = g_ascii_xdigit_value(*p);

        if (digit < 0 || (guint)digit >= base)
            return FALSE;
        value = value * base + (guint)digit;
        if (value > max)
            return FALSE;
    }
    *ret = (guint)value;
    return TRUE;
}

gboolean xml_uint_parse_auto(const char *str, guint max, guint *ret)
{
    if (!str)
        return FALSE;
    if (str[0] == '0' && (str[1] == 'x' || str[1] == 'X'))
        return xml_uint_parse_base(str, 16, max, ret);
    if (str[0] == '0' && str[1] != '\0')
        return xml_uint_parse_base(str + 1, 8, max, ret);
    return xml_uint_parse_base(str, 10, max, ret);
}

/* ---- domains ----------------------------------------------------------------------------- */

XmlDomain *xml_domain_parse(const char *xml, GError **error)
{
    g_autoptr(XmlDomain) dom = NULL;
    xmlNode *root;
    xmlNode *name;

    g_return_val_if_fail(xml != NULL, NULL);

    dom = g_new0(XmlDomain, 1);
    dom->doc = xml_doc_parse("domain XML", xml, strnlen(xml, (gsize)XML_DOMAIN_MAX_BYTES + 1),
                             XML_DOMAIN_MAX_BYTES, error);
    if (!dom->doc)
        return NULL;

    root = xmlDocGetRootElement(dom->doc);
    if (!xml_node_is(root, "domain")) {
        g_set_error(error, XML_ERROR, XML_ERROR_PARSE,
                    "domain XML: the root element is <%s>, not <domain>",
                    root ? (const char *)root->name : "");
        return NULL;
    }
    name = xml_node_child(root, "name");
    if (name)
        dom->name = xml_node_text(name);
    if (!dom->name || !*dom->name) {
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID, "domain XML: <domain> has no <name>");
        return NULL;
    }
    return g_steal_pointer(&dom);
}

void xml_domain_free(XmlDomain *dom)
{
    if (!dom)
        return;
    if (dom->doc)
        xmlFreeDoc(dom->doc);
    g_free(dom->name);
    g_free(dom);
}

const char *xml_domain_get_name(const XmlDomain *dom)
{
    g_return_val_if_fail(dom != NULL, NULL);
    return dom->name;
}

char *xml_domain_get_job(const XmlDomain *dom, GError **error)
{
    xmlNode *metadata;
    g_autofree char *job = NULL;

    g_return_val_if_fail(dom != NULL, NULL);
    metadata = xml_node_child(xmlDocGetRootElement(dom->doc), "metadata");
    for (xmlNode *cur = xml_node_child(metadata, "job"); cur; cur = xml_node_next(cur, "job")) {
        if (cur->ns && xmlStrEqual(cur->ns->href, BAD_CAST XML_METADATA_NS)) {
            job = xml_node_text(cur);
            break;
        }
    }
    if (!job)
        return NULL;
    if (!*job || strlen(job) > XML_JOB_MAX_BYTES || !g_utf8_validate(job, -1, NULL)) {
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID,
                    "domain '%s': the job id in its metadata is not 1 to %d bytes of UTF-8",
                    dom->name, XML_JOB_MAX_BYTES);
        return NULL;
    }
    for (const char *c = job; *c; c = g_utf8_next_char(c)) {
        if (g_unichar_iscntrl(g_utf8_get_char(c))) {
            g_set_error(error, XML_ERROR, XML_ERROR_INVALID,
                        "domain '%s': the job id in its metadata holds a control character",
                        dom->name);
            return NULL;
        }
    }
    return g_steal_pointer(&job);
}

gboolean xml_domain_is_nova(const XmlDomain *dom)
{
    xmlNode *metadata;

    g_return_val_if_fail(dom != NULL, FALSE);
    metadata = xml_node_child(xmlDocGetRootElement(dom->doc), "metadata");
    for (xmlNode *cur = xml_node_child(metadata, "instance"); cur;
         cur = xml_node_next(cur, "instance")) {
        if (cur->ns && cur->ns->href &&
            g_str_has_prefix((const char *)cur->ns->href, XML_NOVA_NS_PREFIX))
            return TRUE;
    }
    return FALSE;
}

gboolean xml_domain_channel_may_answer(const XmlDomain *dom, const char *name)
{
    xmlNode *devices;

    g_return_val_if_fail(dom != NULL && name != NULL, FALSE);
    devices = xml_node_child(xmlDocGetRootElement(dom->doc), "devices");
    for (xmlNode *cur = xml_node_child(devices, "channel"); cur;
         cur = xml_node_next(cur, "channel")) {
        xmlNode *target = xml_node_child(cur, "target");
        g_autofree char *type = target ? xml_node_prop(target, "type") : NULL;
        g_autofree char *tname = target ? xml_node_prop(target, "name") : NULL;
        g_autofree char *state = NULL;

        if (g_strcmp0(type, "virtio") != 0 || g_strcmp0(tname, name) != 0)
            continue;
        state = xml_node_prop(target, "state");
        return g_strcmp0(state, "disconnected") != 0;
    }
    return FALSE;
}

void xml_vf_free(XmlVf *vf)
{
    if (!vf)
        return;
    g_free(vf->alias);
    g_free(vf->host_pci);
    g_free(vf->mac);
    g_free(vf->netdev);
    g_free(vf->device_xml);
    g_free(vf);
}

char *xml_pci_address_from_node(const xmlNode *addr, const char *what, const char *where,
                                GError **error)
{
    static const struct {
        const char *attr;
        guint max;
        gboolean required;
    } fields[] = {
        {"domain", HM_PCI_DOMAIN_MAX, FALSE},
        {"bus", HM_PCI_BUS_MAX, TRUE},
        {"slot", HM_PCI_SLOT_MAX, TRUE},
        {"function", HM_PCI_FUNCTION_MAX, TRUE},
    };
    guint values[G_N_ELEMENTS(fields)] = {0};
    g_autofree char *type = xml_node_prop(addr, "type");

    if (type && !g_str_equal(type, "pci")) {
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID, "%s has %s of type '%s', not 'pci'", what,
                    where, type);
        return NULL;
    }
    for (gsize i = 0; i < G_N_ELEMENTS(fields); i++) {
        g_autofree char *value = xml_node_prop(addr, fields[i].attr);

        if (!value && fields[i].required) {
            g_set_error(error, XML_ERROR, XML_ERROR_INVALID, "%s has no %s in %s", what,
                        fields[i].attr, where);
            return NULL;
        }
        if (value && !xml_uint_parse_auto(value, fields[i].max, &values[i])) {
            g_set_error(error, XML_ERROR, XML_ERROR_INVALID,
                        "%s has a bad %s %s='%s' (a number, at most 0x%x)", what, where,
                        fields[i].attr, value, fields[i].max);
            return NULL;
        }
    }
    return hm_pci_address_format(&(HmPciAddress){values[0], values[1], values[2], values[3]});
}

/* Reads the host PCI address of a hostdev kind VF from <source><address>. @what names the
 * device in messages ("domain XML: <hostdev> #2"). */
static char *vf_source_address(const xmlNode *dev, const char *what, GError **error)
{
    xmlNode *addr = xml_node_child(xml_node_child(dev, "source"), "address");

    if (!addr) {
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID, "%s has no <source><address>", what);
        return NULL;
    }
    return xml_pci_address_from_node(addr, what, "<source><address>", error);
}

/* XML_VF_KIND_HOSTDEV or XML_VF_KIND_INTERFACE_HOSTDEV when @dev is a PCI host device,
 * XML_VF_KIND_LAST when it is not. */
static XmlVfKind device_host_pci_kind(const xmlNode *dev)
{
    g_autofree char *type = xml_node_prop(dev, "type");

    if (xml_node_is(dev, "hostdev")) {
        g_autofree char *mode = xml_node_prop(dev, "mode");

        if (type && g_str_equal(type, "pci") && (!mode || g_str_equal(mode, "subsystem")))
            return XML_VF_KIND_HOSTDEV;
    } else if (xml_node_is(dev, "interface")) {
        if (type && g_str_equal(type, "hostdev"))
            return XML_VF_KIND_INTERFACE_HOSTDEV;
    }
    return XML_VF_KIND_LAST;
}

/* Looks at one device element; sets *ret_vf to a new XmlVf when it is one, leaves it NULL
 * when it is not. @index is the 1-based position among elements of its name. */
static gboolean vf_from_device(xmlNode *dev, guint index, const char *alias_prefix, XmlVf **ret_vf,
                               GError **error)
{
    g_autoptr(XmlVf) vf = NULL;
    g_autofree char *what = g_strdup_printf("domain XML: <%s> #%u", (const char *)dev->name, index);
    xmlNode *alias_node = xml_node_child(dev, "alias");
    g_autofree char *alias = alias_node ? xml_node_prop(alias_node, "name") : NULL;
    XmlVfKind kind = device_host_pci_kind(dev);

    if (kind == XML_VF_KIND_LAST) {
        if (xml_node_is(dev, "hostdev") || !alias || !*alias_prefix ||
            !g_str_has_prefix(alias, alias_prefix))
            return TRUE;
        kind = XML_VF_KIND_STANDIN;
    }

    vf = g_new0(XmlVf, 1);
    vf->kind = kind;
    if (kind != XML_VF_KIND_STANDIN) {
        vf->host_pci = vf_source_address(dev, what, error);
        if (!vf->host_pci)
            return FALSE;
    }
    if (!alias || !*alias) {
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID,
                    "%s (%s) has no <alias name=...>; is this the live XML?", what,
                    vf->host_pci ? vf->host_pci : xml_vf_kind_to_string(kind));
        return FALSE;
    }
    vf->alias = g_steal_pointer(&alias);
    if (kind != XML_VF_KIND_HOSTDEV) {
        xmlNode *mac = xml_node_child(dev, "mac");

        if (mac)
            vf->mac = xml_node_prop(mac, "address");
    }
    if (kind == XML_VF_KIND_STANDIN) {
        xmlNode *target = xml_node_child(dev, "target");

        if (target)
            vf->netdev = xml_node_prop(target, "dev");
    }
    vf->device_xml = xml_node_dump(dev);
    *ret_vf = g_steal_pointer(&vf);
    return TRUE;
}

void xml_domain_needs_free(XmlDomainNeeds *needs)
{
    if (!needs)
        return;
    g_free(needs->type);
    g_free(needs->arch);
    g_free(needs->machine);
    g_free(needs->emulator);
    g_free(needs->cpu_xml);
    if (needs->paths)
        g_ptr_array_unref(needs->paths);
    g_free(needs);
}

static void needs_add_path(XmlDomainNeeds *needs, char *path)
{
    if (!path || !*path || path[0] != '/' ||
        g_ptr_array_find_with_equal_func(needs->paths, path, g_str_equal, NULL)) {
        g_free(path);
        return;
    }
    g_ptr_array_add(needs->paths, path);
}

XmlDomainNeeds *xml_domain_get_needs(const XmlDomain *dom)
{
    XmlDomainNeeds *needs = g_new0(XmlDomainNeeds, 1);
    xmlNode *root = xmlDocGetRootElement(dom->doc);
    xmlNode *os = xml_node_child(root, "os");
    xmlNode *devices = xml_node_child(root, "devices");
    xmlNode *cpu = xml_node_child(root, "cpu");
    static const char *const os_files[] = {"kernel", "initrd", "dtb", "loader", "nvram"};

    needs->paths = g_ptr_array_new_with_free_func(g_free);
    needs->type = xml_node_prop(root, "type");
    if (os) {
        xmlNode *type = xml_node_child(os, "type");

        if (type) {
            needs->arch = xml_node_prop(type, "arch");
            needs->machine = xml_node_prop(type, "machine");
        }
        for (guint i = 0; i < G_N_ELEMENTS(os_files); i++) {
            xmlNode *n = xml_node_child(os, os_files[i]);

            if (n)
                needs_add_path(needs, xml_node_text(n));
        }
    }
    if (cpu) {
        g_autofree char *mode = xml_node_prop(cpu, "mode");

        if (!mode || !g_str_equal(mode, "host-passthrough"))
            needs->cpu_xml = xml_node_dump(cpu);
    }
    if (devices) {
        xmlNode *emulator = xml_node_child(devices, "emulator");

        if (emulator)
            needs->emulator = xml_node_text(emulator);
        for (xmlNode *dev = devices->children; dev; dev = dev->next) {
            xmlNode *source;

            if (!xml_node_is(dev, "disk") && !xml_node_is(dev, "filesystem"))
                continue;
            source = xml_node_child(dev, "source");
            if (!source)
                continue;
            if (xml_node_is(dev, "filesystem")) {
                needs_add_path(needs, xml_node_prop(source, "dir"));
            } else {
                char *file = xml_node_prop(source, "file");

                needs_add_path(needs, file ? file : xml_node_prop(source, "dev"));
            }
        }
    }
    return needs;
}

/* Does <arch> element @arch_node list <machine> @machine (by name or canonical name)? */
static gboolean caps_arch_has_machine(xmlNode *arch_node, xmlNode *domain_node, const char *machine)
{
    xmlNode *lists[] = {arch_node, domain_node};

    for (guint l = 0; l < G_N_ELEMENTS(lists); l++) {
        for (xmlNode *m = xml_node_child(lists[l], "machine"); m; m = xml_node_next(m, "machine")) {
            g_autofree char *name = xml_node_text(m);
            g_autofree char *canonical = xml_node_prop(m, "canonical");

            if (g_strcmp0(name, machine) == 0 || g_strcmp0(canonical, machine) == 0)
                return TRUE;
        }
    }
    return FALSE;
}

gboolean xml_caps_offer_guest(const char *caps, const char *type, const char *arch,
                              const char *machine, gboolean *ret_supported, char **ret_why,
                              GError **error)
{
    g_autoptr(xmlDoc) doc = NULL;
    xmlNode *root;
    gboolean arch_seen = FALSE, type_seen = FALSE;

    g_return_val_if_fail(caps && type, FALSE);
    doc = xml_doc_parse("capabilities XML", caps, strlen(caps), XML_DOMAIN_MAX_BYTES, error);
    if (!doc)
        return FALSE;
    root = xmlDocGetRootElement(doc);
    if (!xml_node_is(root, "capabilities")) {
        g_set_error(error, XML_ERROR, XML_ERROR_PARSE,
                    "capabilities XML: the root element is not <capabilities>");
        return FALSE;
    }
    for (xmlNode *g = xml_node_child(root, "guest"); g; g = xml_node_next(g, "guest")) {
        for (xmlNode *a = xml_node_child(g, "arch"); a; a = xml_node_next(a, "arch")) {
            g_autofree char *name = xml_node_prop(a, "name");

            if (arch && g_strcmp0(name, arch) != 0)
                continue;
            arch_seen = TRUE;
            for (xmlNode *d = xml_node_child(a, "domain"); d; d = xml_node_next(d, "domain")) {
                g_autofree char *dtype = xml_node_prop(d, "type");

                if (g_strcmp0(dtype, type) != 0)
                    continue;
                type_seen = TRUE;
                if (!machine || caps_arch_has_machine(a, d, machine)) {
                    *ret_supported = TRUE;
                    *ret_why = NULL;
                    return TRUE;
                }
            }
        }
    }
    *ret_supported = FALSE;
    *ret_why = !arch_seen   ? g_strdup_printf("no guest of arch '%s'", arch)
               : !type_seen ? g_strdup_printf("no '%s' guest for arch '%s'", type,
                                              arch ? arch : "any")
                            : g_strdup_printf("no machine '%s' for '%s' guests of arch '%s'",
                                              machine, type, arch ? arch : "any");
    return TRUE;
}

GPtrArray *xml_domain_find_vfs(const XmlDomain *dom, const char *alias_prefix, GError **error)
{
    g_autoptr(GPtrArray) vfs = g_ptr_array_new_with_free_func((GDestroyNotify)xml_vf_free);
    xmlNode *devices;
    guint n_hostdev = 0, n_interface = 0;

    g_return_val_if_fail(dom != NULL, NULL);

    if (!alias_prefix)
        alias_prefix = XML_VF_ALIAS_PREFIX_DEFAULT;
    devices = xml_node_child(xmlDocGetRootElement(dom->doc), "devices");
    for (xmlNode *dev = devices ? devices->children : NULL; dev; dev = dev->next) {
        XmlVf *vf = NULL;
        guint index;

        if (xml_node_is(dev, "hostdev"))
            index = ++n_hostdev;
        else if (xml_node_is(dev, "interface"))
            index = ++n_interface;
        else
            continue;
        if (!vf_from_device(dev, index, alias_prefix, &vf, error))
            return NULL;
        if (vf)
            g_ptr_array_add(vfs, vf);
    }
    return g_steal_pointer(&vfs);
}

GPtrArray *xml_domain_list_host_pci(const XmlDomain *dom)
{
    g_autoptr(GPtrArray) list = g_ptr_array_new_with_free_func(g_free);
    xmlNode *devices;

    g_return_val_if_fail(dom != NULL, NULL);

    devices = xml_node_child(xmlDocGetRootElement(dom->doc), "devices");
    for (xmlNode *dev = devices ? devices->children : NULL; dev; dev = dev->next) {
        char *addr;

        if (device_host_pci_kind(dev) == XML_VF_KIND_LAST)
            continue;
        addr = vf_source_address(dev, "domain XML", NULL);
        if (addr)
            g_ptr_array_add(list, addr);
    }
    return g_steal_pointer(&list);
}

/* ---- attach XML -------------------------------------------------------------------------- */

/* Is @alias a user alias libvirt takes on hot-plug: "ua-", then letters, digits, '_', '-'? */
static gboolean alias_is_user(const char *alias)
{
    const char *p;

    if (!g_str_has_prefix(alias, XML_USER_ALIAS_PREFIX))
        return FALSE;
    p = alias + strlen(XML_USER_ALIAS_PREFIX);
    if (*p == '\0')
        return FALSE;
    for (; *p; p++) {
        if (!g_ascii_isalnum(*p) && *p != '_' && *p != '-')
            return FALSE;
    }
    return TRUE;
}

/* Sets the alias of device element @dev (see xml_device_set_alias()); checks everything before
 * it changes anything. */
static gboolean device_set_alias(xmlNode *dev, const char *alias, GError **error)
{
    xmlNode *node = xml_node_child(dev, "alias");

    if (!alias_is_user(alias)) {
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID,
                    "alias '%s' is not a user alias libvirt takes on hot-plug ('%s' then "
                    "letters, digits, '_' or '-')",
                    alias, XML_USER_ALIAS_PREFIX);
        return FALSE;
    }
    if (node && xml_node_next(node, "alias")) {
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID,
                    "device XML: <%s> has more than one <alias>", (const char *)dev->name);
        return FALSE;
    }
    if (!node) {
        xmlNode *guest_address = xml_node_child(dev, "address");

        node = xmlNewNode(NULL, BAD_CAST "alias");
        if (!node)
            g_error("hm-xml: out of memory adding an <alias>");
        if (guest_address)
            xmlAddPrevSibling(guest_address, node);
        else
            xmlAddChild(dev, node);
    }
    if (!xmlSetProp(node, BAD_CAST "name", BAD_CAST alias))
        g_error("hm-xml: out of memory setting alias '%s'", alias);
    return TRUE;
}

/* The element of @vf's device XML ("hostdev" or "interface", static), or NULL when its kind is
 * unknown or @new_host_pci does not go with it (a stand-in takes none, a VF needs one). */
static const char *attach_element(const XmlVf *vf, const char *new_host_pci, GError **error)
{
    const char *element;

    switch (vf->kind) {
    case XML_VF_KIND_HOSTDEV:
        element = "hostdev";
        break;
    case XML_VF_KIND_INTERFACE_HOSTDEV:
    case XML_VF_KIND_STANDIN:
        element = "interface";
        break;
    default:
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID, "VF '%s': unknown kind %d", vf->alias,
                    (int)vf->kind);
        return NULL;
    }

    if (vf->kind == XML_VF_KIND_STANDIN && new_host_pci) {
        g_set_error(
            error, XML_ERROR, XML_ERROR_INVALID,
            "VF '%s' is a stand-in NIC: it keeps its backend, so no host PCI address ('%s') can be given",
            vf->alias, new_host_pci);
        return NULL;
    }
    if (vf->kind != XML_VF_KIND_STANDIN && !new_host_pci) {
        g_set_error(
            error, XML_ERROR, XML_ERROR_INVALID,
            "VF '%s' is a %s: the host PCI address of the VF on the destination is required",
            vf->alias, xml_vf_kind_to_string(vf->kind));
        return NULL;
    }
    return element;
}

/* Points the <source><address> of @vf's device element @dev at host PCI address @new_host_pci. */
static gboolean attach_set_source(xmlNode *dev, const XmlVf *vf, const char *new_host_pci,
                                  GError **error)
{
    g_autoptr(GError) local_error = NULL;
    HmPciAddress pci;
    xmlNode *addr = xml_node_child(xml_node_child(dev, "source"), "address");
    char value[16];

    if (!hm_pci_address_parse(new_host_pci, &pci, &local_error)) {
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID, "VF '%s': %s", vf->alias,
                    local_error->message);
        return FALSE;
    }
    if (!addr) {
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID,
                    "VF '%s': its device XML has no <source><address>", vf->alias);
        return FALSE;
    }
    g_snprintf(value, sizeof(value), "0x%04x", pci.domain);
    xmlSetProp(addr, BAD_CAST "domain", BAD_CAST value);
    g_snprintf(value, sizeof(value), "0x%02x", pci.bus);
    xmlSetProp(addr, BAD_CAST "bus", BAD_CAST value);
    g_snprintf(value, sizeof(value), "0x%02x", pci.slot);
    xmlSetProp(addr, BAD_CAST "slot", BAD_CAST value);
    g_snprintf(value, sizeof(value), "0x%x", pci.function);
    xmlSetProp(addr, BAD_CAST "function", BAD_CAST value);
    return TRUE;
}

char *xml_vf_format_attach(const XmlVf *vf, const char *new_host_pci, GError **error)
{
    g_autoptr(xmlDoc) doc = NULL;
    g_autoptr(GError) local_error = NULL;
    g_autofree char *user_alias = NULL;
    xmlNode *dev;
    const char *element;

    g_return_val_if_fail(vf != NULL, NULL);
    g_return_val_if_fail(vf->device_xml != NULL, NULL);
    g_return_val_if_fail(vf->alias != NULL, NULL);

    element = attach_element(vf, new_host_pci, error);
    if (!element)
        return NULL;
    doc = xml_doc_parse("VF device XML", vf->device_xml, strlen(vf->device_xml),
                        XML_DOMAIN_MAX_BYTES, &local_error);
    if (!doc) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local_error), "VF '%s': ", vf->alias);
        return NULL;
    }
    dev = xmlDocGetRootElement(doc);
    if (!xml_node_is(dev, element)) {
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID,
                    "VF '%s' is a %s but its device XML is <%s>, not <%s>", vf->alias,
                    xml_vf_kind_to_string(vf->kind), dev ? (const char *)dev->name : "", element);
        return NULL;
    }
    if (new_host_pci && !attach_set_source(dev, vf, new_host_pci, error))
        return NULL;

    /* A user alias stays; libvirt's own ("hostdev0") becomes one ("ua-hostdev0"). */
    user_alias = xml_vf_user_alias(vf->alias);
    if (!device_set_alias(dev, user_alias, &local_error)) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local_error), "VF '%s': ", vf->alias);
        return NULL;
    }
    return xml_node_dump(dev);
}

char *xml_vf_user_alias(const char *alias)
{
    g_return_val_if_fail(alias != NULL, NULL);

    if (g_str_has_prefix(alias, XML_USER_ALIAS_PREFIX))
        return g_strdup(alias);
    return g_strconcat(XML_USER_ALIAS_PREFIX, alias, NULL);
}

char *xml_device_set_alias(const char *device_xml, const char *alias, GError **error)
{
    g_autoptr(xmlDoc) doc = NULL;
    xmlNode *dev;

    g_return_val_if_fail(device_xml != NULL, NULL);
    g_return_val_if_fail(alias != NULL, NULL);

    doc = xml_doc_parse("device XML", device_xml,
                        strnlen(device_xml, (gsize)XML_DOMAIN_MAX_BYTES + 1),
                        XML_DOMAIN_MAX_BYTES, error);
    if (!doc)
        return NULL;
    dev = xmlDocGetRootElement(doc);
    if (!xml_node_is(dev, "hostdev") && !xml_node_is(dev, "interface")) {
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID,
                    "device XML: the root element is <%s>, not <hostdev> or <interface>",
                    dev ? (const char *)dev->name : "");
        return NULL;
    }
    if (!device_set_alias(dev, alias, error))
        return NULL;
    return xml_node_dump(dev);
}
