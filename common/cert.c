#include "common/cert.h"

#include <string.h>

/* The CN of an RFC 4514 subject ("CN=node01,O=x" or with escapes): the first CN=, up to an
 * unescaped ','. Owned, NULL when there is none. */
static char *cert_subject_cn(const char *subject)
{
    g_autoptr(GString) cn = NULL;
    const char *p = subject;

    while (p && *p) {
        if (g_str_has_prefix(p, "CN=")) {
            cn = g_string_new(NULL);
            for (p += 3; *p && *p != ','; p++) {
                if (*p == '\\' && p[1])
                    p++;
                g_string_append_c(cn, *p);
            }
            return g_string_free(g_steal_pointer(&cn), FALSE);
        }
        /* Next attribute: after an unescaped ','. */
        for (; *p && *p != ','; p++) {
            if (*p == '\\' && p[1])
                p++;
        }
        if (*p == ',')
            p++;
    }
    return NULL;
}

GPtrArray *hm_cert_identities(GTlsCertificate *cert)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GPtrArray) dns = NULL;
    g_autoptr(GPtrArray) ips = NULL;
    g_autofree char *subject = NULL;

    if (!cert)
        return out;
    dns = g_tls_certificate_get_dns_names(cert);
    ips = g_tls_certificate_get_ip_addresses(cert);
    for (guint i = 0; dns && i < dns->len; i++) {
        GBytes *b = g_ptr_array_index(dns, i);
        gsize len = 0;
        const char *data = g_bytes_get_data(b, &len);

        /* A name with a NUL or not UTF-8 matches nothing configured. */
        if (len > 0 && len <= 253 && !memchr(data, '\0', len) && g_utf8_validate(data, len, NULL))
            g_ptr_array_add(out, g_strndup(data, len));
    }
    for (guint i = 0; ips && i < ips->len; i++)
        g_ptr_array_add(out, g_inet_address_to_string(g_ptr_array_index(ips, i)));
    if (!dns || dns->len == 0) {
        subject = g_tls_certificate_get_subject_name(cert);
        if (subject) {
            char *cn = cert_subject_cn(subject);

            if (cn && *cn)
                g_ptr_array_add(out, cn);
            else
                g_free(cn);
        }
    }
    return out;
}
