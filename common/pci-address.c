/* PCI addresses: see pci-address.h. */
#include "common/pci-address.h"

#include <string.h>

#include "common/common.h"

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

gboolean hm_pci_address_parse(const char *str, HmPciAddress *ret, GError **error)
{
    const char *p = str;
    const char *first_colon, *last_colon;
    HmPciAddress addr = {0};
    gboolean ok = TRUE;

    g_return_val_if_fail(str != NULL, FALSE);

    first_colon = strchr(str, ':');
    last_colon = strrchr(str, ':');
    /* DOMAIN:BUS:SLOT.FUNCTION or BUS:SLOT.FUNCTION */
    if (first_colon && first_colon != last_colon)
        ok = parse_hex_field(&p, 8, &addr.domain) && *p++ == ':';
    ok = ok && parse_hex_field(&p, 2, &addr.bus) && *p++ == ':';
    ok = ok && parse_hex_field(&p, 2, &addr.slot) && addr.slot <= HM_PCI_SLOT_MAX && *p++ == '.';
    ok = ok && *p >= '0' && *p <= '7' && p[1] == '\0';
    if (!ok) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                    "'%s' is not a PCI address (DDDD:BB:SS.F, hex: bus <= ff, slot <= 1f, function <= 7)",
                    str);
        return FALSE;
    }
    addr.function = (guint)(*p - '0');
    if (ret)
        *ret = addr;
    return TRUE;
}

char *hm_pci_address_format(const HmPciAddress *addr)
{
    g_return_val_if_fail(addr != NULL, NULL);
    return g_strdup_printf("%04x:%02x:%02x.%x", addr->domain, addr->bus, addr->slot,
                           addr->function);
}

char *hm_pci_address_normalize(const char *str, GError **error)
{
    HmPciAddress addr;

    if (!hm_pci_address_parse(str, &addr, error))
        return NULL;
    return hm_pci_address_format(&addr);
}
