/* hm-hotplug internals: the small parsers behind SR-IOV discovery (hotplug/sysfs.c), exposed
 * for the unit tests and the fuzz target. For hm-hotplug and its tests only. */
#pragma once

#include <glib.h>

#include "hotplug/hotplug.h"
#include "common/pci-address.h"

G_BEGIN_DECLS

/* Limits on what discovery reads. sysfs attributes are at most a page; the rest bound loops
 * over directories a broken (or hostile) tree could make huge. */
#define HOTPLUG_SYSFS_ATTR_MAX_BYTES 4096
#define HOTPLUG_SYSFS_MAX_DEVICES (1u << 20) /* entries of bus/pci/devices */
#define HOTPLUG_SYSFS_MAX_DIR_ENTRIES 65536u /* entries of one device directory */
#define HOTPLUG_SYSFS_MAX_NETDEVS 1024u      /* entries of a device's net/ */
#define HOTPLUG_SYSFS_MAX_VFS 65535u         /* TotalVFs is a 16-bit register */
#define HOTPLUG_SYSFS_MAX_NUMA_NODE 65535

/* Parsers of sysfs attribute contents: @text is the file's content, @len bytes (no NUL
 * inside), as the kernel writes it: the value and one newline (optional here). @path names
 * the file in the error (HOTPLUG_ERROR_SYSFS). */

/* Decimal, 0..@max ("%u\n": sriov_totalvfs, sriov_numvfs, net/X/type). */
gboolean hotplug_sysfs_parse_uint(const char *path, const char *text, gsize len, guint max,
                                  guint *ret, GError **error);

/* Decimal, @min..@max, with an optional '-' ("%d\n": numa_node). */
gboolean hotplug_sysfs_parse_int(const char *path, const char *text, gsize len, int min, int max,
                                 int *ret, GError **error);

/* A 16-bit ID: "0x" and 1-4 hex digits ("0x%04x\n": vendor, device), or without the "0x" when
 * @with_prefix is FALSE ("%x\n": sriov_vf_device). */
gboolean hotplug_sysfs_parse_id(const char *path, const char *text, gsize len, gboolean with_prefix,
                                guint *ret, GError **error);

G_END_DECLS
