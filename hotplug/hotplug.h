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
    HOTPLUG_ERROR_BUSY,      /* the VF is leased or assigned to someone else */
    HOTPLUG_ERROR_STALE,     /* a lease id no longer current; what was read no longer holds */
    HOTPLUG_ERROR_NOT_FOUND, /* no such device (e.g. an address absent from sysfs) */
    HOTPLUG_ERROR_SYSFS,     /* sysfs content that is missing, malformed or inconsistent */
    HOTPLUG_ERROR_NETLINK,   /* the kernel's rtnetlink refused or failed */
    HOTPLUG_ERROR_UNKNOWN,   /* the host does not know what was asked (e.g. a VF's GUIDs) */
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

/* The adapter for VF stand-ins (the emulated lab's, [pool] standins): no kernel, directory @dir
 * stands in for their PF driver (docs/ib-identity.md "Stand-ins"). A stand-in NETDEV is an
 * InfiniBand PF with one VF (index 0) when @dir/NETDEV exists, an Ethernet PF with none
 * otherwise; its GUIDs are the files @dir/NETDEV/node and port. Owned result. */
HotplugNetlink *hotplug_netlink_standin_new(const char *dir);

void hotplug_netlink_free(HotplugNetlink *nl);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotplugNetlink, hotplug_netlink_free)

/* Wraps @inner (taking ownership, also on failure): calls pass through, except those matching
 * @spec, which fail with HOTPLUG_ERROR_NETLINK "injected fault: ...". @spec is the
 * HOTMIG_FAULT_INJECT syntax, comma-separated OP[@LABEL][#N]; this wrapper acts on the rules
 * whose OP is netlink_link_info, netlink_vf_set_guid or netlink_vf_get_guids and ignores rules without the
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

/* The node and port GUIDs VF @vf_index of PF net device @pf_netdev has now, as the host's
 * kernel reports them: the identity a migration carries away from this host (never the
 * guest's word for it, docs/security.md). HOTPLUG_ERROR_INVALID for an invalid interface name;
 * HOTPLUG_ERROR_NOT_FOUND: no such net device; HOTPLUG_ERROR_NO_VF: @vf_index not below the
 * PF's VF count; HOTPLUG_ERROR_UNKNOWN: the PF is not InfiniBand, or its driver does not report
 * VF GUIDs (no ndo_get_vf_guid), or reports zero; HOTPLUG_ERROR_NETLINK otherwise. The outputs
 * are untouched on failure. */
gboolean hotplug_ib_identity_read(HotplugNetlink *nl, const char *pf_netdev, guint vf_index,
                                  guint64 *ret_node_guid, guint64 *ret_port_guid, GError **error);

/* GUID text <-> number: accepts "0x0002c90300a1b2c3", "0002:c903:00a1:b2c3" (verbs/sysfs form)
 * and "00:02:c9:03:00:a1:b2:c3" (ip link form); formats in the "0002:c903:00a1:b2c3" form.
 * Hex digits in either case; nothing else (no white space). The number reads the GUID's bytes
 * most significant first, as `ip link` and the kernel's IFLA_VF_IB_*_GUID do. Parse fails with
 * HOTPLUG_ERROR_INVALID quoting (a bounded, escaped part of) @text; *ret_guid is untouched then.
 * Format returns an owned string. */
gboolean hotplug_guid_parse(const char *text, guint64 *ret_guid, GError **error);
char *hotplug_guid_format(guint64 guid);

/* ---- VF leases ---------------------------------------------------------------------------- */

/* A lease reserves a VF of this host for a migration before memory moves; it is confirmed
 * ("assigned") once the domain holds the VF, released on rollback, and expires when nobody
 * confirms it. Leases live in one directory (hotmigd's: [hotmigd] run-dir/leases, by default
 * /run/hotmig/leases: common/config.c), shared by every process of the host; see
 * docs/leases.md for the files and the guarantees.
 * Every call below also fails with HOTPLUG_ERROR_INVALID for a bad VF id, and with
 * HOTPLUG_ERROR_FAILED naming the file when a file cannot be read or written or its lock is
 * not free in time (the record is then unchanged). A damaged record counts as FREE. */

#define HOTPLUG_LEASE_HOLDER_MAX 256          /* bytes of UTF-8, no control characters */
#define HOTPLUG_LEASE_REASON_MAX 1024         /* idem */
#define HOTPLUG_LEASE_DOMAIN_MAX 256          /* idem */
#define HOTPLUG_LEASE_TTL_MAX (7 * 24 * 3600) /* seconds */
#define HOTPLUG_LEASE_LOCK_TIMEOUT_MS_DEFAULT 10000

typedef enum {
    HOTPLUG_LEASE_FREE,     /* no lease (or an expired one) */
    HOTPLUG_LEASE_LEASED,   /* reserved, not yet confirmed; expires */
    HOTPLUG_LEASE_ASSIGNED, /* confirmed: a domain holds the VF; no expiry */
    HOTPLUG_LEASE_STATE_LAST,
} HotplugLeaseState;
HM_ENUM_DECL(hotplug_lease_state, HotplugLeaseState)
/* The states' words, the one table of both lease states and hotmigd's VF states. */
#define HOTPLUG_LEASE_STATE_WORDS "free", "leased", "assigned"

typedef struct {
    char *vf; /* VF id: a PCI address "0000:3b:00.2" or a stand-in net device name "hmlab0vf1" */
    HotplugLeaseState state;
    char *id;       /* lease id (random, 32 hex chars), NULL when free */
    char *holder;   /* who asked, e.g. "migrate-vm pid 1234 on hostA"; NULL when free */
    char *reason;   /* why, e.g. "migration of vm7 from hostA"; NULL when free */
    char *domain;   /* the domain it is for; NULL when free */
    gint64 created; /* unix seconds (g_get_real_time based); 0 when free */
    gint64 expires; /* unix seconds, shown; 0 when assigned or free */
    char *boot_id;  /* LEASED: the boot it was taken in; NULL for an older record */
    gint64 expires_boot; /* LEASED: the expiry that counts, in CLOCK_BOOTTIME seconds */
    /* The InfiniBand identity hotmigd gave the VF, kept in every state until cleared: the VF
     * carries it even once free (hotplug_lease_set_identity(), _clear_identity()). */
    guint64 node_guid;
    guint64 port_guid;
    char *identity_of; /* the domain whose identity it is; NULL: none recorded */
    char *owner; /* who may act on the lease (hotmigd: the client certificate's identity);
                  * NULL: whoever knows its id */
} HotplugLease;

void hotplug_lease_free(HotplugLease *lease);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotplugLease, hotplug_lease_free)

/* The leases of one host, kept in a directory. A store may be shared by the threads of a
 * process; any number of processes may open the same directory. */
typedef struct HotplugLeaseStore HotplugLeaseStore;

/* Opens (creates, mode 0700) the store directory @dir. A directory this process cannot write
 * opens (get and list work); the calls that write then fail naming the file. Owned result. */
HotplugLeaseStore *hotplug_lease_store_open(const char *dir, GError **error);
void hotplug_lease_store_free(HotplugLeaseStore *store);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotplugLeaseStore, hotplug_lease_store_free)

/* How long a call waits for another process's read-modify-write of the same VF (default
 * HOTPLUG_LEASE_LOCK_TIMEOUT_MS_DEFAULT); when it expires the call fails with
 * HOTPLUG_ERROR_FAILED naming the lock file. */
void hotplug_lease_store_set_lock_timeout(HotplugLeaseStore *store, guint timeout_ms);

/* VF ids become file names. Returns the id in canonical form (owned): a PCI address normalized
 * to "0000:3b:00.2", or a network device name (1-15 printable ASCII bytes, no '/', ':' or
 * space, not "." or ".."); HOTPLUG_ERROR_INVALID naming @vf otherwise. Every call below
 * accepts any spelling this accepts and reports the canonical one. */
char *hotplug_lease_vf_canonical(const char *vf, GError **error);

/* Takes a lease on @vf for @ttl_s seconds (1..HOTPLUG_LEASE_TTL_MAX). HOTPLUG_ERROR_BUSY naming
 * the holder, reason and expiry when it is leased (unexpired) or assigned;
 * HOTPLUG_ERROR_INVALID for a bad id, an empty or overlong @holder, @reason or @domain.
 * Owned result. */
HotplugLease *hotplug_lease_acquire(HotplugLeaseStore *store, const char *vf, const char *holder,
                                    const char *reason, const char *domain, guint ttl_s,
                                    GError **error);

/* The same, recording @owner (UTF-8, no control characters, at most HOTPLUG_LEASE_HOLDER_MAX
 * bytes; NULL: none) as the only party its caller lets act on the lease (the store itself
 * checks only lease ids: hotmigd compares the owner with the client's identity). */
HotplugLease *hotplug_lease_acquire_owned(HotplugLeaseStore *store, const char *vf,
                                          const char *owner, const char *holder,
                                          const char *reason, const char *domain, guint ttl_s,
                                          GError **error);

/* LEASED -> ASSIGNED. HOTPLUG_ERROR_STALE when @lease_id is not the current lease (expired and
 * maybe taken by someone else, or released). Confirming an already ASSIGNED lease with the same
 * id is a no-op TRUE. */
gboolean hotplug_lease_confirm(HotplugLeaseStore *store, const char *vf, const char *lease_id,
                               GError **error);

/* Extends a LEASED lease to @ttl_s seconds from now (1..HOTPLUG_LEASE_TTL_MAX), for a migration
 * that outlasts its first TTL; an ASSIGNED one is left as it is (TRUE). STALE when @lease_id is
 * not the current lease (it expired, maybe taken by someone else). */
gboolean hotplug_lease_renew(HotplugLeaseStore *store, const char *vf, const char *lease_id,
                             guint ttl_s, GError **error);

/* Records that the VF of the current lease @lease_id now carries @node_guid/@port_guid (both
 * non-zero), the identity of the lease's domain. STALE when @lease_id is not current. */
gboolean hotplug_lease_set_identity(HotplugLeaseStore *store, const char *vf,
                                    const char *lease_id, guint64 node_guid, guint64 port_guid,
                                    GError **error);

/* Records that @vf carries, or may carry, the identity of @domain with GUIDs unknown (node_guid
 * and port_guid 0), whatever the lease state: a domain left the VF and its GUIDs were not reset
 * yet. An identity recorded for @domain already is kept with its GUIDs. */
gboolean hotplug_lease_mark_identity(HotplugLeaseStore *store, const char *vf, const char *domain,
                                     GError **error);

/* Forgets the identity recorded for @vf (after it was reset), whatever the lease state. */
gboolean hotplug_lease_clear_identity(HotplugLeaseStore *store, const char *vf, GError **error);

/* Ends the lease (LEASED or ASSIGNED) if @lease_id is current; TRUE also when the VF is already
 * free or the id is no longer current and the lease expired (idempotent, for rollback); STALE
 * when someone else holds it. */
gboolean hotplug_lease_release(HotplugLeaseStore *store, const char *vf, const char *lease_id,
                               GError **error);

/* The state of @vf (FREE when no record or expired). Owned. */
HotplugLease *hotplug_lease_get(HotplugLeaseStore *store, const char *vf, GError **error);

/* Every VF with a record (owned array of owned HotplugLease), FREE ones included only when
 * @with_free; sorted by vf. */
GPtrArray *hotplug_lease_list(HotplugLeaseStore *store, gboolean with_free, GError **error);

/* Releases the ASSIGNED lease of @vf whatever its id (the daemon's reconciliation: the domain
 * no longer holds the VF). TRUE when the VF is already free; HOTPLUG_ERROR_BUSY when it is
 * LEASED (a migration in flight: not the domain's yet), which is left alone. */
gboolean hotplug_lease_forget(HotplugLeaseStore *store, const char *vf, GError **error);

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
