/* hm-hotplug internals: the libpci adapter. pci-libpci.c is the only file that includes
 * <pci/pci.h>; everything else calls these functions. For hm-hotplug and its tests only.
 *
 * libpci's default error handler calls exit(). The adapter installs its own before any other
 * libpci call and runs every libpci entry under setjmp(): a libpci error comes back as a
 * GError (HOTPLUG_ERROR), never as an exit. libpci warnings go to g_debug(). */
#pragma once

#include <glib.h>

#include "hotplug/hotplug.h"

G_BEGIN_DECLS

/* The PCI Express SR-IOV extended capability (ID 0x0010), as found in config space. */
typedef struct {
    guint vendor_id, device_id; /* from config space (a VF reads 0xffff there) */
    guint cap_offset;           /* where the capability starts, 0x100..0xfc0 */
    guint32 capabilities;       /* SR-IOV Capabilities register */
    guint control;              /* SR-IOV Control: bit 0 VF Enable, bit 4 ARI Capable Hierarchy */
    guint initial_vfs, total_vfs, num_vfs;
    guint function_link;        /* Function Dependency Link */
    guint vf_offset, vf_stride; /* First VF Offset, VF Stride (routing ID units) */
    guint vf_device_id;         /* VF Device ID */
} HotplugPciSriov;

#define HOTPLUG_PCI_SRIOV_CTRL_VFE 0x0001u
#define HOTPLUG_PCI_CONFIG_SIZE 4096

typedef enum {
    HOTPLUG_PCI_SRIOV_FOUND,  /* the capability is there; the HotplugPciSriov is filled */
    HOTPLUG_PCI_SRIOV_ABSENT, /* config space is readable and has no SR-IOV capability */
    HOTPLUG_PCI_SRIOV_SHORT,  /* less than the 4096 bytes of extended config space could be read
                               * (not root: sysfs shows 64 bytes; an `lspci -xxx` dump) */
} HotplugPciSriovStatus;

/* One libpci access handle on the sysfs tree @sysfs_root (config space read from
 * SYSFS/bus/pci/devices/ADDR/config, libpci's "sysfs.path" = SYSFS/bus/pci) that also looks
 * names up. Not thread-safe: one per thread. */
typedef struct HotplugPci HotplugPci;

/* Returns a new handle (owned) or NULL with HOTPLUG_ERROR_FAILED when libpci refuses. */
HotplugPci *hotplug_pci_open(const char *sysfs_root, GError **error);
void hotplug_pci_close(HotplugPci *pci);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotplugPci, hotplug_pci_close)

/* Vendor and device names from libpci's ID database (never udev's hwdb, never the network,
 * no ~/.pciids-cache). *ret_vendor_name and *ret_device_name (owned) are NULL for an ID the
 * database does not know. Fails (HOTPLUG_ERROR_FAILED, outputs untouched) when libpci does,
 * e.g. on a malformed pci.ids; a missing pci.ids just knows no names. Either output may be
 * NULL. */
gboolean hotplug_pci_lookup_names(HotplugPci *pci, guint vendor_id, guint device_id,
                                  char **ret_vendor_name, char **ret_device_name, GError **error);

/* Reads the SR-IOV capability of the device at @address (normalized "0000:3b:00.0") from its
 * sysfs config file through libpci. Sets *ret_status, and *ret_sriov when FOUND. Fails with
 * HOTPLUG_ERROR_SYSFS (naming the config file) when it is missing or not a regular file of
 * at most 4096 bytes, when the capability is truncated, or when libpci fails. */
gboolean hotplug_pci_read_sriov(HotplugPci *pci, const char *address,
                                HotplugPciSriovStatus *ret_status, HotplugPciSriov *ret_sriov,
                                GError **error);

/* The same from an `lspci -xxxx` dump file, through libpci's dump access method
 * (PCI_ACCESS_DUMP, "dump.name"). @address selects the device ("3b:00.0" or with domain);
 * NULL takes the first device of the dump. Fails with HOTPLUG_ERROR_NOT_FOUND when the dump
 * has no such device, HOTPLUG_ERROR_INVALID when libpci cannot read the dump (the message is
 * libpci's, with the file name). */
gboolean hotplug_pci_read_sriov_dump(const char *dump_path, const char *address,
                                     HotplugPciSriovStatus *ret_status, HotplugPciSriov *ret_sriov,
                                     GError **error);

/* The pci.ids file handles opened from now on use (NULL: libpci's default); behind
 * hotplug_sysfs_set_pci_ids(). Not thread-safe; call before any discovery. */
void hotplug_pci_set_ids_path(const char *path);

G_END_DECLS
