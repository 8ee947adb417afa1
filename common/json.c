/* hm-common: JSON string literals for the tools that may use GLib only, and the nesting limit
 * checked before any untrusted JSON reaches a parser. */
#include <string.h>

#include "common/common.h"

void hm_json_append_string(GString *out, const char *str)
{
    const char *p = str;

    g_return_if_fail(out != NULL);

    if (!str) {
        g_string_append(out, "null");
        return;
    }
    g_string_append_c(out, '"');
    while (*p) {
        guchar c = (guchar)*p;
        gunichar u;
        const char *next;

        switch (c) {
        case '"':
            g_string_append(out, "\\\"");
            p++;
            continue;
        case '\\':
            g_string_append(out, "\\\\");
            p++;
            continue;
        case '\b':
            g_string_append(out, "\\b");
            p++;
            continue;
        case '\f':
            g_string_append(out, "\\f");
            p++;
            continue;
        case '\n':
            g_string_append(out, "\\n");
            p++;
            continue;
        case '\r':
            g_string_append(out, "\\r");
            p++;
            continue;
        case '\t':
            g_string_append(out, "\\t");
            p++;
            continue;
        default:
            break;
        }
        if (c < 0x20 || c == 0x7f) {
            g_string_append_printf(out, "\\u%04x", c);
            p++;
            continue;
        }
        if (c < 0x80) {
            g_string_append_c(out, (char)c);
            p++;
            continue;
        }
        /* At most 4 bytes: the string ends at its NUL, which no multi-byte sequence holds. */
        u = g_utf8_get_char_validated(p, -1);
        if (u == (gunichar)-1 || u == (gunichar)-2) {
            g_string_append(out, "\xef\xbf\xbd"); /* U+FFFD, for this byte alone */
            p++;
            continue;
        }
        next = g_utf8_next_char(p);
        if (u == 0x2028 || u == 0x2029)
            g_string_append_printf(out, "\\u%04x", u);
        else
            g_string_append_len(out, p, next - p);
        p = next;
    }
    g_string_append_c(out, '"');
}

gboolean hm_json_check_depth(const char *data, gssize len, guint max_depth, GError **error)
{
    gsize n;
    guint depth = 0;
    gboolean in_string = FALSE;

    g_return_val_if_fail(data != NULL || len == 0, FALSE);
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

    n = len < 0 ? strlen(data) : (gsize)len;
    for (gsize i = 0; i < n; i++) {
        char c = data[i];

        if (in_string) {
            if (c == '\\')
                i++; /* the escaped character, whatever it is */
            else if (c == '"')
                in_string = FALSE;
            continue;
        }
        switch (c) {
        case '"':
            in_string = TRUE;
            break;
        case '[':
        case '{':
            if (++depth > max_depth) {
                g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                            "JSON nests deeper than %u levels at byte %zu", max_depth, i);
                return FALSE;
            }
            break;
        case ']':
        case '}':
            if (depth > 0)
                depth--;
            break;
        default:
            break;
        }
    }
    return TRUE;
}
