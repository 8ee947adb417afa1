/* hm-hotplug: SR-IOV VFs on a host: which exist, which are free, which one a migrating domain
 * gets on the destination. Depends on hm-common and hm-xml. */
#pragma once

#include <glib.h>

#include "common/common.h"
#include "xml/xml.h"

G_BEGIN_DECLS

#define HOTPLUG_ERROR (hotplug_error_quark())
GQuark hotplug_error_quark(void);

typedef enum {
    HOTPLUG_ERROR_FAILED,
    HOTPLUG_ERROR_INVALID,   /* bad input, e.g. a node device XML that does not parse */
    HOTPLUG_ERROR_NO_VF,     /* no free VF fits */
    HOTPLUG_ERROR_BUSY,      /* the VF is leased or held by someone else */
    HOTPLUG_ERROR_STALE,     /* what was read no longer holds (the host changed under us) */
    HOTPLUG_ERROR_NOT_FOUND, /* no such device (e.g. an address absent from sysfs) */
    HOTPLUG_ERROR_SYSFS,     /* sysfs content that is missing, malformed or inconsistent */
    HOTPLUG_ERROR_LAST,
} HotplugError;

/* A PCI virtual function as a host's node device list describes it. */
typedef struct {
    char *pci_address; /* "0000:3b:02.1" */
    char *pf_address;  /* the physical function's PCI address */
    guint vendor_id;   /* 0x15b3 for Mellanox */
    guint product_id;  /* 0x101e for ConnectX-6 Dx/7 VFs */
    char *driver;      /* bound driver ("vfio-pci", "mlx5_core") or NULL */
} HotplugVf;

void hotplug_vf_free(HotplugVf *vf);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotplugVf, hotplug_vf_free)

/* Parses one libvirt node device XML (virNodeDeviceGetXMLDesc). Returns a new HotplugVf when
 * the device is a PCI VF (has <capability type='phys_function'>), NULL without error when it is
 * some other device (a PF, a non-PCI device), NULL with HOTPLUG_ERROR_INVALID when the XML is
 * bad (pass a non-NULL @error to tell the two apart). The XML is read with hm-xml
 * (xml_nodedev_parse), so hm-hotplug does not talk to libxml2 itself. */
HotplugVf *hotplug_vf_from_nodedev_xml(const char *xml, GError **error);

/* Chooses the VF a migrating domain gets on the destination: the first of @candidates
 * (HotplugVf) with the same vendor and product as @like whose address is not in @in_use
 * (strings, PCI addresses of VFs assigned to domains there; NULL for none). Addresses compare
 * by value ("3b:02.1" equals "0000:3B:02.1"). Returns a new string (owned, the candidate's
 * pci_address) or NULL with HOTPLUG_ERROR_NO_VF naming what was looked for. */
char *hotplug_vf_choose(const HotplugVf *like, GPtrArray *candidates, GPtrArray *in_use,
                        GError **error);

/* ---- SR-IOV discovery (sysfs, libpci) ---- */

/* Every entry point takes @sysfs_root: "/sys" on a host, a fixture tree in tests. Files are
 * read with a size limit; bad content (missing files, garbage or out-of-range numbers,
 * dangling or looping links, a virtfnN whose physfn is another device, sysfs disagreeing with
 * the SR-IOV capability in config space) fails with HOTPLUG_ERROR_SYSFS naming the path.
 * Names come from libpci's ID database (pci.ids); config space is read through libpci.
 * See docs/sriov.md. */

typedef struct HotplugPciFunction HotplugPciFunction;
struct HotplugPciFunction {
    char *address;                   /* "0000:3b:00.2", normalized lower case with domain */
    char *pf_address;                /* the PF's address for a VF (physfn link); NULL for a PF */
    guint vf_index;                  /* N of the PF's virtfnN link (VFs only) */
    guint vendor_id, device_id;      /* from sysfs vendor/device */
    char *vendor_name, *device_name; /* libpci's ID database names, NULL when unknown */
    char *driver;                    /* bound driver ("mlx5_core", "vfio-pci") or NULL */
    int iommu_group;                 /* -1 when none */
    int numa_node;                   /* -1 when unknown */
    /* first net interface in net/, or NULL (a vfio-bound VF has none) */
    char *netdev;
    /* ARPHRD type of netdev (net/X/type: 32 InfiniBand, 1 Ethernet), 0 without netdev */
    guint link_type;
    guint total_vfs, num_vfs; /* PF: sriov_totalvfs, sriov_numvfs; 0 for a VF */
    /* PF: its VFs (HotplugPciFunction, owned), by vf_index; empty for a VF; never NULL */
    GPtrArray *vfs;
    char *assigned_to; /* domain holding it (see hotplug_sysfs_mark_assigned), or NULL */
    /* PF only, from the SR-IOV capability in config space (0 when config space could not be
     * read, e.g. not as root: the kernel shows the first 64 bytes only): */
    guint vf_device_id;      /* VF Device ID; from sysfs sriov_vf_device when unreadable */
    guint vf_offset;         /* First VF Offset */
    guint vf_stride;         /* VF Stride */
    gboolean config_checked; /* the SR-IOV capability was read and agreed with sysfs */
};

void hotplug_pci_function_free(HotplugPciFunction *fn);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotplugPciFunction, hotplug_pci_function_free)

/* Every SR-IOV capable PF (has sriov_totalvfs) under SYSFS/bus/pci/devices, by address, each
 * with its VFs. Returns a new GPtrArray of HotplugPciFunction (owned, with free func; empty
 * when the host has none) or NULL with HOTPLUG_ERROR_SYSFS. */
GPtrArray *hotplug_sysfs_list_pfs(const char *sysfs_root, GError **error);

/* One PF (with its VFs) or one VF, by address ("0000:3b:00.2"; "3b:00.2" and upper case are
 * accepted). Returns a new HotplugPciFunction (owned), or NULL with HOTPLUG_ERROR_NOT_FOUND
 * when absent, HOTPLUG_ERROR_INVALID when @address does not parse or the device is neither a
 * PF nor a VF, HOTPLUG_ERROR_SYSFS for bad sysfs content. A VF is checked against its PF (so
 * vf_index is known). */
HotplugPciFunction *hotplug_sysfs_read(const char *sysfs_root, const char *address, GError **error);

/* The pci.ids file the names come from from now on (NULL: libpci's default, usually
 * /usr/share/misc/pci.ids). Process-wide; call before any discovery runs. */
void hotplug_sysfs_set_pci_ids(const char *path);

/* Sets assigned_to on every function (PFs and their VFs) whose address is a key of
 * @pci_to_domain (normalized address -> domain name, borrowed; copied); every other function
 * gets NULL, so a second call with a newer map leaves nothing stale. The daemon fills the map
 * from libvirt domain XML. */
void hotplug_sysfs_mark_assigned(GPtrArray *pfs, GHashTable *pci_to_domain);

G_END_DECLS
