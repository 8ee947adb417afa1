/* hm-xml: read libvirt domain XML, find its VFs, make the device XML to attach them.
 * Depends on hm-common and libxml2. Parsing is hardened: no network, no entity expansion,
 * a size limit (XML_DOMAIN_MAX_BYTES). */
#pragma once

#include <glib.h>

#include "common/common.h"
#include "common/pci-address.h"

G_BEGIN_DECLS

#define XML_ERROR (xml_error_quark())
GQuark xml_error_quark(void);

/* Initializes libxml2 in the calling thread: call it from main() before any thread starts.
 * libxml2 2.9 sets its catalogs up lazily, at the first lookup, and not thread-safely: two
 * threads' first lookups at once can deadlock both (seen: libvirt's test driver reading its
 * file for two connections opened at once). */
void xml_init(void);

typedef enum {
    XML_ERROR_FAILED,
    XML_ERROR_PARSE,     /* not well-formed, too large, or not a <domain> */
    XML_ERROR_INVALID,   /* well-formed but a field we need is missing or bad */
    XML_ERROR_NOT_FOUND, /* no such device */
    XML_ERROR_LAST,
} XmlError;

#define XML_DOMAIN_MAX_BYTES (4 * 1024 * 1024)
#define XML_VF_ALIAS_PREFIX_DEFAULT "ua-hmvf"

typedef enum {
    XML_VF_KIND_HOSTDEV,           /* <hostdev mode='subsystem' type='pci'> */
    XML_VF_KIND_INTERFACE_HOSTDEV, /* <interface type='hostdev'> */
    XML_VF_KIND_STANDIN,           /* any other <interface> whose alias has the VF prefix */
    XML_VF_KIND_LAST,
} XmlVfKind;

HM_ENUM_DECL(xml_vf_kind, XmlVfKind)

typedef struct {
    XmlVfKind kind;
    char *alias;      /* libvirt alias, e.g. "hostdev0", "ua-hmvf0"; never NULL */
    char *host_pci;   /* host PCI address "0000:3b:02.1" (hostdev kinds), else NULL */
    char *mac;        /* MAC address (interface kinds, when present), else NULL */
    char *netdev;     /* the stand-in's host network device (<target dev=...>), else NULL */
    char *device_xml; /* the device element, serialized as found in the domain XML */
} XmlVf;

void xml_vf_free(XmlVf *vf);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(XmlVf, xml_vf_free)

typedef struct XmlDomain XmlDomain;

/* Parses @xml (a whole <domain> document). Returns a new XmlDomain (owned) or NULL with
 * XML_ERROR_PARSE (not well-formed, a DTD, too large, root not <domain>) or XML_ERROR_INVALID
 * (no <name>). */
XmlDomain *xml_domain_parse(const char *xml, GError **error);
void xml_domain_free(XmlDomain *dom);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(XmlDomain, xml_domain_free)

/* Borrowed; valid while @dom lives. */
const char *xml_domain_get_name(const XmlDomain *dom);

/* hotmig's namespace in a domain's <metadata> (libvirt keeps one element per namespace). */
#define XML_METADATA_NS "urn:hotmig:1"
#define XML_JOB_MAX_BYTES 128

/* The MPI job the domain runs a part of: the text of its <metadata>'s element <job> in
 * XML_METADATA_NS (any prefix; `virsh metadata DOMAIN urn:hotmig:1 --key hotmig --set
 * '<job>ID</job>' --live --config`), or NULL when it has none (owned). XML_ERROR_INVALID when the
 * id is empty, longer than XML_JOB_MAX_BYTES, not UTF-8 or holds control characters. */
char *xml_domain_get_job(const XmlDomain *dom, GError **error);

/* OpenStack Nova's namespace for its <metadata> (<nova:instance>), any version. */
#define XML_NOVA_NS_PREFIX "http://openstack.org/xmlns/libvirt/nova/"

/* Whether @dom is an instance of OpenStack Nova: its <metadata> holds an <instance> in Nova's
 * namespace. Moving it behind Nova's back leaves Nova's database placing it on its old host. */
gboolean xml_domain_is_nova(const XmlDomain *dom);

/* Whether the guest side of @dom's virtio channel @name may answer: @dom has that channel and
 * its live state is not 'disconnected' (libvirt's live XML says state='connected' once a guest
 * process opened its port, 'disconnected' while none has; without a state it is not known, so
 * TRUE). FALSE when @dom has no such channel. */
gboolean xml_domain_channel_may_answer(const XmlDomain *dom, const char *name);

/* Every VF of @dom in document order, as a new GPtrArray of XmlVf (owned, with free func).
 * @alias_prefix selects stand-in NICs (NULL: XML_VF_ALIAS_PREFIX_DEFAULT; "": none).
 * Fails with XML_ERROR_INVALID when a VF lacks what we need (alias, PCI source address). */
GPtrArray *xml_domain_find_vfs(const XmlDomain *dom, const char *alias_prefix, GError **error);

/* The host PCI addresses ("0000:3b:02.1", owned strings in a new GPtrArray) of every PCI host
 * device of @dom: <hostdev mode='subsystem' type='pci'> and <interface type='hostdev'>, with or
 * without an alias (so inactive definitions count too); devices whose address cannot be read
 * are skipped. For "which VFs are in use on this host"; never fails. */
GPtrArray *xml_domain_list_host_pci(const XmlDomain *dom);

/* What a host must offer to run @dom, from its XML. All strings owned by the struct. */
typedef struct {
    char *type;     /* <domain type=...>: "kvm", "qemu" */
    char *arch;     /* <os><type arch=...>, or NULL */
    char *machine;  /* <os><type machine=...>, or NULL */
    char *emulator; /* <devices><emulator>, or NULL */
    char *cpu_xml;  /* the <cpu> element serialized, NULL when absent or host-passthrough */
    GPtrArray *paths; /* host files the domain uses (owned strings, no duplicates): disk and
                       * filesystem sources, kernel, initrd, dtb, loader, nvram */
} XmlDomainNeeds;

void xml_domain_needs_free(XmlDomainNeeds *needs);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(XmlDomainNeeds, xml_domain_needs_free)

/* Never fails on a parsed domain (missing parts are NULL / absent). Owned result. */
XmlDomainNeeds *xml_domain_get_needs(const XmlDomain *dom);

/* Does the host capabilities XML @caps (virConnectGetCapabilities) offer a guest of domain
 * type @type (e.g. "qemu") for @arch (NULL: any) with machine @machine (NULL: any; matched
 * against <machine> names and their canonical attribute)? Sets *ret_supported and, when not,
 * *ret_why (owned). Fails with XML_ERROR_PARSE on a bad document. */
gboolean xml_caps_offer_guest(const char *caps, const char *type, const char *arch,
                              const char *machine, gboolean *ret_supported, char **ret_why,
                              GError **error);

/* The device XML to attach @vf on the destination (owned string). @new_host_pci is the host
 * PCI address of the VF reserved there (required for hostdev kinds, must be NULL for the
 * stand-in, whose backend is kept). The guest-side <address> is kept so the device comes back
 * in the same slot. The device is plugged under its user alias, xml_vf_user_alias(): a device
 * plugged without one is named by libvirt ("hostdevN"), and may get the name of a device whose
 * removal libvirt still has queued (docs/reliability.md, issue 19). Fails with
 * XML_ERROR_INVALID when that alias is not one libvirt takes (xml_device_set_alias()). */
char *xml_vf_format_attach(const XmlVf *vf, const char *new_host_pci, GError **error);

/* The user alias a VF with libvirt alias @alias is plugged under (owned): @alias itself when it
 * is a user alias ("ua-" prefix, kept from plug to plug), else "ua-" + @alias ("hostdev0"
 * becomes "ua-hostdev0"; libvirt never names a device "ua-..." itself). */
char *xml_vf_user_alias(const char *alias);

/* @device_xml, one device element (<hostdev> or <interface>, as xml_vf_format_attach() or
 * libvirt writes it), with its <alias name=.../> set to @alias: the one <alias> it has renamed,
 * or a new one added before its guest <address> (where libvirt writes it), else last. Nothing
 * else changes. @alias must be a user alias libvirt accepts on hot-plug: "ua-" then letters,
 * digits, '_' or '-'. Returns the edited device XML (owned) or NULL with XML_ERROR_PARSE
 * (@device_xml empty, not well-formed, with a DTD, larger than XML_DOMAIN_MAX_BYTES) or
 * XML_ERROR_INVALID (the root is not <hostdev> or <interface>, it has more than one <alias>, or
 * @alias is not such a user alias), naming the input. */
char *xml_device_set_alias(const char *device_xml, const char *alias, GError **error);

/* ---- node devices ------------------------------------------------------------------------ */

#define XML_NODEDEV_MAX_BYTES (1024 * 1024)

/* One libvirt node device (virNodeDeviceGetXMLDesc), the parts hotmig uses. */
typedef struct {
    char *name;              /* <name>, e.g. "pci_0000_3b_02_1"; never NULL */
    char *parent;            /* <parent>, or NULL */
    char *driver;            /* <driver><name>, e.g. "vfio-pci", or NULL when none is bound */
    char *pci_address;       /* "0000:3b:02.1" from <capability type='pci'>, NULL if not PCI */
    guint vendor_id;         /* <vendor id=...> (PCI only, else 0) */
    guint product_id;        /* <product id=...> (PCI only, else 0) */
    char *pf_address;        /* <capability type='phys_function'> address: set iff a VF */
    GPtrArray *vf_addresses; /* <capability type='virt_functions'> addresses (strings, owned);
                              * never NULL, empty unless a PF with VFs */
} XmlNodeDev;

void xml_nodedev_free(XmlNodeDev *nodedev);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(XmlNodeDev, xml_nodedev_free)

/* Parses one node device XML document (root <device> with a <name>; hardened like
 * xml_domain_parse, at most XML_NODEDEV_MAX_BYTES). Any device parses; a PCI device must have a
 * valid <capability type='pci'> (decimal <domain>, <bus>, <slot>, <function>; <vendor id> and
 * <product id> in hex). Returns a new XmlNodeDev (owned) or NULL with XML_ERROR_PARSE or
 * XML_ERROR_INVALID. */
XmlNodeDev *xml_nodedev_parse(const char *xml, GError **error);

G_END_DECLS
