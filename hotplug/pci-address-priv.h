/* hm-hotplug internals: PCI addresses (pci-address.c), for hm-hotplug and its tests only. */
#pragma once

#include <glib.h>

#include "hotplug/hotplug.h"

G_BEGIN_DECLS

/* Parses a PCI address "DDDD:BB:SS.F", or "BB:SS.F" for domain 0: hex digits of either case,
 * domain 1-8 digits (the kernel prints at least 4; VMD domains have 5), bus 1-2, slot 1-2
 * (<= 0x1f), function 1 (<= 7); nothing else, no "0x", no white space. Returns TRUE and fills
 * the outputs (each may be NULL), or FALSE with HOTPLUG_ERROR_INVALID, outputs untouched. */
gboolean hotplug_pci_address_parse(const char *str, guint *ret_domain, guint *ret_bus,
                                   guint *ret_slot, guint *ret_function, GError **error);

/* The kernel's spelling of an address, "%04x:%02x:%02x.%x" (owned). */
char *hotplug_pci_address_format(guint domain, guint bus, guint slot, guint function);

/* @str in the kernel's spelling, "%04x:%02x:%02x.%x" (owned), or NULL with
 * HOTPLUG_ERROR_INVALID. */
char *hotplug_pci_address_normalize(const char *str, GError **error);

G_END_DECLS
