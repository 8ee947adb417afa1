#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

G_DEFINE_QUARK(hm-common-error-quark, hm_common_error)

void hm_set_error_errno(GError **error, int errsv, const char *fmt, ...)
{
    va_list ap;
    g_autofree char *prefix = NULL;

    va_start(ap, fmt);
    prefix = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_IO, "%s: %s", prefix, g_strerror(errsv));
}

const char *hm_enum_to_string(const char *const *table, gsize n, int value)
{
    if (value < 0 || (gsize)value >= n)
        return NULL;
    return table[value];
}

int hm_enum_from_string(const char *const *table, gsize n, const char *str)
{
    if (!str)
        return -1;
    for (gsize i = 0; i < n; i++) {
        if (g_str_equal(table[i], str))
            return (int)i;
    }
    return -1;
}

gboolean hm_file_read_limited(const char *path, gsize max, char **ret_contents, gsize *ret_len,
                              GError **error)
{
    g_autoptr(GString) buf = g_string_sized_new(MIN(max, 4096) + 1);
    int fd;

    g_return_val_if_fail(path != NULL, FALSE);

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        hm_set_error_errno(error, errno, "Cannot open '%s'", path);
        return FALSE;
    }
    for (;;) {
        char chunk[4096];
        ssize_t n = read(fd, chunk, sizeof(chunk));

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int errsv = errno;
            close(fd);
            hm_set_error_errno(error, errsv, "Cannot read '%s'", path);
            return FALSE;
        }
        if (n == 0)
            break;
        if (buf->len + (gsize)n > max) {
            close(fd);
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_TOO_LARGE,
                        "'%s' is larger than the limit of %" G_GSIZE_FORMAT " bytes", path, max);
            return FALSE;
        }
        g_string_append_len(buf, chunk, n);
    }
    close(fd);
    if (ret_len)
        *ret_len = buf->len;
    *ret_contents = g_string_free(g_steal_pointer(&buf), FALSE);
    return TRUE;
}

gboolean hm_file_stat_beneath(const char *root, const char *rel, gboolean *ret_exists,
                              struct stat *ret_st, GError **error)
{
    g_auto(GStrv) parts = NULL;
    g_autoptr(GString) walked = NULL;
    struct stat st;
    int dir;

    g_return_val_if_fail(root && rel && ret_exists, FALSE);

    dir = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0 || fstat(dir, &st) < 0) {
        int errsv = errno;

        if (dir >= 0)
            close(dir);
        if (errsv != ENOENT && errsv != ENOTDIR) {
            hm_set_error_errno(error, errsv, "Cannot open '%s'", root);
            return FALSE;
        }
        *ret_exists = FALSE;
        return TRUE;
    }
    parts = g_strsplit(rel, "/", -1);
    walked = g_string_new(root);
    for (char **p = parts; *p; p++) {
        int next;

        if (!**p)
            continue;
        if (!S_ISDIR(st.st_mode)) { /* what came before is not a directory */
            close(dir);
            *ret_exists = FALSE;
            return TRUE;
        }
        if (walked->len == 0 || walked->str[walked->len - 1] != '/')
            g_string_append_c(walked, '/');
        g_string_append(walked, *p);
        next = openat(dir, *p, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 || fstat(next, &st) < 0) {
            int errsv = errno;

            if (next >= 0)
                close(next);
            close(dir);
            if (errsv != ENOENT && errsv != ENOTDIR) {
                hm_set_error_errno(error, errsv, "Cannot open '%s'", walked->str);
                return FALSE;
            }
            *ret_exists = FALSE;
            return TRUE;
        }
        close(dir);
        dir = next;
        if (S_ISLNK(st.st_mode)) {
            close(dir);
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                        "'%s' is a symbolic link", walked->str);
            return FALSE;
        }
    }
    close(dir);
    *ret_exists = TRUE;
    if (ret_st)
        *ret_st = st;
    return TRUE;
}

guint hm_deadline_remaining_ms(HmDeadline deadline)
{
    gint64 left = deadline - g_get_monotonic_time();

    if (left <= 0)
        return 0;
    return (guint)MIN((left + G_TIME_SPAN_MILLISECOND - 1) / G_TIME_SPAN_MILLISECOND, G_MAXUINT);
}

static const char *log_program = "hotmig";
static gboolean log_verbose;
static gboolean log_journald; /* stderr is the journal (a systemd service): keep the fields */

/* hotmig's own log domains: none (the programs and most libraries), "hotmigd", "hotmig-*",
 * "hm-*". Everything else (GLib-GIO's GSocketClient, GLib-Net, libsoup, json-glib) is a
 * library's internal debug output. */
static gboolean own_log_domain(const char *domain)
{
    return !domain || g_str_equal(domain, "hotmigd") || g_str_has_prefix(domain, "hotmig-") ||
           g_str_has_prefix(domain, "hm-");
}

static GLogWriterOutput hm_log_writer(GLogLevelFlags level, const GLogField *fields,
                                      gsize n_fields, gpointer user_data)
{
    const char *message = NULL;
    const char *domain = NULL;

    /* Debug messages: hotmig's own with --verbose; a library's only when G_MESSAGES_DEBUG
     * names its domain (or "all"), the explicit debug switch. */
    if (level & G_LOG_LEVEL_DEBUG) {
        for (gsize i = 0; i < n_fields; i++) {
            if (g_str_equal(fields[i].key, "GLIB_DOMAIN"))
                domain = fields[i].value;
        }
        if (!(log_verbose && own_log_domain(domain)) &&
            g_log_writer_default_would_drop(level, domain))
            return G_LOG_WRITER_HANDLED;
    }
    if (log_journald &&
        g_log_writer_journald(level, fields, n_fields, user_data) == G_LOG_WRITER_HANDLED)
        return G_LOG_WRITER_HANDLED;
    for (gsize i = 0; i < n_fields; i++) {
        if (g_str_equal(fields[i].key, "MESSAGE"))
            message = fields[i].value;
    }
    if (!message)
        return G_LOG_WRITER_UNHANDLED;
    if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
        fprintf(stderr, "%s: %s\n", log_program, message);
    else if (level & G_LOG_LEVEL_DEBUG)
        fprintf(stderr, "%s: debug: %s\n", log_program, message);
    else
        fprintf(stderr, "%s: %s\n", log_program, message);
    return G_LOG_WRITER_HANDLED;
}

void hm_log_setup(const char *program, gboolean verbose)
{
    log_program = program;
    log_verbose = verbose;
    log_journald = g_log_writer_is_journald(fileno(stderr));
    g_log_set_writer_func(hm_log_writer, NULL, NULL);
}

void hm_main_context_post(GMainContext *context, gint priority, GSourceFunc func, gpointer data,
                          GDestroyNotify notify)
{
    GSource *src = g_idle_source_new();

    g_source_set_priority(src, priority);
    g_source_set_callback(src, func, data, notify);
    g_source_attach(src, context);
    g_source_unref(src);
}
