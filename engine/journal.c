#include "engine/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdarg.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

struct OrchJournal {
    char *dir;  /* STATE/journal */
    char *path; /* STATE/journal/DOMAIN.journal */
    char *domain;
    int lock_fd;
    int fd; /* the journal, O_APPEND */
};

static gboolean journal_fsync_dir(const char *dir, GError **error)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0 || fsync(fd) < 0) {
        int errsv = errno;

        if (fd >= 0)
            close(fd);
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "Cannot sync directory '%s': %s", dir,
                    g_strerror(errsv));
        return FALSE;
    }
    close(fd);
    return TRUE;
}

/* Domain names become file names: refuse anything that could leave the directory. */
static gboolean journal_check_domain(const char *domain, GError **error)
{
    if (!domain || !*domain || strlen(domain) > 200 || strchr(domain, '/') ||
        g_str_equal(domain, ".") || g_str_equal(domain, "..")) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "Domain name '%s' cannot be journaled (empty, too long or contains '/')",
                    domain ? domain : "");
        return FALSE;
    }
    return TRUE;
}

void orch_journal_close(OrchJournal *journal)
{
    if (!journal)
        return;
    if (journal->fd >= 0)
        close(journal->fd);
    if (journal->lock_fd >= 0)
        close(journal->lock_fd); /* releases the flock */
    g_free(journal->dir);
    g_free(journal->path);
    g_free(journal->domain);
    g_free(journal);
}

OrchJournal *orch_journal_open(const char *state_dir, const char *domain, gboolean create,
                               GError **error)
{
    g_autoptr(OrchJournal) journal = NULL;
    g_autofree char *lock_path = NULL;
    g_autofree char *pid = NULL;

    if (!journal_check_domain(domain, error))
        return NULL;
    journal = g_new0(OrchJournal, 1);
    journal->lock_fd = -1;
    journal->fd = -1;
    journal->domain = g_strdup(domain);
    journal->dir = g_build_filename(state_dir, "journal", NULL);
    journal->path = g_strdup_printf("%s/%s.journal", journal->dir, domain);
    lock_path = g_strdup_printf("%s/%s.lock", journal->dir, domain);

    if (g_mkdir_with_parents(journal->dir, 0700) < 0) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "Cannot create state directory '%s': %s",
                    journal->dir, g_strerror(errno));
        return NULL;
    }
    journal->lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (journal->lock_fd < 0) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "Cannot open lock file '%s': %s",
                    lock_path, g_strerror(errno));
        return NULL;
    }
    if (flock(journal->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        g_autofree char *holder = NULL;

        g_file_get_contents(lock_path, &holder, NULL, NULL);
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_BUSY,
                    "Another migration or recovery of '%s' is under way (process %s)", domain,
                    holder && *holder ? g_strstrip(holder) : "unknown");
        return NULL;
    }
    pid = g_strdup_printf("%d\n", (int)getpid());
    if (ftruncate(journal->lock_fd, 0) < 0 || pwrite(journal->lock_fd, pid, strlen(pid), 0) < 0)
        g_debug("Cannot record our pid in '%s': %s", lock_path, g_strerror(errno));

    if (create) {
        if (g_file_test(journal->path, G_FILE_TEST_EXISTS)) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_UNFINISHED,
                        "An earlier migration of '%s' did not finish (journal '%s'); run "
                        "'migrate-vm --recover %s' first",
                        domain, journal->path, domain);
            return NULL;
        }
        journal->fd = open(journal->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC,
                           0600);
        if (journal->fd < 0 || !journal_fsync_dir(journal->dir, NULL)) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "Cannot create journal '%s': %s",
                        journal->path, g_strerror(errno));
            return NULL;
        }
    } else {
        journal->fd = open(journal->path, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (journal->fd < 0) {
            g_set_error(error, ORCH_ERROR,
                        errno == ENOENT ? ORCH_ERROR_NOT_FOUND : ORCH_ERROR_FAILED,
                        "No unfinished migration of '%s' (journal '%s': %s)", domain,
                        journal->path, g_strerror(errno));
            return NULL;
        }
    }
    return g_steal_pointer(&journal);
}

gboolean orch_journal_append(OrchJournal *journal, JsonObject *entry, GError **error)
{
    g_autoptr(JsonNode) node = json_node_init_object(json_node_alloc(), entry);
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    g_autofree char *stamp = g_date_time_format_iso8601(now);
    g_autofree char *body = NULL;
    g_autofree char *line = NULL;
    gsize len;
    gsize done = 0;

    json_object_set_string_member(entry, "time", stamp);
    body = json_to_string(node, FALSE);
    line = g_strconcat(body, "\n", NULL);
    len = strlen(line);
    while (done < len) {
        ssize_t n = write(journal->fd, line + done, len - done);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "Cannot write journal '%s': %s",
                        journal->path, g_strerror(errno));
            return FALSE;
        }
        done += n;
    }
    if (fdatasync(journal->fd) < 0) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "Cannot sync journal '%s': %s",
                    journal->path, g_strerror(errno));
        return FALSE;
    }
    return TRUE;
}

gboolean orch_journal_event(OrchJournal *journal, GError **error, const char *event, ...)
{
    g_autoptr(JsonObject) entry = json_object_new();
    va_list ap;
    const char *key;

    json_object_set_string_member(entry, "event", event);
    va_start(ap, event);
    while ((key = va_arg(ap, const char *))) {
        const char *value = va_arg(ap, const char *);

        if (value)
            json_object_set_string_member(entry, key, value);
    }
    va_end(ap);
    return orch_journal_append(journal, entry, error);
}

gboolean orch_journal_finish(OrchJournal *journal, GError **error)
{
    if (g_unlink(journal->path) < 0 && errno != ENOENT) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "Cannot remove journal '%s': %s",
                    journal->path, g_strerror(errno));
        return FALSE;
    }
    return journal_fsync_dir(journal->dir, error);
}

GPtrArray *orch_journal_read(OrchJournal *journal, GError **error)
{
    g_autofree char *contents = NULL;
    g_autoptr(GPtrArray) entries = g_ptr_array_new_with_free_func((GDestroyNotify)json_object_unref);
    g_autoptr(GError) local = NULL;
    g_auto(GStrv) lines = NULL;
    gsize len = 0;
    guint n;

    if (!hm_file_read_limited(journal->path, ORCH_JOURNAL_MAX_BYTES, &contents, &len, &local)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "Cannot read journal: %s",
                    local->message);
        return NULL;
    }
    lines = g_strsplit(contents, "\n", -1);
    n = g_strv_length(lines);
    for (guint i = 0; i < n; i++) {
        g_autoptr(JsonParser) parser = json_parser_new_immutable();
        JsonNode *root;
        gboolean last = i + 1 == n || (i + 2 == n && !*lines[i + 1]);

        if (!*lines[i])
            continue;
        if (!json_parser_load_from_data(parser, lines[i], -1, NULL) ||
            !(root = json_parser_get_root(parser)) || !JSON_NODE_HOLDS_OBJECT(root)) {
            /* A crash while appending leaves a partial last line: that event never counted. */
            if (last && !g_str_has_suffix(contents, "\n"))
                break;
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                        "Journal '%s' line %u is not a JSON object", journal->path, i + 1);
            return NULL;
        }
        g_ptr_array_add(entries, json_object_ref(json_node_get_object(root)));
    }
    return g_steal_pointer(&entries);
}

static int compare_strings(gconstpointer a, gconstpointer b)
{
    return g_strcmp0(*(const char *const *)a, *(const char *const *)b);
}

GPtrArray *orch_journal_list(const char *state_dir, GError **error)
{
    g_autofree char *dir_path = g_build_filename(state_dir, "journal", NULL);
    g_autoptr(GPtrArray) domains = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GDir) dir = NULL;
    g_autoptr(GError) local = NULL;
    const char *name;

    dir = g_dir_open(dir_path, 0, &local);
    if (!dir) {
        if (g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
            return g_steal_pointer(&domains);
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "Cannot list '%s': %s", dir_path,
                    local->message);
        return NULL;
    }
    while ((name = g_dir_read_name(dir))) {
        if (g_str_has_suffix(name, ".journal"))
            g_ptr_array_add(domains, g_strndup(name, strlen(name) - strlen(".journal")));
    }
    g_ptr_array_sort(domains, compare_strings);
    return g_steal_pointer(&domains);
}
