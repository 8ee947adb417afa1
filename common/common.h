/* hm-common: the pieces every hotmig library shares. Depends on GLib only. */
#pragma once

#include <glib.h>
#include <sys/stat.h>

G_BEGIN_DECLS

/* ---- errors ------------------------------------------------------------------------------ */

#define HM_COMMON_ERROR (hm_common_error_quark())
GQuark hm_common_error_quark(void);

typedef enum {
    HM_COMMON_ERROR_FAILED,       /* anything else */
    HM_COMMON_ERROR_INVALID,      /* bad input: a value that does not parse or is out of range */
    HM_COMMON_ERROR_TOO_LARGE,    /* input larger than the limit for it */
    HM_COMMON_ERROR_IO,           /* read/write failed */
    HM_COMMON_ERROR_TIMEOUT,      /* a deadline expired */
    HM_COMMON_ERROR_LAST,
} HmCommonError;

/* Sets @error from errno value @errsv (positive) with a prefix made from @fmt. */
void hm_set_error_errno(GError **error, int errsv, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

/* ---- enum <-> string --------------------------------------------------------------------- */

/* One string table per serialized enum, in the enum's order:
 *   HM_ENUM_DECL(orch_phase, OrchPhase)                  in the header
 *   HM_ENUM_IMPL(orch_phase, OrchPhase, ORCH_PHASE_LAST, "connect", ...)   in the .c
 * gives orch_phase_to_string(v) (NULL if out of range) and orch_phase_from_string(s) (-1). */
#define HM_ENUM_DECL(name, type)                                                               \
    const char *name##_to_string(type value);                                                   \
    int name##_from_string(const char *str);

#define HM_ENUM_IMPL(name, type, last, ...)                                                    \
    static const char *const name##_table[] = {__VA_ARGS__};                                    \
    G_STATIC_ASSERT(G_N_ELEMENTS(name##_table) == (last));                                      \
    const char *name##_to_string(type value)                                                    \
    {                                                                                           \
        return hm_enum_to_string(name##_table, G_N_ELEMENTS(name##_table), (int)value);        \
    }                                                                                           \
    int name##_from_string(const char *str)                                                     \
    {                                                                                           \
        return hm_enum_from_string(name##_table, G_N_ELEMENTS(name##_table), str);             \
    }

const char *hm_enum_to_string(const char *const *table, gsize n, int value);
int hm_enum_from_string(const char *const *table, gsize n, const char *str);

/* ---- files ------------------------------------------------------------------------------- */

/* Reads all of @path, failing with HM_COMMON_ERROR_TOO_LARGE when it holds more than @max
 * bytes. On success *ret_contents (owned, NUL-terminated) and *ret_len are set. */
gboolean hm_file_read_limited(const char *path, gsize max, char **ret_contents, gsize *ret_len,
                              GError **error);

/* Looks @rel (a '/'-separated path relative to the directory @root) up below @root without
 * following a symbolic link: each component is opened with openat(O_PATH | O_NOFOLLOW) in the
 * one before (links in @root itself are followed: it is the caller's). *ret_exists: whether it
 * exists (a missing component, or one that is not a directory, is not an error); *ret_st, when
 * it does, its stat. Fails with HM_COMMON_ERROR_INVALID ("'PATH' is a symbolic link") when a
 * component is a link, with HM_COMMON_ERROR_IO when one cannot be opened. */
gboolean hm_file_stat_beneath(const char *root, const char *rel, gboolean *ret_exists,
                              struct stat *ret_st, GError **error);

/* ---- JSON strings ------------------------------------------------------------------------ */

/* Appends @str as a JSON string literal, quotes included, to @out; NULL appends null. '"', '\\'
 * and U+0000..U+001F are escaped (\b \f \n \r \t, else \u00XX), and so are U+007F, U+2028 and
 * U+2029 (harmless in JSON, troublesome on terminals and in JavaScript). A byte that does not
 * start a valid UTF-8 sequence becomes U+FFFD, so the output is always valid UTF-8 JSON; valid
 * UTF-8 comes out unchanged. For tools that may not link a JSON library (hm-hotplug's). */
void hm_json_append_string(GString *out, const char *str);

/* The deepest nesting of arrays and objects hotmig accepts in a JSON text from anyone it does
 * not trust (a guest's agent, a peer hotmigd, a webhook). json-glib descends one C frame and
 * more per level, so 76 000 nested brackets overflow an 8 MiB stack; no hotmig message nests
 * deeper than 8. */
#define HM_JSON_MAX_DEPTH 32

/* Fails with HM_COMMON_ERROR_INVALID ("JSON nests deeper than N levels at byte B") when the
 * @len bytes of @data (up to its NUL when @len is -1) open more than @max_depth arrays and
 * objects at once. A linear scan, no parse: brackets inside strings (escapes included) do not
 * count. So that it counts what json-glib will read, it also fails ("JSON is not strict JSON
 * at byte B: ...") on what json-glib reads differently from strict JSON: outside strings a
 * character JSON does not have (json-glib also reads single-quoted strings, comments, hex
 * numbers), inside them an escape JSON does not have or a UTF-16 surrogate that is not half of
 * a pair (after which json-glib reads on past the closing quote). Anything else malformed is
 * left to the parser. Call it before json_parser_load_from_data() on every untrusted text. */
gboolean hm_json_check_depth(const char *data, gssize len, guint max_depth, GError **error);

/* As hm_json_check_depth(), and fails as well ("JSON has data after its value at byte B") when
 * anything but white space follows the first array or object closed at the top level
 * (json-glib reads on past it). */
gboolean hm_json_check_one(const char *data, gssize len, guint max_depth, GError **error);

/* ---- untrusted text ---------------------------------------------------------------------- */

/* The longest piece of a guest's or a peer's text hotmig repeats (an error description, a
 * process name), in characters. */
#define HM_TEXT_UNTRUSTED_MAX 256

/* A copy of @text (NULL gives "") fit for a terminal, a log line or a JSON string: invalid
 * UTF-8 becomes U+FFFD; control characters (C0, DEL, C1), the line and paragraph separators
 * and the bidirectional marks and overrides become '?'; after @max_chars characters the rest
 * is cut and "..." appended. Owned. Everything a guest or a peer sends that hotmig shows
 * passes through it. */
char *hm_text_sanitize(const char *text, gsize max_chars);

/* ---- time -------------------------------------------------------------------------------- */

/* Runs @func(@data) in an iteration of @context (then @notify(@data), when not NULL), from any
 * thread, and wakes it: always an idle
 * source at @priority, never g_main_context_invoke(), which calls @func on the calling thread
 * whenever that thread can acquire @context (its owner iterating it now and then rather than
 * running a loop): a callback on the wrong thread, and an owner's iteration that never wakes. */
void hm_main_context_post(GMainContext *context, gint priority, GSourceFunc func, gpointer data,
                          GDestroyNotify notify);

/* A deadline on the monotonic clock, in microseconds (g_get_monotonic_time()). */
typedef gint64 HmDeadline;

static inline HmDeadline hm_deadline_in_ms(guint timeout_ms)
{
    return g_get_monotonic_time() + (gint64)timeout_ms * G_TIME_SPAN_MILLISECOND;
}

/* Milliseconds left until @deadline, 0 when it has passed. */
guint hm_deadline_remaining_ms(HmDeadline deadline);

/* ---- fault injection rules (fault.c) ----------------------------------------------------- */

/* One rule of a fault spec, OP[@HOST][#N]: the Nth call of OP on HOST fails (every call when
 * N is 0, on any host when HOST is NULL). */
typedef struct {
    char *op;
    char *label;
    guint nth;
    guint seen; /* calls that matched so far */
} HmFaultRule;

void hm_fault_rule_free(HmFaultRule *rule);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HmFaultRule, hm_fault_rule_free)

/* Parses the rule @text (white space around it ignored): N a count from 1, HOST 'source' or
 * 'destination', OP one that @known accepts (@ops_hint, may be NULL, follows the message for
 * one it does not). Owned; NULL with HM_COMMON_ERROR_INVALID naming the rule. */
HmFaultRule *hm_fault_rule_parse(const char *text, gboolean (*known)(const char *op),
                                 const char *ops_hint, GError **error);

/* The rule of @rules (HmFaultRule) that fails this call of @op on host @label, or NULL (the
 * call goes through); every rule matching the call counts it. Borrowed. */
HmFaultRule *hm_fault_rules_hit(GPtrArray *rules, const char *op, const char *label);

/* ---- logging ----------------------------------------------------------------------------- */

/* Installs the log writer for programs: messages at @verbose or below go to stderr as
 * "PROGRAM: message"; hotmig's own debug messages when @verbose or G_MESSAGES_DEBUG ask for
 * them, a library's (GLib-GIO, GLib-Net, libsoup...) only when G_MESSAGES_DEBUG names its
 * domain or "all": --verbose never prints GLib's internal debug lines.
 * When stderr is the systemd journal (a service), entries go to journald with their fields
 * (MIGRATION_ID, DOMAIN, VF, PHASE) so `journalctl DOMAIN=vm7` finds them.
 * Libraries never call this; they log with g_debug() and structured fields (HM_LOG_*). */
void hm_log_setup(const char *program, gboolean verbose);

#define HM_LOG_FIELD_MIGRATION_ID "MIGRATION_ID"
#define HM_LOG_FIELD_DOMAIN "DOMAIN"
#define HM_LOG_FIELD_VF "VF"
#define HM_LOG_FIELD_PHASE "PHASE"

G_END_DECLS
