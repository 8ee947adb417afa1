/* hotmig-agent: the peer directory (docs/design.md "Peer directory", docs/protocol.md
 * "Directory announcements"). The agents of the guests on one control network tell each other
 * who is behind each RDMA port GID (its LID, the control address and peer port of the agent
 * that brokers for it) over UDP multicast (or unicast seeds), and each writes the table for
 * the verbs layers of its guest to RUN_DIR/directory. Three files, bottom to top:
 *   dir-msg.c    the announcement datagram: one strict parser (fuzzed) and its formatter
 *   dir-table.c  the bounded table (expiry, conflicts) and the file it is written to
 *   directory.c  the service: the guest's own identity, the socket, timers, seeds
 * Reachable from tests only. */
#pragma once

#include <glib.h>
#include <netinet/in.h>

#include "guest-agent/agent/agent-priv.h"

G_BEGIN_DECLS

#define AGENT_DIR_GROUP_DEFAULT "239.255.74.75:7476" /* --directory */
#define AGENT_DIR_REFRESH_S_DEFAULT 10               /* --directory-refresh */
#define AGENT_DIR_REFRESH_S_MAX 3600
#define AGENT_DIR_EXPIRY_FACTOR 3   /* an announcer not heard for 3 refreshes is gone */
#define AGENT_DIR_MSG_MAX 1472      /* bytes of one datagram (a 1500-byte IPv4 frame) */
#define AGENT_DIR_PORTS_MAX 32      /* (GID, LID) pairs in one announcement */
#define AGENT_DIR_ENTRIES_MAX 65536 /* GID claims in the table; the oldest heard go first */
#define AGENT_DIR_SEEDS_MAX 16      /* --directory-seeds */
#define AGENT_DIR_CLIENTS_MAX 1024  /* agents a seed relays to */
#define AGENT_DIR_WRITE_MIN_MS 200  /* between two writes of the file */
#define AGENT_DIR_REPEAT_MS 1000    /* a changed identity is announced again after this */
#define AGENT_DIR_FILE "directory"  /* RUN_DIR/directory, read by the layer (hv-dir.c) */
#define AGENT_DIR_FILE_HEADER "# hotmig-directory 1\n"
#define AGENT_DIR_ADDR_MAX 46 /* INET6_ADDRSTRLEN */

/* ---- the announcement (dir-msg.c) -------------------------------------------------------- */

/* How an announcement travelled: sent by its agent to the group, sent by its agent to a seed
 * (which then relays it), relayed by a seed (never relayed again). */
typedef enum {
    AGENT_DIR_VIA_GROUP,
    AGENT_DIR_VIA_SEED,
    AGENT_DIR_VIA_RELAY,
    AGENT_DIR_VIA_LAST,
} AgentDirVia;
HM_ENUM_DECL(agent_dir_via, AgentDirVia)

typedef struct {
    guint8 gid[16]; /* network order, never all zero */
    guint16 lid;    /* 0: none (RoCE, or not known) */
} AgentDirPort;

typedef struct {
    AgentDirVia via;
    guint8 boot_id[16]; /* random, new at each start of the announcing agent */
    guint64 since_ms;   /* its wall clock when its identity last changed (ms since 1970) */
    guint64 seq;        /* 1.. , one more at each datagram it sends */
    guint refresh_s;    /* it announces at least this often (1..AGENT_DIR_REFRESH_S_MAX) */
    char addr[AGENT_DIR_ADDR_MAX]; /* its control address, canonical text (IPv4 or IPv6) */
    guint16 port;                  /* its peer port */
    guint n_ports;
    AgentDirPort ports[AGENT_DIR_PORTS_MAX]; /* distinct GIDs */
} AgentDirMsg;

/* Parses one datagram (@len bytes, hostile) into @ret. FALSE with HM_COMMON_ERROR_INVALID (or
 * _TOO_LARGE) naming the field; @ret untouched then. */
gboolean agent_dir_msg_parse(const char *data, gsize len, AgentDirMsg *ret, GError **error);
/* Formats @msg (newline included) into @buf: the length, or 0 when it does not fit. */
gsize agent_dir_msg_format(const AgentDirMsg *msg, char *buf, gsize size);

/* ---- the table (dir-table.c) ------------------------------------------------------------- */

typedef struct AgentDirTable AgentDirTable;

typedef enum {
    AGENT_DIR_UPDATE_STALE,   /* not newer than what the table has: ignored */
    AGENT_DIR_UPDATE_REFRESH, /* the same identity heard again */
    AGENT_DIR_UPDATE_CHANGED, /* a new announcer or a changed identity */
} AgentDirUpdate;

/* At most @max_entries GID claims (AGENT_DIR_ENTRIES_MAX). Owned. */
AgentDirTable *agent_dir_table_new(guint max_entries);
void agent_dir_table_free(AgentDirTable *table);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AgentDirTable, agent_dir_table_free)

/* The announcer that is never evicted nor expired: this agent. */
void agent_dir_table_set_own(AgentDirTable *table, const guint8 boot_id[16]);
/* Takes @msg, heard at @now_us (monotonic) from @from (may be NULL; kept for announcers that
 * use this agent as their seed). */
AgentDirUpdate agent_dir_table_update(AgentDirTable *table, const AgentDirMsg *msg, gint64 now_us,
                                      const struct sockaddr_in *from);
/* Removes the announcers not heard for AGENT_DIR_EXPIRY_FACTOR times their refresh: how many. */
guint agent_dir_table_expire(AgentDirTable *table, gint64 now_us);
guint agent_dir_table_n_announcers(const AgentDirTable *table);
/* Whether the table holds the announcer with @boot_id. */
gboolean agent_dir_table_knows(AgentDirTable *table, const guint8 boot_id[16]);
guint agent_dir_table_n_claims(const AgentDirTable *table);

/* What the file says of @gid: TRUE and *ret_lid (0 when the LID is another's now) and the
 * agent's address (borrowed) and port; FALSE when no live announcer claims it. */
gboolean agent_dir_table_lookup(AgentDirTable *table, const guint8 gid[16], guint16 *ret_lid,
                                const char **ret_addr, guint16 *ret_port);

/* The file's text: the header, then one line per GID (sorted) of its winning claimant. */
GString *agent_dir_table_format(AgentDirTable *table);
/* Writes @text to @dir/AGENT_DIR_FILE atomically (a temporary file in @dir, renamed), mode
 * 0644; @dir is created if missing. */
gboolean agent_dir_file_write(const char *dir, const GString *text, GError **error);

/* Calls @func with the last announcement of each live announcer (borrowed; it holds only its
 * n_ports ports: read it, do not copy the struct whole). */
void agent_dir_table_foreach(AgentDirTable *table,
                             void (*func)(const AgentDirMsg *msg, gpointer data), gpointer data);
/* Calls @func with the address of each live announcer that sent to this agent as its seed,
 * except @except (may be NULL), at most AGENT_DIR_CLIENTS_MAX of them. */
void agent_dir_table_foreach_client(AgentDirTable *table, const guint8 *except,
                                    void (*func)(const struct sockaddr_in *to, gpointer data),
                                    gpointer data);

/* ---- the service (directory.c) ----------------------------------------------------------- */

typedef struct {
    const char *group;          /* "ADDR:PORT": a multicast group to join and announce to; a
                                 * unicast address is the local address to bind (seeds only) */
    const char *seeds;          /* "ADDR[:PORT],...", NULL for none; the port defaults to the
                                 * group's */
    const char *peer_listen;    /* the agent's --peer-listen ADDR:PORT: announced */
    const char *run_dir;        /* where the file is written */
    guint refresh_s;            /* 0: AGENT_DIR_REFRESH_S_DEFAULT */
    guint max_entries;          /* 0: AGENT_DIR_ENTRIES_MAX */
    const AgentVerbsOps *verbs; /* the guest's RDMA ports (list_devices, port_watch_*) */
    gpointer verbs_data;
} AgentDirConfig;

typedef struct AgentDir AgentDir;

/* Starts the directory in the thread-default main context: announces at once. Owned; NULL
 * with @error (HM_COMMON_ERROR_INVALID for a bad option, naming it). */
AgentDir *agent_dir_new(const AgentDirConfig *config, GError **error);
void agent_dir_free(AgentDir *dir);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AgentDir, agent_dir_free)

/* The RDMA devices changed (a kernel uevent): the identity is read again soon. */
void agent_dir_identity_changed(AgentDir *dir);
/* Borrowed; the table, for tests and the inventory. */
AgentDirTable *agent_dir_get_table(AgentDir *dir);
/* The local UDP port it receives on (tests bind port 0). */
guint16 agent_dir_get_port(const AgentDir *dir);

G_END_DECLS
