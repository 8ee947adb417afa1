/* PCI addresses ("DDDD:BB:SS.F"): the one type and parser every library uses (pci-address.c).
 * The domain is the kernel's: 32 bits, printed with at least 4 hex digits (VMD domains have 5,
 * "10000:00:02.1"); libvirt's XML carries the same numbers. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define HM_PCI_DOMAIN_MAX 0xffffffffu
#define HM_PCI_BUS_MAX 0xffu
#define HM_PCI_SLOT_MAX 0x1fu
#define HM_PCI_FUNCTION_MAX 0x7u

typedef struct {
    guint domain, bus, slot, function;
} HmPciAddress;

/* Parses "DDDD:BB:SS.F", or "BB:SS.F" for domain 0: hex digits of either case, domain 1-8
 * digits, bus 1-2, slot 1-2 (<= 0x1f), function 1 (<= 7); nothing else, no "0x", no white
 * space. Fills *@ret (may be NULL) or fails with HM_COMMON_ERROR_INVALID naming @str, *@ret
 * untouched. */
gboolean hm_pci_address_parse(const char *str, HmPciAddress *ret, GError **error);

/* The kernel's spelling, "%04x:%02x:%02x.%x" (owned). */
char *hm_pci_address_format(const HmPciAddress *addr);

/* @str in the kernel's spelling (owned), or NULL with HM_COMMON_ERROR_INVALID. */
char *hm_pci_address_normalize(const char *str, GError **error);

G_END_DECLS
