/* The peer directory's table and the file it is written to (RUN_DIR/directory, read by the
 * verbs layer's hv-dir.c). Bounded: at most max_entries GID claims; an announcer not heard for
 * AGENT_DIR_EXPIRY_FACTOR of its refresh periods is gone. Conflicts (docs/design.md "Peer
 * directory"): two announcers claiming one GID, the one whose identity changed last wins (its
 * `since`, then its boot id as bytes); a LID claimed by two GIDs of one subnet, the same rule,
 * the loser's LID is written as 0 (unknown); each conflict is logged once. */
#include "guest-agent/agent/directory.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    guint8 boot_id[16]; /* its key in table->announcers */
    AgentDirMsg *msg;   /* the last accepted announcement, holding only its n_ports ports */
    gint64 heard_us;    /* monotonic */
    GList *lru;         /* its link in table->lru (oldest heard first) */
    gboolean client;    /* it sent to this agent as its seed: relayed to */
    struct sockaddr_in from;
} DirAnnouncer;

typedef struct {
    guint8 gid[16];
    DirAnnouncer *winner;
    guint n_claims;
    gboolean conflict_logged;     /* a GID claimed twice */
    gboolean lid_conflict_logged; /* its LID claimed by another GID */
    guint16 lid;                  /* while formatting: its winner's LID */
    guint16 file_lid;             /* and as the file gives it (0: another's now) */
} DirGid;

struct AgentDirTable {
    guint max_claims;
    guint n_claims;
    GHashTable *announcers; /* boot id (16 bytes) -> DirAnnouncer, owned */
    GHashTable *endpoints;  /* "addr port" (owned) -> DirAnnouncer */
    GHashTable *gids;       /* gid (16 bytes) -> DirGid, owned */
    GQueue lru;             /* DirAnnouncer, oldest heard first */
    guint8 own[16];
    gboolean has_own;
    guint n_evicted; /* logged at the first and every 1024th */
};

/* FNV-1a over the 16 bytes from a seed of this run, then mixed (murmur3's finaliser): GIDs and
 * boot ids come from the network, and a fixed hash would let them be chosen to collide. */
static guint dir_bytes16_hash(gconstpointer key)
{
    static guint32 seed;
    const guint8 *p = key;
    guint32 h;

    if (!seed)
        seed = g_random_int() | 1;
    h = 2166136261u ^ seed;
    for (guint i = 0; i < 16; i++)
        h = (h ^ p[i]) * 16777619u;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    return h ^ (h >> 16);
}

static gboolean dir_bytes16_equal(gconstpointer a, gconstpointer b)
{
    return memcmp(a, b, 16) == 0;
}

/* @m with room for its own ports only (a peer has one or two, the struct room for 32). */
static AgentDirMsg *dir_msg_copy(const AgentDirMsg *m)
{
    gsize size = G_STRUCT_OFFSET(AgentDirMsg, ports) + m->n_ports * sizeof(AgentDirPort);

    AgentDirMsg *copy = g_malloc(size);

    memcpy(copy, m, size);
    return copy;
}

static void dir_announcer_free(gpointer data)
{
    DirAnnouncer *a = data;

    g_free(a->msg);
    g_free(a);
}

AgentDirTable *agent_dir_table_new(guint max_entries)
{
    AgentDirTable *t = g_new0(AgentDirTable, 1);

    t->max_claims = max_entries ? MIN(max_entries, AGENT_DIR_ENTRIES_MAX) : AGENT_DIR_ENTRIES_MAX;
    t->announcers =
        g_hash_table_new_full(dir_bytes16_hash, dir_bytes16_equal, NULL, dir_announcer_free);
    t->endpoints = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    t->gids = g_hash_table_new_full(dir_bytes16_hash, dir_bytes16_equal, NULL, g_free);
    g_queue_init(&t->lru);
    return t;
}

void agent_dir_table_free(AgentDirTable *t)
{
    if (!t)
        return;
    g_queue_clear(&t->lru);
    g_hash_table_destroy(t->gids);
    g_hash_table_destroy(t->endpoints);
    g_hash_table_destroy(t->announcers);
    g_free(t);
}

void agent_dir_table_set_own(AgentDirTable *t, const guint8 boot_id[16])
{
    memcpy(t->own, boot_id, 16);
    t->has_own = TRUE;
}

static gboolean dir_is_own(const AgentDirTable *t, const DirAnnouncer *a)
{
    return t->has_own && memcmp(t->own, a->msg->boot_id, 16) == 0;
}

/* Whether @a's claim is more recent than @b's: its identity changed later, else the higher
 * boot id (every agent decides the same, whatever the order the datagrams came in). */
static gboolean dir_newer(const AgentDirMsg *a, const AgentDirMsg *b)
{
    if (a->since_ms != b->since_ms)
        return a->since_ms > b->since_ms;
    return memcmp(a->boot_id, b->boot_id, 16) > 0;
}

static char *dir_gid_text(const guint8 gid[16])
{
    return g_strdup_printf("%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x",
                           gid[0], gid[1], gid[2], gid[3], gid[4], gid[5], gid[6], gid[7], gid[8],
                           gid[9], gid[10], gid[11], gid[12], gid[13], gid[14], gid[15]);
}

static char *dir_endpoint_key(const AgentDirMsg *m)
{
    return g_strdup_printf("%s %u", m->addr, m->port);
}

static void dir_claim(AgentDirTable *t, DirAnnouncer *a, const AgentDirPort *port)
{
    DirGid *g = g_hash_table_lookup(t->gids, port->gid);
    g_autofree char *text = NULL;

    t->n_claims++;
    if (!g) {
        g = g_new0(DirGid, 1);
        memcpy(g->gid, port->gid, 16);
        g->winner = a;
        g->n_claims = 1;
        g_hash_table_insert(t->gids, g->gid, g);
        return;
    }
    g->n_claims++;
    text = dir_gid_text(port->gid);
    if (dir_newer(a->msg, g->winner->msg)) {
        g_warning("directory: GID %s is claimed by the agents at %s port %u and %s port %u: "
                  "%s wins (its identity changed last)",
                  text, g->winner->msg->addr, g->winner->msg->port, a->msg->addr, a->msg->port,
                  a->msg->addr);
        g->winner = a;
        g->conflict_logged = TRUE;
        return;
    }
    if (!g->conflict_logged)
        g_warning("directory: GID %s is claimed by the agents at %s port %u and %s port %u: "
                  "%s keeps it (its identity changed last)",
                  text, g->winner->msg->addr, g->winner->msg->port, a->msg->addr, a->msg->port,
                  g->winner->msg->addr);
    g->conflict_logged = TRUE;
}

/* The newest other claimant of @g, by a scan (conflicts are rare); NULL for none. */
static DirAnnouncer *dir_find_claimant(AgentDirTable *t, const DirGid *g, const DirAnnouncer * not )
{
    DirAnnouncer *best = NULL;

    for (GList *l = t->lru.head; l; l = l->next) {
        DirAnnouncer *o = l->data;

        if (o == not )
            continue;
        for (guint i = 0; i < o->msg->n_ports; i++)
            if (memcmp(o->msg->ports[i].gid, g->gid, 16) == 0 &&
                (!best || dir_newer(o->msg, best->msg)))
                best = o;
    }
    return best;
}

static void dir_unclaim(AgentDirTable *t, DirAnnouncer *a, const AgentDirPort *port)
{
    DirGid *g = g_hash_table_lookup(t->gids, port->gid);

    g_return_if_fail(g != NULL && g->n_claims > 0);
    t->n_claims--;
    if (--g->n_claims == 0) {
        g_hash_table_remove(t->gids, port->gid);
        return;
    }
    if (g->winner == a)
        g->winner = dir_find_claimant(t, g, a);
    if (g->n_claims == 1)
        g->conflict_logged = FALSE;
}

static void dir_announcer_remove(AgentDirTable *t, DirAnnouncer *a)
{
    g_autofree char *key = dir_endpoint_key(a->msg);

    for (guint i = 0; i < a->msg->n_ports; i++)
        dir_unclaim(t, a, &a->msg->ports[i]);
    if (g_hash_table_lookup(t->endpoints, key) == a)
        g_hash_table_remove(t->endpoints, key);
    g_queue_delete_link(&t->lru, a->lru);
    g_hash_table_remove(t->announcers, a->boot_id);
}

/* Makes room for @n more claims: the announcers heard longest ago go (never this agent). */
static void dir_evict(AgentDirTable *t, guint n, const DirAnnouncer *keep)
{
    GList *l = t->lru.head;

    while (l && t->n_claims + n > t->max_claims) {
        DirAnnouncer *a = l->data;

        l = l->next;
        if (dir_is_own(t, a) || a == keep)
            continue;
        if (t->n_evicted++ % 1024 == 0)
            g_message("directory: full (%u GIDs): forgetting the agent heard longest ago (%s "
                      "port %u; %u so far)",
                      t->max_claims, a->msg->addr, a->msg->port, t->n_evicted);
        dir_announcer_remove(t, a);
    }
}

static gboolean dir_same_identity(const AgentDirMsg *a, const AgentDirMsg *b)
{
    if (a->n_ports != b->n_ports || a->port != b->port || !g_str_equal(a->addr, b->addr))
        return FALSE;
    return memcmp(a->ports, b->ports, a->n_ports * sizeof(AgentDirPort)) == 0;
}

/* Another announcer at @m's control endpoint: the same guest's agent restarted (or a stale
 * datagram of its last run). TRUE when @m is older than it (ignore @m), else removes it. */
static gboolean dir_endpoint_taken(AgentDirTable *t, const AgentDirMsg *m)
{
    g_autofree char *key = dir_endpoint_key(m);
    DirAnnouncer *old = g_hash_table_lookup(t->endpoints, key);

    if (!old)
        return FALSE;
    if (dir_newer(old->msg, m))
        return TRUE;
    g_debug("directory: the agent at %s port %u started again", m->addr, m->port);
    dir_announcer_remove(t, old);
    return FALSE;
}

static void dir_index(AgentDirTable *t, DirAnnouncer *a)
{
    g_hash_table_insert(t->endpoints, dir_endpoint_key(a->msg), a);
    for (guint i = 0; i < a->msg->n_ports; i++)
        dir_claim(t, a, &a->msg->ports[i]);
}

static void dir_heard(AgentDirTable *t, DirAnnouncer *a, gint64 now_us,
                      const struct sockaddr_in *from, AgentDirVia via)
{
    a->heard_us = now_us;
    g_queue_unlink(&t->lru, a->lru);
    g_queue_push_tail_link(&t->lru, a->lru);
    if (via == AGENT_DIR_VIA_SEED && from) {
        a->client = TRUE;
        a->from = *from;
    }
}

static AgentDirUpdate dir_update_known(AgentDirTable *t, DirAnnouncer *a, const AgentDirMsg *msg,
                                       gint64 now_us, const struct sockaddr_in *from)
{
    gboolean same = dir_same_identity(a->msg, msg);

    if (msg->seq <= a->msg->seq)
        return AGENT_DIR_UPDATE_STALE;
    dir_heard(t, a, now_us, from, msg->via);
    if (same) {
        a->msg->seq = msg->seq;
        a->msg->since_ms = msg->since_ms;
        a->msg->refresh_s = msg->refresh_s;
        return AGENT_DIR_UPDATE_REFRESH;
    }
    {
        g_autofree char *key = dir_endpoint_key(a->msg);

        for (guint i = 0; i < a->msg->n_ports; i++)
            dir_unclaim(t, a, &a->msg->ports[i]);
        if (g_hash_table_lookup(t->endpoints, key) == a)
            g_hash_table_remove(t->endpoints, key);
    }
    dir_evict(t, msg->n_ports, a);
    g_free(a->msg);
    a->msg = dir_msg_copy(msg);
    dir_index(t, a);
    return AGENT_DIR_UPDATE_CHANGED;
}

AgentDirUpdate agent_dir_table_update(AgentDirTable *t, const AgentDirMsg *msg, gint64 now_us,
                                      const struct sockaddr_in *from)
{
    DirAnnouncer *a;

    g_return_val_if_fail(t != NULL && msg != NULL, AGENT_DIR_UPDATE_STALE);
    a = g_hash_table_lookup(t->announcers, msg->boot_id);
    if (a)
        return dir_update_known(t, a, msg, now_us, from);
    if (dir_endpoint_taken(t, msg))
        return AGENT_DIR_UPDATE_STALE;
    dir_evict(t, msg->n_ports, NULL);
    if (t->n_claims + msg->n_ports > t->max_claims)
        return AGENT_DIR_UPDATE_STALE; /* only this agent's own claims are left */
    a = g_new0(DirAnnouncer, 1);
    memcpy(a->boot_id, msg->boot_id, 16);
    a->msg = dir_msg_copy(msg);
    a->lru = g_list_alloc();
    a->lru->data = a;
    g_queue_push_tail_link(&t->lru, a->lru);
    g_hash_table_insert(t->announcers, a->boot_id, a);
    dir_heard(t, a, now_us, from, msg->via);
    dir_index(t, a);
    return AGENT_DIR_UPDATE_CHANGED;
}

guint agent_dir_table_expire(AgentDirTable *t, gint64 now_us)
{
    guint n = 0;
    GList *l = t->lru.head;

    while (l) {
        DirAnnouncer *a = l->data;
        gint64 ttl = (gint64)a->msg->refresh_s * AGENT_DIR_EXPIRY_FACTOR * G_USEC_PER_SEC;

        l = l->next;
        if (dir_is_own(t, a) || now_us - a->heard_us <= ttl)
            continue;
        if (n < 8)
            g_message("directory: the agent at %s port %u was not heard for %u s: forgotten",
                      a->msg->addr, a->msg->port, a->msg->refresh_s * AGENT_DIR_EXPIRY_FACTOR);
        dir_announcer_remove(t, a);
        n++;
    }
    if (n > 8)
        g_message("directory: %u agents not heard for three refreshes were forgotten", n);
    return n;
}

guint agent_dir_table_n_announcers(const AgentDirTable *t)
{
    return g_hash_table_size(t->announcers);
}

gboolean agent_dir_table_knows(AgentDirTable *t, const guint8 boot_id[16])
{
    return g_hash_table_contains(t->announcers, boot_id);
}

guint agent_dir_table_n_claims(const AgentDirTable *t)
{
    return t->n_claims;
}

static const AgentDirPort *dir_port_of(const DirAnnouncer *a, const guint8 gid[16])
{
    for (guint i = 0; i < a->msg->n_ports; i++)
        if (memcmp(a->msg->ports[i].gid, gid, 16) == 0)
            return &a->msg->ports[i];
    return NULL;
}

/* The live GIDs (their winner's claim), sorted by GID. */
static gint dir_gid_cmp(gconstpointer a, gconstpointer b)
{
    return memcmp((*(DirGid *const *)a)->gid, (*(DirGid *const *)b)->gid, 16);
}

static GPtrArray *dir_gids_sorted(AgentDirTable *t)
{
    GPtrArray *v = g_ptr_array_sized_new(g_hash_table_size(t->gids));
    GHashTableIter it;
    gpointer value;

    g_hash_table_iter_init(&it, t->gids);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        DirGid *g = value;

        if (!g->winner)
            continue;
        g->lid = dir_port_of(g->winner, g->gid)->lid;
        g_ptr_array_add(v, g);
    }
    g_ptr_array_sort(v, dir_gid_cmp);
    return v;
}

/* By subnet prefix (the GID's first 8 bytes) and LID, the most recent claim first. */
static gint dir_lid_cmp(gconstpointer pa, gconstpointer pb)
{
    const DirGid *a = *(DirGid *const *)pa, *b = *(DirGid *const *)pb;
    int c = memcmp(a->gid, b->gid, 8);

    if (c)
        return c;
    if (a->lid != b->lid)
        return a->lid < b->lid ? -1 : 1;
    if (a->winner == b->winner)
        return memcmp(a->gid, b->gid, 16);
    return dir_newer(a->winner->msg, b->winner->msg) ? -1 : 1;
}

static void dir_lid_lost(DirGid *g, const DirGid *w)
{
    g_autofree char *mine = dir_gid_text(g->gid);
    g_autofree char *theirs = dir_gid_text(w->gid);

    if (g->lid_conflict_logged)
        return;
    g_warning("directory: LID %u is claimed by GIDs %s (agent %s) and %s (agent %s): %s claimed "
              "it last; %s's LID is unknown until it announces again",
              g->lid, mine, g->winner->msg->addr, theirs, w->winner->msg->addr, theirs, mine);
    g->lid_conflict_logged = TRUE;
}

/* Sets each GID's file_lid: its LID, or 0 when another GID of its subnet claimed that LID
 * more recently (logged once per conflict). */
static void dir_lids_resolve(GPtrArray *gids)
{
    g_autoptr(GPtrArray) v = g_ptr_array_sized_new(gids->len);

    for (guint i = 0; i < gids->len; i++) {
        DirGid *g = gids->pdata[i];

        g->file_lid = g->lid;
        if (g->lid)
            g_ptr_array_add(v, g);
    }
    g_ptr_array_sort(v, dir_lid_cmp);
    for (guint i = 0; i < v->len; i++) {
        DirGid *g = v->pdata[i], *w = i ? v->pdata[i - 1] : NULL;

        if (w && w->lid == g->lid && memcmp(w->gid, g->gid, 8) == 0) {
            if (w->file_lid == 0) /* the winner of the group is further up */
                for (guint k = i - 1; k > 0 && ((DirGid *)v->pdata[k])->file_lid == 0; k--)
                    w = v->pdata[k - 1];
            dir_lid_lost(g, w);
            g->file_lid = 0;
        } else {
            g->lid_conflict_logged = FALSE;
        }
    }
}

gboolean agent_dir_table_lookup(AgentDirTable *t, const guint8 gid[16], guint16 *ret_lid,
                                const char **ret_addr, guint16 *ret_port)
{
    DirGid *g = g_hash_table_lookup(t->gids, gid);
    g_autoptr(GPtrArray) all = NULL;

    if (!g || !g->winner)
        return FALSE;
    all = dir_gids_sorted(t);
    dir_lids_resolve(all);
    *ret_lid = g->file_lid;
    *ret_addr = g->winner->msg->addr;
    *ret_port = g->winner->msg->port;
    return TRUE;
}

static void dir_append_uint(GString *s, guint v)
{
    char buf[12];
    int n = 0;

    do
        buf[n++] = (char)('0' + v % 10);
    while ((v /= 10) && n < 11);
    while (n > 0)
        g_string_append_c(s, buf[--n]);
}

GString *agent_dir_table_format(AgentDirTable *t)
{
    static const char hex[] = "0123456789abcdef";
    g_autoptr(GPtrArray) sorted = dir_gids_sorted(t);
    GString *s = g_string_sized_new(64 + 96 * (gsize)sorted->len);

    dir_lids_resolve(sorted);
    g_string_append(s, AGENT_DIR_FILE_HEADER);
    for (guint i = 0; i < sorted->len; i++) {
        DirGid *g = sorted->pdata[i];

        for (guint k = 0; k < 16; k++) {
            g_string_append_c(s, hex[g->gid[k] >> 4]);
            g_string_append_c(s, hex[g->gid[k] & 0xf]);
        }
        g_string_append_c(s, ' ');
        dir_append_uint(s, g->file_lid);
        g_string_append_c(s, ' ');
        g_string_append(s, g->winner->msg->addr);
        g_string_append_c(s, ' ');
        dir_append_uint(s, g->winner->msg->port);
        g_string_append_c(s, '\n');
    }
    return s;
}

gboolean agent_dir_file_write(const char *dir, const GString *text, GError **error)
{
    g_autofree char *path = g_build_filename(dir, AGENT_DIR_FILE, NULL);
    g_autofree char *tmp = g_build_filename(dir, "." AGENT_DIR_FILE ".XXXXXX", NULL);
    int fd;
    gsize done = 0;

    if (g_mkdir_with_parents(dir, 0755) < 0) {
        hm_set_error_errno(error, errno, "Cannot create '%s'", dir);
        return FALSE;
    }
    fd = g_mkstemp_full(tmp, O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) {
        hm_set_error_errno(error, errno, "Cannot create a file in '%s'", dir);
        return FALSE;
    }
    while (done < text->len) {
        ssize_t n = write(fd, text->str + done, text->len - done);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (gsize)n;
    }
    /* the agent runs with umask 0077 (the unit): the layers of every user read the file */
    if (done < text->len || fchmod(fd, 0644) < 0) {
        int saved = done < text->len ? (errno ? errno : EIO) : errno;

        close(fd);
        g_unlink(tmp);
        hm_set_error_errno(error, saved, "Cannot write '%s'", tmp);
        return FALSE;
    }
    if (close(fd) < 0 || g_rename(tmp, path) < 0) {
        int saved = errno;

        g_unlink(tmp);
        hm_set_error_errno(error, saved, "Cannot write '%s'", path);
        return FALSE;
    }
    return TRUE;
}

void agent_dir_table_foreach(AgentDirTable *t, void (*func)(const AgentDirMsg *msg, gpointer data),
                             gpointer data)
{
    for (GList *l = t->lru.head; l; l = l->next)
        func(((DirAnnouncer *)l->data)->msg, data);
}

void agent_dir_table_foreach_client(AgentDirTable *t, const guint8 *except,
                                    void (*func)(const struct sockaddr_in *to, gpointer data),
                                    gpointer data)
{
    guint n = 0;

    /* the most recently heard first */
    for (GList *l = t->lru.tail; l && n < AGENT_DIR_CLIENTS_MAX; l = l->prev) {
        DirAnnouncer *a = l->data;

        if (!a->client || (except && memcmp(except, a->msg->boot_id, 16) == 0))
            continue;
        func(&a->from, data);
        n++;
    }
}
