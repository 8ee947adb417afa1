/* hm-hotplug: PCI addresses ("DDDD:BB:SS.F"), read and written the kernel's way; used by
 * discovery (sysfs.c) and the libpci adapter (pci-libpci.c). */
#define G_LOG_DOMAIN "hm-hotplug"

#include "hotplug/pci-address-priv.h"

#include <string.h>

/* Parses 1..@max_digits hex digits at *@p, advancing it. */
static gboolean parse_hex_field(const char **p, guint max_digits, guint *ret)
{
    guint value = 0, n = 0;

    while (n < max_digits && g_ascii_isxdigit(**p)) {
        value = value * 16 + (guint)g_ascii_xdigit_value(**p);
        (*p)++;
        n++;
    }
    if (n == 0 || g_ascii_isxdigit(**p))
        return FALSE;
    *ret = value;
    return TRUE;
}

gboolean hotplug_pci_address_parse(const char *str, guint *ret_domain, guint *ret_bus,
                                   guint *ret_slot, guint *ret_function, GError **error)
{
    const char *p = str;
    const char *first_colon, *last_colon;
    guint domain = 0, bus = 0, slot = 0, function = 0;
    gboolean ok = TRUE;

    g_return_val_if_fail(str != NULL, FALSE);

    first_colon = strchr(str, ':');
    last_colon = strrchr(str, ':');
    /* DOMAIN:BUS:SLOT.FUNCTION or BUS:SLOT.FUNCTION */
    if (first_colon && first_colon != last_colon)
        ok = parse_hex_field(&p, 8, &domain) && *p++ == ':';
    ok = ok && parse_hex_field(&p, 2, &bus) && *p++ == ':';
    ok = ok && parse_hex_field(&p, 2, &slot) && slot <= 0x1f && *p++ == '.';
    ok = ok && *p >= '0' && *p <= '7' && p[1] == '\0';
    if (!ok) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
                    "'%s' is not a PCI address (DDDD:BB:SS.F)", str);
        return FALSE;
    }
    function = (guint)(*p - '0');
    if (ret_domain)
        *ret_domain = domain;
    if (ret_bus)
        *ret_bus = bus;
    if (ret_slot)
        *ret_slot = slot;
    if (ret_function)
        *ret_function = function;
    return TRUE;
}

char *hotplug_pci_address_format(guint domain, guint bus, guint slot, guint function)
{
    return g_strdup_printf("%04x:%02x:%02x.%x", domain, bus, slot, function);
}

char *hotplug_pci_address_normalize(const char *str, GError **error)
{
    guint domain, bus, slot, function;

    if (!hotplug_pci_address_parse(str, &domain, &bus, &slot, &function, error))
        return NULL;
    return hotplug_pci_address_format(domain, bus, slot, function);
}
