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

/* The value of the four hex digits at @p (before @end), or -1. */
static gint json_hex4(const char *p, const char *end)
{
    gint value = 0;

    if (end - p < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        gint digit = g_ascii_xdigit_value(p[i]);

        if (digit < 0)
            return -1;
        value = value * 16 + digit;
    }
    return value;
}

/* The length of the escape that starts at the backslash @p (before @end), or 0 when it is none
 * of strict JSON's. A UTF-16 surrogate counts only as the first half of a pair, both read:
 * after any surrogate json-glib reads two more characters, whatever they are (a string's
 * closing quote included), and a lone one would have it read on past where this scan stops. */
static gsize json_escape_len(const char *p, const char *end)
{
    gint unit;
    gint low;

    if (end - p < 2)
        return 0;
    if (p[1] != '\0' && strchr("\"\\/bfnrt", p[1]))
        return 2;
    if (p[1] != 'u' || (unit = json_hex4(p + 2, end)) < 0)
        return 0;
    if (unit < 0xd800 || unit > 0xdfff)
        return 6;
    if (unit > 0xdbff || end - p < 12 || p[6] != '\\' || p[7] != 'u')
        return 0;
    low = json_hex4(p + 8, end);
    return low >= 0xdc00 && low <= 0xdfff ? 12 : 0;
}

/* Outside strings: white space, structure, numbers and the letters of true, false, null. */
static gboolean json_is_strict_char(char c)
{
    return g_ascii_isalnum(c) || (c != '\0' && strchr(" \t\n\r{}[]:,\"+-.", c));
}

static gboolean json_not_strict(gsize at, const char *what, GError **error)
{
    g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                "JSON is not strict JSON at byte %zu: %s", at, what);
    return FALSE;
}

/* hm_json_check_depth() and hm_json_check_one(): @one, only white space after the first array
 * or object closed at the top. */
static gboolean json_scan(const char *data, gsize n, guint max_depth, gboolean one, GError **error)
{
    const char *end = data + n;
    guint depth = 0;
    gboolean in_string = FALSE;
    gboolean closed = FALSE;

    for (gsize i = 0; i < n; i++) {
        char c = data[i];

        if (in_string) {
            gsize esc;

            if (c == '"') {
                in_string = FALSE;
            } else if (c == '\\') {
                if (!(esc = json_escape_len(data + i, end)))
                    return json_not_strict(i, "an escape JSON does not have", error);
                i += esc - 1;
            }
            continue;
        }
        if (!json_is_strict_char(c))
            return json_not_strict(i,
                                   "a character outside strings that JSON does not have "
                                   "(a single-quoted string, a comment)",
                                   error);
        if (closed && !g_ascii_isspace(c)) {
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                        "JSON has data after its value at byte %zu", i);
            return FALSE;
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
            if (depth > 0 && --depth == 0)
                closed = one;
            break;
        default:
            break;
        }
    }
    return TRUE;
}

gboolean hm_json_check_depth(const char *data, gssize len, guint max_depth, GError **error)
{
    g_return_val_if_fail(data != NULL || len == 0, FALSE);
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

    return json_scan(data, len < 0 ? strlen(data) : (gsize)len, max_depth, FALSE, error);
}

gboolean hm_json_check_one(const char *data, gssize len, guint max_depth, GError **error)
{
    g_return_val_if_fail(data != NULL || len == 0, FALSE);
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

    return json_scan(data, len < 0 ? strlen(data) : (gsize)len, max_depth, TRUE, error);
}
