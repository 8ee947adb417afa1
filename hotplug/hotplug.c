/* hm-hotplug: SR-IOV VFs on a host. Node device XML is read through hm-xml. */
#define G_LOG_DOMAIN "hm-hotplug"

#include "hotplug/hotplug.h"

void hotplug_vf_free(HotplugVf *vf)
{
    if (!vf)
        return;
    g_free(vf->pci_address);
    g_free(vf->pf_address);
    g_free(vf->driver);
    g_free(vf);
}

HotplugVf *hotplug_vf_from_nodedev_xml(const char *xml, GError **error)
{
    g_autoptr(XmlNodeDev) nodedev = NULL;
    g_autoptr(GError) local_error = NULL;
    g_autoptr(HotplugVf) vf = NULL;

    g_return_val_if_fail(xml != NULL, NULL);

    nodedev = xml_nodedev_parse(xml, &local_error);
    if (!nodedev) {
        /* One error domain per library: hm-xml's message, hm-hotplug's domain. */
        g_set_error_literal(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, local_error->message);
        return NULL;
    }
    if (!nodedev->pci_address || !nodedev->pf_address) {
        g_debug("Node device '%s' is not a PCI VF", nodedev->name);
        return NULL;
    }

    vf = g_new0(HotplugVf, 1);
    vf->pci_address = g_steal_pointer(&nodedev->pci_address);
    vf->pf_address = g_steal_pointer(&nodedev->pf_address);
    vf->vendor_id = nodedev->vendor_id;
    vf->product_id = nodedev->product_id;
    vf->driver = g_steal_pointer(&nodedev->driver);
    return g_steal_pointer(&vf);
}

/* @addr in the kernel's spelling ("0000:3b:02.1"), so that "3B:02.1" and "0000:3b:02.1"
 * compare equal; an address that does not parse is compared as written. Owned. */
static char *pci_address_canonical(const char *addr)
{
    char *normal = hm_pci_address_normalize(addr, NULL);

    return normal ? normal : g_strdup(addr);
}

char *hotplug_vf_choose(const HotplugVf *like, GPtrArray *candidates, GPtrArray *in_use,
                        GError **error)
{
    g_autoptr(GHashTable) used = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    guint n_same = 0;

    g_return_val_if_fail(like != NULL, NULL);
    g_return_val_if_fail(candidates != NULL, NULL);

    for (guint i = 0; in_use && i < in_use->len; i++) {
        const char *addr = g_ptr_array_index(in_use, i);

        if (addr)
            g_hash_table_add(used, pci_address_canonical(addr));
    }

    for (guint i = 0; i < candidates->len; i++) {
        const HotplugVf *vf = g_ptr_array_index(candidates, i);
        g_autofree char *addr = NULL;

        if (!vf || !vf->pci_address || vf->vendor_id != like->vendor_id ||
            vf->product_id != like->product_id)
            continue;
        n_same++;
        addr = pci_address_canonical(vf->pci_address);
        if (g_hash_table_contains(used, addr))
            continue;
        g_debug("Chose VF '%s' (like '%s')", vf->pci_address,
                like->pci_address ? like->pci_address : "?");
        return g_strdup(vf->pci_address);
    }

    if (n_same == 0)
        g_set_error(
            error, HOTPLUG_ERROR, HOTPLUG_ERROR_NO_VF,
            "No VF like '%s' (vendor 0x%04x, product 0x%04x): none of the %u candidates has that vendor and product",
            like->pci_address ? like->pci_address : "?", like->vendor_id, like->product_id,
            candidates->len);
    else
        g_set_error(
            error, HOTPLUG_ERROR, HOTPLUG_ERROR_NO_VF,
            "No free VF like '%s' (vendor 0x%04x, product 0x%04x): all %u that match are in use",
            like->pci_address ? like->pci_address : "?", like->vendor_id, like->product_id, n_same);
    return NULL;
}
