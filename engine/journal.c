#include "engine/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "engine/json.h"

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

/* The steps orch_journal_load() reads (with the begin line): each must be durable before the
 * step it announces acts, since recovery decides by them. The others ("migrate", "migrated",
 * "resume", "undone", "undo-failed", "end") say what happened for people and tests only;
 * recovery finds the same from the hosts (where the domain runs, which VFs it holds) whether
 * they are there or not, so they are written without a sync of their own: the next durable
 * line or the journal's removal syncs them, a crash may lose them (docs/reliability.md). */
static const char *const journal_durable_steps[] = {"prepare", "unplug", "plug", NULL};

static gboolean journal_step_durable(const char *step)
{
    return g_strv_contains(journal_durable_steps, step);
}

/* Appends @entry (borrowed; "time" is added) as one line; makes it durable (fdatasync) when
 * @durable. */
static gboolean journal_append(OrchJournal *journal, JsonObject *entry, gboolean durable,
                               GError **error)
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
    if (durable && fdatasync(journal->fd) < 0) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "Cannot sync journal '%s': %s",
                    journal->path, g_strerror(errno));
        return FALSE;
    }
    return TRUE;
}

/* ---- the record ---------------------------------------------------------------------------- */

void orch_journal_vf_free(OrchJournalVf *vf)
{
    if (!vf)
        return;
    g_free(vf->alias);
    g_free(vf->kind);
    g_free(vf->host_pci);
    g_free(vf->source_xml);
    g_free(vf->destination_xml);
    g_free(vf->lease_vf);
    g_free(vf->lease_id);
    g_free(vf);
}

void orch_journal_record_free(OrchJournalRecord *rec)
{
    if (!rec)
        return;
    g_free(rec->migration);
    g_free(rec->domain);
    g_free(rec->source);
    g_free(rec->destination);
    g_free(rec->agent_channel);
    g_free(rec->hotmigd);
    if (rec->vfs)
        g_ptr_array_unref(rec->vfs);
    g_free(rec);
}

/* Sets string member @name when @value is not NULL. */
static void set_string(JsonObject *o, const char *name, const char *value)
{
    if (value)
        json_object_set_string_member(o, name, value);
}

gboolean orch_journal_begin(OrchJournal *journal, const OrchJournalRecord *rec, gboolean sync,
                            GError **error)
{
    g_autoptr(JsonObject) entry = json_object_new();
    JsonArray *vfs = json_array_new();

    g_return_val_if_fail(journal && rec && rec->domain && rec->source && rec->destination,
                         FALSE);
    json_object_set_string_member(entry, "event", "begin");
    set_string(entry, "migration", rec->migration);
    json_object_set_string_member(entry, "domain", rec->domain);
    json_object_set_string_member(entry, "source", rec->source);
    json_object_set_string_member(entry, "destination", rec->destination);
    json_object_set_boolean_member(entry, "persistent", rec->persistent);
    json_object_set_boolean_member(entry, "agent", rec->agent);
    set_string(entry, "agent_channel", rec->agent_channel);
    set_string(entry, "hotmigd", rec->hotmigd);
    for (guint i = 0; rec->vfs && i < rec->vfs->len; i++) {
        const OrchJournalVf *vf = g_ptr_array_index(rec->vfs, i);
        JsonObject *o = json_object_new();

        json_object_set_string_member(o, "alias", vf->alias);
        set_string(o, "kind", vf->kind);
        set_string(o, "host_pci", vf->host_pci);
        json_object_set_string_member(o, "source_xml", vf->source_xml);
        set_string(o, "lease_vf", vf->lease_vf);
        set_string(o, "lease_id", vf->lease_id);
        json_object_set_string_member(o, "destination_xml", vf->destination_xml);
        json_array_add_object_element(vfs, o);
    }
    json_object_set_array_member(entry, "vfs", vfs);
    return journal_append(journal, entry, sync, error);
}

gboolean orch_journal_step(OrchJournal *journal, const char *migration, const char *step,
                           const char *alias, const char *xml, GError **error)
{
    g_autoptr(JsonObject) entry = json_object_new();

    g_return_val_if_fail(journal && step, FALSE);
    json_object_set_string_member(entry, "event", step);
    set_string(entry, "migration", migration);
    set_string(entry, "alias", alias);
    set_string(entry, "xml", xml);
    return journal_append(journal, entry, journal_step_durable(step), error);
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

/* Every line of the journal in order (owned array of owned JsonObject). A truncated last line
 * (a crash mid-write) is ignored; any other bad line is an error naming the line. */
static GPtrArray *journal_read(OrchJournal *journal, GError **error)
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

/* ---- reading the record ---------------------------------------------------------------------- */

static const char *member_string(JsonObject *obj, const char *name, const char *what,
                                 guint line, GError **error)
{
    const char *value = orch_json_get_string(obj, name);

    if (!value)
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "Journal entry %u (%s) has no string \"%s\"", line, what, name);
    return value;
}

OrchJournalRecord *orch_journal_load(OrchJournal *journal, GError **error)
{
    g_autoptr(GPtrArray) entries = journal_read(journal, error);
    g_autoptr(OrchJournalRecord) plan = g_new0(OrchJournalRecord, 1);
    JsonObject *begin;
    JsonNode *vfs_node;
    JsonArray *vfs;

    if (!entries)
        return NULL;
    if (entries->len == 0 ||
        g_strcmp0(orch_json_get_string(g_ptr_array_index(entries, 0), "event"), "begin") != 0) {
        /* No begin entry: the migration stopped before changing anything. */
        return g_steal_pointer(&plan);
    }
    begin = g_ptr_array_index(entries, 0);
    plan->vfs = g_ptr_array_new_with_free_func((GDestroyNotify)orch_journal_vf_free);
    if (!member_string(begin, "domain", "begin", 1, error) ||
        !member_string(begin, "source", "begin", 1, error) ||
        !member_string(begin, "destination", "begin", 1, error))
        return NULL;
    plan->migration = g_strdup(orch_json_get_string(begin, "migration"));
    plan->domain = g_strdup(orch_json_get_string(begin, "domain"));
    plan->source = g_strdup(orch_json_get_string(begin, "source"));
    plan->destination = g_strdup(orch_json_get_string(begin, "destination"));
    plan->agent_channel = g_strdup(orch_json_get_string(begin, "agent_channel"));
    plan->hotmigd = g_strdup(orch_json_get_string(begin, "hotmigd"));
    plan->persistent = json_object_get_boolean_member_with_default(begin, "persistent", FALSE);
    plan->agent = json_object_get_boolean_member_with_default(begin, "agent", TRUE);
    vfs_node = json_object_get_member(begin, "vfs");
    vfs = vfs_node && JSON_NODE_HOLDS_ARRAY(vfs_node) ? json_node_get_array(vfs_node) : NULL;
    for (guint i = 0; vfs && i < json_array_get_length(vfs); i++) {
        JsonNode *el = json_array_get_element(vfs, i);
        JsonObject *o = JSON_NODE_HOLDS_OBJECT(el) ? json_node_get_object(el) : NULL;
        OrchJournalVf *vf;

        if (!member_string(o, "alias", "begin vf", 1, error) ||
            !member_string(o, "source_xml", "begin vf", 1, error) ||
            !member_string(o, "destination_xml", "begin vf", 1, error))
            return NULL;
        vf = g_new0(OrchJournalVf, 1);
        vf->alias = g_strdup(orch_json_get_string(o, "alias"));
        vf->kind = g_strdup(orch_json_get_string(o, "kind"));
        vf->host_pci = g_strdup(orch_json_get_string(o, "host_pci"));
        vf->source_xml = g_strdup(orch_json_get_string(o, "source_xml"));
        vf->destination_xml = g_strdup(orch_json_get_string(o, "destination_xml"));
        vf->lease_vf = g_strdup(orch_json_get_string(o, "lease_vf"));
        vf->lease_id = g_strdup(orch_json_get_string(o, "lease_id"));
        g_ptr_array_add(plan->vfs, vf);
    }
    for (guint i = 1; i < entries->len; i++) {
        JsonObject *e = g_ptr_array_index(entries, i);
        const char *event = orch_json_get_string(e, "event");
        const char *alias = orch_json_get_string(e, "alias");
        const char *xml = orch_json_get_string(e, "xml");

        if (!g_strcmp0(event, "prepare"))
            plan->agent_asked = TRUE;
        if (!g_strcmp0(event, "unplug") && alias) {
            for (guint j = 0; j < plan->vfs->len; j++) {
                OrchJournalVf *vf = g_ptr_array_index(plan->vfs, j);

                if (g_str_equal(vf->alias, alias))
                    vf->unplug_asked = TRUE;
            }
        }
        if (!g_strcmp0(event, "plug") && alias && xml) {
            for (guint j = 0; j < plan->vfs->len; j++) {
                OrchJournalVf *vf = g_ptr_array_index(plan->vfs, j);

                if (g_str_equal(vf->alias, alias)) {
                    g_free(vf->destination_xml);
                    vf->destination_xml = g_strdup(xml);
                }
            }
        }
    }
    return g_steal_pointer(&plan);
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
