/* hm-common: text from someone we do not trust (a guest's agent, a peer) made fit for a
 * terminal, a log line or a JSON string. */
#include "common/common.h"

/* Characters that move the cursor, end a line or reorder what follows on a terminal. */
static gboolean text_char_unsafe(gunichar u)
{
    return g_unichar_iscntrl(u) || u == 0x2028 || u == 0x2029 || (u >= 0x202a && u <= 0x202e) ||
           (u >= 0x2066 && u <= 0x2069) || u == 0x200e || u == 0x200f || u == 0x061c;
}

char *hm_text_sanitize(const char *text, gsize max_chars)
{
    g_autoptr(GString) out = g_string_new(NULL);
    g_autofree char *valid = NULL;
    gsize n = 0;

    if (!text)
        return g_strdup("");
    valid = g_utf8_make_valid(text, -1);
    for (const char *p = valid; *p; p = g_utf8_next_char(p)) {
        gunichar u = g_utf8_get_char(p);

        if (n == max_chars) {
            g_string_append(out, "...");
            break;
        }
        if (text_char_unsafe(u))
            g_string_append_c(out, '?');
        else
            g_string_append_unichar(out, u);
        n++;
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}
