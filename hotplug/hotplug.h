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
    HOTPLUG_ERROR_INVALID, /* bad input, e.g. a node device XML that does not parse */
    HOTPLUG_ERROR_NO_VF,   /* no free VF fits */
    HOTPLUG_ERROR_BUSY,
    HOTPLUG_ERROR_STALE,
    HOTPLUG_ERROR_NOT_FOUND,
    HOTPLUG_ERROR_SYSFS,
    HOTPLUG_ERROR_NETLINK,
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

/* ---- InfiniBand identity ---- */

/* How hotmig talks to the kernel's rtnetlink (the libnl adapter, or a fake in tests). One
 * instance is not thread-safe; each thread opens its own. It reaches the host it runs on only:
 * the VF GUIDs of a destination host are set by code running there. */
typedef struct HotplugNetlink HotplugNetlink;

/* Opens a NETLINK_ROUTE socket through libnl-route-3 (close-on-exec). Owned result, NULL with
 * HOTPLUG_ERROR_NETLINK when the socket cannot be opened. */
HotplugNetlink *hotplug_netlink_new(GError **error);

void hotplug_netlink_free(HotplugNetlink *nl);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotplugNetlink, hotplug_netlink_free)

/* Wraps @inner (taking ownership, also on failure): calls pass through, except those matching
 * @spec, which fail with HOTPLUG_ERROR_NETLINK "injected fault: ...". @spec is the
 * HOTMIG_FAULT_INJECT syntax, comma-separated OP[@LABEL][#N]; this wrapper acts on the rules
 * whose OP is netlink_link_info or netlink_vf_set_guid and ignores rules without the
 * "netlink_" prefix (they belong to other adapters), so one spec can serve all of them. LABEL
 * is "source" or "destination" and matches @label (the host this instance runs on); N is the
 * 1-based count of the matching call to fail (default: every one). NULL with
 * HOTPLUG_ERROR_INVALID when a netlink_ rule does not parse. */
HotplugNetlink *hotplug_netlink_fault_wrap(HotplugNetlink *inner, const char *label,
                                           const char *spec, GError **error);

/* Gives VF @vf_index of PF net device @pf_netdev the node and port GUIDs. When the PF is not
 * InfiniBand (ARPHRD type != 32) nothing is changed, TRUE is returned and *ret_note (owned) says
 * why it was skipped; otherwise *ret_note is NULL. Errors name the PF, VF and GUIDs.
 * Bad input (an invalid interface name, a zero GUID: HOTPLUG_ERROR_INVALID; no such net device:
 * HOTPLUG_ERROR_NOT_FOUND; @vf_index not below the PF's VF count: HOTPLUG_ERROR_NO_VF) fails
 * before anything is changed. The two GUIDs take one netlink request each (the kernel applies
 * one GUID per request), node GUID first: when the port GUID fails (HOTPLUG_ERROR_NETLINK), the
 * node GUID may already be set; applying again sets both. The VF's driver reads the GUIDs when
 * it probes the VF: apply before the VF is attached to the domain. */
gboolean hotplug_ib_identity_apply(HotplugNetlink *nl, const char *pf_netdev, guint vf_index,
                                   guint64 node_guid, guint64 port_guid, char **ret_note,
                                   GError **error);

/* GUID text <-> number: accepts "0x0002c90300a1b2c3", "0002:c903:00a1:b2c3" (verbs/sysfs form)
 * and "00:02:c9:03:00:a1:b2:c3" (ip link form); formats in the "0002:c903:00a1:b2c3" form.
 * Hex digits in either case; nothing else (no white space). The number reads the GUID's bytes
 * most significant first, as `ip link` and the kernel's IFLA_VF_IB_*_GUID do. Parse fails with
 * HOTPLUG_ERROR_INVALID quoting (a bounded, escaped part of) @text; *ret_guid is untouched then.
 * Format returns an owned string. */
gboolean hotplug_guid_parse(const char *text, guint64 *ret_guid, GError **error);
char *hotplug_guid_format(guint64 guid);

/* ---- vfio ---- */
/* A PCI function is handed to a guest through vfio-pci. These write sysfs under @sysfs_root
 * ("/sys", or a fixture tree in tests); addresses are "DDDD:BB:SS.F" (or "BB:SS.F").
 *
 * The driver bound to @address now: *ret_driver gets its name ("vfio-pci", "mlx5_core"; owned)
 * or NULL when none is bound. Fails with HOTPLUG_ERROR_INVALID when the address does not parse,
 * HOTPLUG_ERROR_NOT_FOUND when the function does not exist. */
gboolean hotplug_vfio_get_driver(const char *sysfs_root, const char *address, char **ret_driver,
                                 GError **error);

/* Makes sure vfio-pci drives @address: nothing when it does already (*ret_changed FALSE);
 * otherwise driver_override = vfio-pci, unbind from the current driver, drivers_probe, then
 * waits at most @timeout_ms until the driver link says vfio-pci (*ret_changed TRUE).
 * *ret_previous_driver gets the driver before the call (owned, NULL when none); both outputs
 * may be NULL. Refuses, writing nothing, when vfio-pci is not loaded or the function has no
 * IOMMU group. When a step fails, driver_override is cleared and the previous driver probed
 * again (best effort; the message says what could not be undone). HOTPLUG_ERROR_INVALID or
 * _NOT_FOUND as hotplug_vfio_get_driver(), HOTPLUG_ERROR_FAILED otherwise. */
gboolean hotplug_vfio_bind(const char *sysfs_root, const char *address, guint timeout_ms,
                           gboolean *ret_changed, char **ret_previous_driver, GError **error);

G_END_DECLS
