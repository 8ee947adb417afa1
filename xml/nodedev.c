/* hm-xml: libvirt node device XML (virNodeDeviceGetXMLDesc), the PCI parts hotmig uses. */
#define G_LOG_DOMAIN "hm-xml"

#include "xml/xml.h"
#include "xml/xml-priv.h"

#include <string.h>

void xml_nodedev_free(XmlNodeDev *nodedev)
{
    if (!nodedev)
        return;
    g_free(nodedev->name);
    g_free(nodedev->parent);
    g_free(nodedev->driver);
    g_free(nodedev->pci_address);
    g_free(nodedev->pf_address);
    if (nodedev->vf_addresses)
        g_ptr_array_unref(nodedev->vf_addresses);
    g_free(nodedev);
}

/* The child capability of @node whose type is @type, or NULL. Borrowed. */
static xmlNode *capability_find(const xmlNode *node, const char *type)
{
    for (xmlNode *cap = xml_node_child(node, "capability"); cap;
         cap = xml_node_next(cap, "capability")) {
        g_autofree char *cap_type = xml_node_prop(cap, "type");

        if (cap_type && g_str_equal(cap_type, type))
            return cap;
    }
    return NULL;
}

/* A decimal element of <capability type='pci'>, as libvirt formats it ("<bus>59</bus>"). */
static gboolean pci_decimal_field(const xmlNode *cap, const char *field, guint max,
                                  const char *what, guint *ret, GError **error)
{
    xmlNode *node = xml_node_child(cap, field);
    g_autofree char *text = NULL;

    if (!node) {
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID, "%s: <capability type='pci'> has no <%s>",
                    what, field);
        return FALSE;
    }
    text = xml_node_text(node);
    if (!xml_uint_parse_base(text, 10, max, ret)) {
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID,
                    "%s: <capability type='pci'> has a bad <%s>%s</%s> (decimal, at most %u)", what,
                    field, text, field, max);
        return FALSE;
    }
    return TRUE;
}

/* <vendor id='0x15b3'> or <product id='0x101e'>: hex, "0x" optional. */
static gboolean pci_id_field(const xmlNode *cap, const char *field, const char *what, guint *ret,
                             GError **error)
{
    xmlNode *node = xml_node_child(cap, field);
    g_autofree char *id = node ? xml_node_prop(node, "id") : NULL;

    if (!id) {
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID,
                    "%s: <capability type='pci'> has no <%s id=...>", what, field);
        return FALSE;
    }
    if (!xml_uint_parse_base(id, 16, 0xffff, ret)) {
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID,
                    "%s: <capability type='pci'> has a bad <%s id='%s'> (hex, at most 0xffff)",
                    what, field, id);
        return FALSE;
    }
    return TRUE;
}

static gboolean nodedev_parse_pci(XmlNodeDev *nodedev, const xmlNode *cap, const char *what,
                                  GError **error)
{
    HmPciAddress pci;
    xmlNode *pf;
    xmlNode *vfs;

    if (!pci_decimal_field(cap, "domain", HM_PCI_DOMAIN_MAX, what, &pci.domain, error) ||
        !pci_decimal_field(cap, "bus", HM_PCI_BUS_MAX, what, &pci.bus, error) ||
        !pci_decimal_field(cap, "slot", HM_PCI_SLOT_MAX, what, &pci.slot, error) ||
        !pci_decimal_field(cap, "function", HM_PCI_FUNCTION_MAX, what, &pci.function, error) ||
        !pci_id_field(cap, "vendor", what, &nodedev->vendor_id, error) ||
        !pci_id_field(cap, "product", what, &nodedev->product_id, error))
        return FALSE;
    nodedev->pci_address = hm_pci_address_format(&pci);

    pf = capability_find(cap, "phys_function");
    if (pf) {
        xmlNode *addr = xml_node_child(pf, "address");

        if (!addr) {
            g_set_error(error, XML_ERROR, XML_ERROR_INVALID,
                        "%s: <capability type='phys_function'> has no <address>", what);
            return FALSE;
        }
        nodedev->pf_address = xml_pci_address_from_node(
            addr, what, "<capability type='phys_function'><address>", error);
        if (!nodedev->pf_address)
            return FALSE;
    }

    vfs = capability_find(cap, "virt_functions");
    for (xmlNode *addr = vfs ? xml_node_child(vfs, "address") : NULL; addr;
         addr = xml_node_next(addr, "address")) {
        char *vf = xml_pci_address_from_node(addr, what,
                                             "<capability type='virt_functions'><address>", error);

        if (!vf)
            return FALSE;
        g_ptr_array_add(nodedev->vf_addresses, vf);
    }
    return TRUE;
}

XmlNodeDev *xml_nodedev_parse(const char *xml, GError **error)
{
    g_autoptr(XmlNodeDev) nodedev = NULL;
    g_autoptr(xmlDoc) doc = NULL;
    g_autofree char *what = NULL;
    xmlNode *root;
    xmlNode *node;
    xmlNode *cap;

    g_return_val_if_fail(xml != NULL, NULL);

    doc = xml_doc_parse("node device XML", xml, strnlen(xml, (gsize)XML_NODEDEV_MAX_BYTES + 1),
                        XML_NODEDEV_MAX_BYTES, error);
    if (!doc)
        return NULL;
    root = xmlDocGetRootElement(doc);
    if (!xml_node_is(root, "device")) {
        g_set_error(error, XML_ERROR, XML_ERROR_PARSE,
                    "node device XML: the root element is <%s>, not <device>",
                    root ? (const char *)root->name : "");
        return NULL;
    }

    nodedev = g_new0(XmlNodeDev, 1);
    nodedev->vf_addresses = g_ptr_array_new_with_free_func(g_free);
    node = xml_node_child(root, "name");
    if (node)
        nodedev->name = xml_node_text(node);
    if (!nodedev->name || !*nodedev->name) {
        g_set_error(error, XML_ERROR, XML_ERROR_INVALID, "node device XML: <device> has no <name>");
        return NULL;
    }
    what = g_strdup_printf("node device XML '%s'", nodedev->name);

    node = xml_node_child(root, "parent");
    if (node)
        nodedev->parent = xml_node_text(node);
    node = xml_node_child(xml_node_child(root, "driver"), "name");
    if (node) {
        nodedev->driver = xml_node_text(node);
        if (!*nodedev->driver)
            g_clear_pointer(&nodedev->driver, g_free);
    }

    cap = capability_find(root, "pci");
    if (cap && !nodedev_parse_pci(nodedev, cap, what, error))
        return NULL;
    return g_steal_pointer(&nodedev);
}
