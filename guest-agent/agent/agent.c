/* The agent core: the host command dispatcher, the process registry on the Unix socket and
 * the prepare/resume operations. Everything runs in one GLib main context; waits are GLib
 * sources with deadlines. */
#include "guest-agent/agent/agent-priv.h"
#include "guest-agent/agent/device-users.h"
#include "guest-agent/agent/job.h"
#include "guest-agent/agent/standby.h"

#include <errno.h>
#include <gio/gio.h>
#include <glib-unix.h>
#include <glib/gstdio.h>
#include <grp.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

typedef enum {
    AGENT_OP_PREPARE,
    AGENT_OP_RESUME,
    AGENT_OP_ABORT, /* a resume that prefers the device of the prepare */
} AgentOpKind;

static const char *const agent_op_names[] = {"prepare", "resume", "abort"};

/* What a reply says about one process: a copy, so it survives the process leaving. */
typedef struct {
    gint pid;
    char *name;
    AgentProcMode mode;
    char *error; /* NULL when it succeeded */
    /* it said what the standby path did (STATS) before this answer */
    gboolean has_stats;
    AgentStandbyStats stats;
} AgentProcInfo;

typedef struct {
    Agent *agent;
    guint watch_id;
    int fd;
    AgentFramer framer;
    gboolean registered;
    gint pid;
    pid_t cred_pid; /* who connected, as the kernel says (SO_PEERCRED) */
    uid_t cred_uid;
    AgentProcMode mode;
    char *name;
    guint64 pending_seq; /* request sent and not answered yet; 0 for none */
    gboolean pending_is_resume;
    gboolean quiesced;
    char *error; /* why the last request failed */
    char *drop_reason;
    GArray *peers;       /* AgentPeerRef: whom it talks to over RDMA (PEER), distinct */
    guint peers_dropped; /* PEERs beyond AGENT_PEERS_MAX */
    GPtrArray *refused;  /* char *: calls a migration cannot carry (REFUSED), distinct */
    gboolean standby_lease; /* a lease on the standby device (STANDBY), not a registration */
    /* the last STATS since the last answer or request: the next answer's, if it answers the
     * request under way (agent_proc_answer()); dropped otherwise */
    gboolean has_stats;
    AgentStandbyStats stats;
} AgentProc;

typedef struct {
    guint8 gid[16];
    guint32 qpn;
} AgentPeerRef;

typedef struct {
    AgentOpKind kind;
    guint64 seq;
    guint timeout_ms;
    HmDeadline deadline;
    HmDeadline device_deadline; /* resume: stop looking for a device then */
    guint device_wait_ms;
    gboolean waiting_device;
    char *device;
    char *device_error;
    guint timer_id;
    guint wake_id;              /* resume: an idle look asked by an event */
    AgentPortWatch *port_watch; /* resume: the ports of the devices present, or NULL */
    guint port_watch_id;        /* its fd source */
    gboolean port_watch_stale;  /* the devices changed since it was opened */
    void (*port_watch_free)(AgentPortWatch *watch);
    GPtrArray *waiting; /* AgentProc, borrowed */
    GPtrArray *done;    /* AgentProcInfo */
    GPtrArray *failed;  /* AgentProcInfo */
    gboolean reply_dropped;
} AgentOp;

struct Agent {
    const AgentVerbsOps *verbs;
    gpointer verbs_data;
    AgentReplyFunc reply_func;
    gpointer reply_data;
    guint poll_ms;
    gboolean device_events; /* agent_devices_changed() is called when devices come and go */
    AgentFramer host;
    gint protocol;    /* negotiated with info; AGENT_PROTOCOL_MIN until then */
    char *old_device; /* the active device when the last prepare began; NULL if none */
    AgentState state;
    guint64 next_seq;
    AgentOp *op;
    GPtrArray *procs; /* AgentProc, owned; registered or not */
    int listen_fd;
    guint listen_id;
    char *socket_path;
    char *proc_root; /* NULL: "/proc" (agent_set_proc_root()) */

    /* --standby (standby.h): made at prepare, removed at resume; NULL: none */
    AgentStandby *standby;
    GThread *standby_down; /* removing it (the kernel waits for the processes that opened it) */
    gint standby_removing; /* atomic: standby_down still runs */
    guint standby_leases;  /* connections holding it (STANDBY): it stays while one does */
    gboolean no_standby_move; /* this guest's move (prepare to resume) asked for none */
};

static void agent_op_check_done(Agent *agent);
static void agent_standby_remove(Agent *agent);
static gboolean agent_proc_standby(AgentProc *proc);

/* ---- small helpers ----------------------------------------------------------------------- */

static void agent_proc_info_free(AgentProcInfo *info)
{
    if (!info)
        return;
    g_free(info->name);
    g_free(info->error);
    g_free(info);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AgentProcInfo, agent_proc_info_free)

/* @stats: what the standby path did (its answer's STATS), or NULL */
static AgentProcInfo *agent_proc_info_new(const AgentProc *proc, const char *error,
                                          const AgentStandbyStats *stats)
{
    AgentProcInfo *info = g_new0(AgentProcInfo, 1);

    info->pid = proc->pid;
    info->name = g_strdup(proc->name);
    info->mode = proc->mode;
    info->error = g_strdup(error);
    info->has_stats = stats != NULL;
    if (stats)
        info->stats = *stats;
    return info;
}

static void agent_json_add_proc(JsonBuilder *b, gint pid, const char *name, AgentProcMode mode,
                                const char *error)
{
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "pid");
    json_builder_add_int_value(b, pid);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, name);
    json_builder_set_member_name(b, "mode");
    json_builder_add_string_value(b, agent_proc_mode_to_string(mode));
    if (error) {
        json_builder_set_member_name(b, "error");
        json_builder_add_string_value(b, error);
    }
}

/* "standby": what the standby path did for a process in this prepare or resume (STATS) */
static void agent_json_add_stats(JsonBuilder *b, const AgentStandbyStats *st)
{
    const char *const names[] = {"switched", "paused", "sends", "receives", "ms"};
    const gint64 values[] = {st->switched, st->paused, (gint64)st->sends, (gint64)st->recvs,
                             st->ms};

    json_builder_set_member_name(b, "standby");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "used");
    json_builder_add_boolean_value(b, st->used);
    for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
        json_builder_set_member_name(b, names[i]);
        json_builder_add_int_value(b, values[i]);
    }
    json_builder_end_object(b);
}

static void agent_json_add_infos(JsonBuilder *b, const char *member, GPtrArray *infos)
{
    json_builder_set_member_name(b, member);
    json_builder_begin_array(b);
    for (guint i = 0; i < infos->len; i++) {
        const AgentProcInfo *info = infos->pdata[i];

        agent_json_add_proc(b, info->pid, info->name, info->mode, info->error);
        if (info->has_stats)
            agent_json_add_stats(b, &info->stats);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

static void agent_send_raw(Agent *agent, const char *data, gsize len)
{
    if (agent->reply_func)
        agent->reply_func(data, len, agent->reply_data);
}

/* Sends {"return": <value built by the caller>} and frees the builder's result. */
static void agent_send_node(Agent *agent, JsonNode *root)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autofree char *text = NULL;
    g_autoptr(GString) line = NULL;

    json_generator_set_root(gen, root);
    text = json_generator_to_data(gen, NULL);
    line = g_string_new(text);
    g_string_append_c(line, '\n');
    agent_send_raw(agent, line->str, line->len);
}

static void agent_send_error(Agent *agent, AgentError code, const char *desc)
{
    g_autoptr(JsonBuilder) b = json_builder_new_immutable();
    g_autoptr(JsonNode) root = NULL;
    g_autofree char *valid = g_utf8_make_valid(desc, -1);

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "error");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "class");
    json_builder_add_string_value(b, agent_error_class_to_string(code));
    json_builder_set_member_name(b, "desc");
    json_builder_add_string_value(b, valid);
    json_builder_end_object(b);
    json_builder_end_object(b);
    root = json_builder_get_root(b);
    agent_send_node(agent, root);
}

/* Starts {"return":{ ... the caller adds members and calls agent_send_return_end(). */
static JsonBuilder *agent_return_begin(void)
{
    JsonBuilder *b = json_builder_new_immutable();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "return");
    json_builder_begin_object(b);
    return b;
}

static void agent_return_end(Agent *agent, JsonBuilder *b)
{
    g_autoptr(JsonNode) root = NULL;

    json_builder_end_object(b);
    json_builder_end_object(b);
    root = json_builder_get_root(b);
    agent_send_node(agent, root);
}

/* ---- processes --------------------------------------------------------------------------- */

static void agent_proc_free(AgentProc *proc)
{
    if (!proc)
        return;
    if (proc->watch_id)
        g_source_remove(proc->watch_id);
    if (proc->fd >= 0)
        close(proc->fd);
    agent_framer_clear(&proc->framer);
    g_free(proc->name);
    g_free(proc->error);
    g_free(proc->drop_reason);
    if (proc->peers)
        g_array_unref(proc->peers);
    if (proc->refused)
        g_ptr_array_unref(proc->refused);
    g_free(proc);
}

/* Sends one line to a process. Never blocks: a process that does not read its socket fails. */
static gboolean agent_proc_send(AgentProc *proc, const char *line, GError **error)
{
    gsize len = strlen(line);
    gsize off = 0;

    while (off < len) {
        ssize_t n = send(proc->fd, line + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            hm_set_error_errno(error, errno, "Cannot write to process %d", proc->pid);
            return FALSE;
        }
        off += (gsize)n;
    }
    return TRUE;
}

/* Records that @proc answered (or failed, or left) the operation's request; @stats: the
 * answer's STATS, or NULL. */
static void agent_op_settle(Agent *agent, AgentProc *proc, const char *error,
                            const AgentStandbyStats *stats)
{
    AgentOp *op = agent->op;

    if (!op || !g_ptr_array_remove(op->waiting, proc))
        return;
    g_ptr_array_add(error ? op->failed : op->done, agent_proc_info_new(proc, error, stats));
}

/* Sends QUIESCE or RESUME with @seq. On failure the process is settled as failed. */
static gboolean agent_proc_request(Agent *agent, AgentProc *proc, gboolean resume, guint64 seq,
                                   const char *device)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *line = NULL;

    if (resume)
        line = g_strdup_printf("RESUME %" G_GUINT64_FORMAT " %s\n", seq,
                               device && *device ? device : "-");
    else
        line = g_strdup_printf("QUIESCE %" G_GUINT64_FORMAT "\n", seq);
    proc->pending_seq = seq;
    proc->pending_is_resume = resume;
    proc->has_stats = FALSE;
    if (!agent_proc_send(proc, line, &error)) {
        g_warning("process request failed: pid=%d name='%s' request=%s error='%s'", proc->pid,
                  proc->name, resume ? "RESUME" : "QUIESCE", error->message);
        proc->pending_seq = 0;
        g_free(proc->error);
        proc->error = g_strdup(error->message);
        agent_op_settle(agent, proc, error->message, NULL);
        return FALSE;
    }
    return TRUE;
}

static void agent_proc_drop(AgentProc *proc, const char *reason)
{
    Agent *agent = proc->agent;

    if (proc->registered)
        g_message("process gone: pid=%d name='%s' reason='%s'", proc->pid, proc->name, reason);
    else if (!proc->standby_lease)
        g_debug("unregistered connection gone: %s", reason);
    if (proc->standby_lease && --agent->standby_leases == 0) {
        g_message("standby lease released: pid=%d, none left", (int)proc->cred_pid);
        if (agent->state != AGENT_STATE_PREPARED) /* a move's own resume removes it otherwise */
            agent_standby_remove(agent);
    }
    if (agent->op) {
        g_autofree char *error = g_strdup_printf("disconnected: %s", reason);

        agent_op_settle(agent, proc, error, NULL);
    }
    g_ptr_array_remove(agent->procs, proc); /* frees it */
    agent_op_check_done(agent);
}

static gboolean agent_proc_hello(AgentProc *proc, const AgentProcMsg *msg)
{
    Agent *agent = proc->agent;

    if (proc->registered) {
        proc->drop_reason = g_strdup("second HELLO");
        return FALSE;
    }
    proc->registered = TRUE;
    /* The pid is the kernel's (SO_PEERCRED; issue 28, finding 5), not the client's word: any
     * user who can reach the socket could otherwise pose as another process (answer its
     * quiesce, have its environment read for its job). Only a client of the agent's own user
     * (root in a guest, who could ptrace any process anyway) may register another one. A pid
     * that differs from the kernel's is what a client in another pid namespace sees. */
    if (msg->pid != proc->cred_pid && proc->cred_uid != geteuid()) {
        g_message("process HELLO names pid %d, the connection is pid %d (uid %u): pid %d taken",
                  msg->pid, (int)proc->cred_pid, (unsigned)proc->cred_uid, (int)proc->cred_pid);
        proc->pid = (gint)proc->cred_pid;
    } else {
        proc->pid = msg->pid;
    }
    proc->mode = msg->mode;
    g_free(proc->name);
    proc->name = g_strdup(msg->name);
    g_message("process registered: pid=%d name='%s' mode=%s version=%s", proc->pid, proc->name,
              agent_proc_mode_to_string(proc->mode), msg->version);

    if (agent->state == AGENT_STATE_PREPARED) {
        /* Quiesce it at once; while a prepare runs it takes part in it. */
        gboolean in_op = agent->op && agent->op->kind == AGENT_OP_PREPARE;
        guint64 seq = in_op ? agent->op->seq : agent->next_seq++;

        g_message("process registered while prepared, quiescing: pid=%d seq=%" G_GUINT64_FORMAT,
                  proc->pid, seq);
        if (in_op)
            g_ptr_array_add(agent->op->waiting, proc);
        agent_proc_request(agent, proc, FALSE, seq, NULL);
        agent_op_check_done(agent);
    }
    return TRUE;
}

static void agent_proc_answer(AgentProc *proc, const AgentProcMsg *msg)
{
    Agent *agent = proc->agent;
    const char *request = proc->pending_is_resume ? "RESUME" : "QUIESCE";
    AgentStandbyStats stats = proc->stats;
    const AgentStandbyStats *with = proc->has_stats ? &stats : NULL;

    proc->has_stats = FALSE; /* a STATS goes with the answer that follows it, or with none */
    if (msg->seq != proc->pending_seq) {
        g_debug("ignoring stale answer from pid %d: seq %" G_GUINT64_FORMAT, proc->pid, msg->seq);
        return;
    }
    proc->pending_seq = 0;
    g_clear_pointer(&proc->error, g_free);
    if (msg->kind == AGENT_MSG_DONE) {
        proc->quiesced = !proc->pending_is_resume;
        g_message("process answered: pid=%d name='%s' request=%s seq=%" G_GUINT64_FORMAT
                  " result=done",
                  proc->pid, proc->name, request, msg->seq);
        agent_op_settle(agent, proc, NULL, with);
    } else {
        proc->error = g_strdup(msg->reason);
        g_warning("process answered: pid=%d name='%s' request=%s seq=%" G_GUINT64_FORMAT
                  " result=failed reason='%s'",
                  proc->pid, proc->name, request, msg->seq, msg->reason);
        agent_op_settle(agent, proc, msg->reason, with);
    }
    agent_op_check_done(agent);
}

/* PEER and REFUSED: recorded (distinct, bounded) for inventory. */
static void agent_proc_note(AgentProc *proc, const AgentProcMsg *msg)
{
    if (msg->kind == AGENT_MSG_PEER) {
        AgentPeerRef ref = {.qpn = msg->qpn};

        memcpy(ref.gid, msg->gid, sizeof(ref.gid));
        if (!proc->peers)
            proc->peers = g_array_new(FALSE, FALSE, sizeof(AgentPeerRef));
        for (guint i = 0; i < proc->peers->len; i++)
            if (memcmp(&g_array_index(proc->peers, AgentPeerRef, i), &ref, sizeof(ref)) == 0)
                return;
        if (proc->peers->len >= AGENT_PEERS_MAX) {
            proc->peers_dropped++;
            return;
        }
        g_array_append_val(proc->peers, ref);
        return;
    }
    if (!proc->refused)
        proc->refused = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < proc->refused->len; i++)
        if (g_str_equal(proc->refused->pdata[i], msg->call))
            return;
    if (proc->refused->len >= AGENT_REFUSED_MAX)
        return;
    g_warning("process pid=%d name='%s' used %s: a migration cannot carry it", proc->pid,
              proc->name, msg->call);
    g_ptr_array_add(proc->refused, g_strdup(msg->call));
}

static gboolean agent_proc_frame(AgentFrameEvent event, const char *line, gsize len,
                                 gpointer user_data)
{
    AgentProc *proc = user_data;
    g_autoptr(GError) error = NULL;
    AgentProcMsg msg;

    if (event == AGENT_FRAME_OVERSIZE) {
        proc->drop_reason = g_strdup_printf("line longer than %d bytes", AGENT_PROC_LINE_MAX);
        return FALSE;
    }
    if (event != AGENT_FRAME_LINE)
        return TRUE;
    if (!agent_proc_msg_parse(line, len, &msg, &error)) {
        proc->drop_reason = g_strdup_printf("bad message: %s", error->message);
        return FALSE;
    }
    if (proc->standby_lease) {
        proc->drop_reason = g_strdup("a message on a standby lease");
        return FALSE;
    }
    if (msg.kind == AGENT_MSG_STANDBY && !proc->registered)
        return agent_proc_standby(proc);
    if (msg.kind == AGENT_MSG_HELLO)
        return agent_proc_hello(proc, &msg);
    if (!proc->registered) {
        proc->drop_reason = g_strdup("message before HELLO");
        return FALSE;
    }
    if (msg.kind == AGENT_MSG_PEER || msg.kind == AGENT_MSG_REFUSED) {
        agent_proc_note(proc, &msg);
        return TRUE;
    }
    if (msg.kind == AGENT_MSG_STATS) {
        proc->has_stats = TRUE; /* for the answer that follows (agent_proc_answer()) */
        proc->stats = msg.stats;
        return TRUE;
    }
    agent_proc_answer(proc, &msg);
    return TRUE;
}

static gboolean agent_proc_io(int fd, GIOCondition condition, gpointer user_data)
{
    AgentProc *proc = user_data;
    gsize total = 0;

    /* Read what is there, at most 64 KiB per turn so one process cannot starve the others. */
    while (total < 64 * 1024) {
        guint8 buf[4096];
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (condition & (G_IO_HUP | G_IO_ERR))
                break;
            return G_SOURCE_CONTINUE;
        }
        if (n < 0) {
            proc->drop_reason = g_strdup_printf("read error: %s", g_strerror(errno));
            goto drop;
        }
        if (n == 0)
            break;
        total += (gsize)n;
        if (!agent_framer_feed(&proc->framer, buf, (gsize)n, agent_proc_frame, proc))
            goto drop;
    }
    if (total >= 64 * 1024)
        return G_SOURCE_CONTINUE;

drop:
    proc->watch_id = 0; /* removed by returning G_SOURCE_REMOVE */
    {
        g_autofree char *reason = g_strdup(proc->drop_reason ? proc->drop_reason : "disconnected");

        if (proc->drop_reason && proc->registered)
            g_warning("dropping process: pid=%d name='%s' reason='%s'", proc->pid, proc->name,
                      proc->drop_reason);
        else if (proc->drop_reason)
            g_warning("dropping unregistered connection: reason='%s'", proc->drop_reason);
        agent_proc_drop(proc, reason);
    }
    return G_SOURCE_REMOVE;
}

static gboolean agent_listen_io(int fd, GIOCondition condition, gpointer user_data)
{
    Agent *agent = user_data;

    for (;;) {
        AgentProc *proc;
        struct ucred cred;
        socklen_t cred_len = sizeof(cred);
        int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (cfd < 0 && errno == EINTR)
            continue;
        if (cfd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                g_warning("accept on '%s' failed: %s", agent->socket_path, g_strerror(errno));
            return G_SOURCE_CONTINUE;
        }
        if (agent->procs->len >= AGENT_PROCS_MAX) {
            g_warning("refusing process connection: already %u connections (limit)",
                      agent->procs->len);
            close(cfd);
            continue;
        }
        if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) < 0) {
            g_warning("refusing process connection: no SO_PEERCRED: %s", g_strerror(errno));
            close(cfd);
            continue;
        }
        proc = g_new0(AgentProc, 1);
        proc->agent = agent;
        proc->fd = cfd;
        proc->cred_pid = cred.pid;
        proc->cred_uid = cred.uid;
        proc->name = g_strdup("");
        agent_framer_init(&proc->framer, AGENT_PROC_LINE_MAX, FALSE, TRUE);
        proc->watch_id = g_unix_fd_add(cfd, G_IO_IN | G_IO_HUP | G_IO_ERR, agent_proc_io, proc);
        g_ptr_array_add(agent->procs, proc);
    }
}

gboolean agent_socket_access_parse(const char *group, const char *mode, AgentSocketAccess *ret,
                                   GError **error)
{
    AgentSocketAccess access = AGENT_SOCKET_ACCESS_DEFAULT;

    g_return_val_if_fail(ret != NULL, FALSE);

    if (group) {
        guint64 gid;

        if (g_ascii_string_to_unsigned(group, 10, 0, G_MAXUINT32 - 1, &gid, NULL)) {
            access.group = (gid_t)gid;
        } else {
            struct group gr, *found = NULL;
            char buf[4096];
            int r = getgrnam_r(group, &gr, buf, sizeof(buf), &found);

            if (r != 0 || !found) {
                g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                            "--socket-group '%s': no such group%s%s", group, r ? ": " : "",
                            r ? g_strerror(r) : "");
                return FALSE;
            }
            access.group = found->gr_gid;
        }
    }
    if (mode) {
        guint64 bits;

        if (!g_ascii_string_to_unsigned(mode, 8, 0, 0777, &bits, NULL) || (bits & 0600) != 0600 ||
            (bits & 0111)) {
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                        "--socket-mode '%s': not an octal mode from 0600 to 0666 (owner read and write, no execute bits), e.g. 0660",
                        mode);
            return FALSE;
        }
        access.mode = (mode_t)bits;
    }
    *ret = access;
    return TRUE;
}

gboolean agent_listen(Agent *agent, const char *path, const AgentSocketAccess *access,
                      GError **error)
{
    static const AgentSocketAccess root_only = AGENT_SOCKET_ACCESS_DEFAULT;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    g_autofree char *dir = NULL;
    struct stat st;
    mode_t old_umask;
    int fd;
    int r;

    g_return_val_if_fail(agent != NULL && path != NULL, FALSE);
    g_return_val_if_fail(agent->listen_fd < 0, FALSE);

    if (strlen(path) >= sizeof(addr.sun_path)) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID, "Socket path '%s' is too long",
                    path);
        return FALSE;
    }
    memcpy(addr.sun_path, path, strlen(path) + 1);
    dir = g_path_get_dirname(path);
    if (g_mkdir_with_parents(dir, 0755) < 0) {
        hm_set_error_errno(error, errno, "Cannot create directory '%s'", dir);
        return FALSE;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        hm_set_error_errno(error, errno, "Cannot create a socket");
        return FALSE;
    }
    if (lstat(path, &st) == 0) {
        /* A stale socket from an earlier run is removed; a live agent is not displaced. */
        if (!S_ISSOCK(st.st_mode)) {
            close(fd);
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                        "'%s' exists and is not a socket", path);
            return FALSE;
        }
        if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0 || errno == EAGAIN) {
            close(fd);
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_FAILED,
                        "Another agent listens on '%s'", path);
            return FALSE;
        }
        close(fd);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            hm_set_error_errno(error, errno, "Cannot create a socket");
            return FALSE;
        }
        unlink(path);
    }
    if (!access)
        access = &root_only;
    old_umask = umask(0177);
    r = bind(fd, (struct sockaddr *)&addr, sizeof(addr));
    umask(old_umask);
    /* Born 0600: the group first, then the mode, so it is never wider than asked. */
    if (r < 0 ||
        (access->group != AGENT_SOCKET_GROUP_ROOT && chown(path, (uid_t)-1, access->group) < 0) ||
        chmod(path, access->mode) < 0 || listen(fd, 64) < 0) {
        int errsv = errno;

        close(fd);
        if (r == 0)
            unlink(path);
        hm_set_error_errno(error, errsv, "Cannot listen on '%s'", path);
        return FALSE;
    }
    agent->listen_fd = fd;
    agent->socket_path = g_strdup(path);
    agent->listen_id = g_unix_fd_add(fd, G_IO_IN, agent_listen_io, agent);
    if (access->group != AGENT_SOCKET_GROUP_ROOT)
        g_message("listening for processes: socket='%s' mode=%04o group=%u", path,
                  (unsigned)access->mode, (unsigned)access->group);
    else
        g_message("listening for processes: socket='%s' mode=%04o", path, (unsigned)access->mode);
    return TRUE;
}

/* ---- operations -------------------------------------------------------------------------- */

static void agent_op_free(AgentOp *op)
{
    if (!op)
        return;
    if (op->timer_id)
        g_source_remove(op->timer_id);
    if (op->wake_id)
        g_source_remove(op->wake_id);
    if (op->port_watch_id)
        g_source_remove(op->port_watch_id);
    if (op->port_watch)
        op->port_watch_free(op->port_watch);
    g_ptr_array_unref(op->waiting);
    g_ptr_array_unref(op->done);
    g_ptr_array_unref(op->failed);
    g_free(op->device);
    g_free(op->device_error);
    g_free(op);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AgentOp, agent_op_free)

static AgentOp *agent_op_new(Agent *agent, AgentOpKind kind, guint timeout_ms)
{
    AgentOp *op = g_new0(AgentOp, 1);

    op->kind = kind;
    op->seq = agent->next_seq++;
    op->timeout_ms = timeout_ms;
    op->deadline = hm_deadline_in_ms(timeout_ms);
    op->waiting = g_ptr_array_new();
    op->done = g_ptr_array_new_with_free_func((GDestroyNotify)agent_proc_info_free);
    op->failed = g_ptr_array_new_with_free_func((GDestroyNotify)agent_proc_info_free);
    return op;
}

/* Ends the operation: sends its reply unless the host gave up on it. */
static void agent_op_finish(Agent *agent)
{
    g_autoptr(AgentOp) op = g_steal_pointer(&agent->op);
    g_autoptr(JsonBuilder) b = NULL;

    g_message("%s done: seq=%" G_GUINT64_FORMAT " ok=%u failed=%u device='%s'",
              agent_op_names[op->kind], op->seq, op->done->len, op->failed->len,
              op->kind == AGENT_OP_PREPARE ? (agent->old_device ? agent->old_device : "")
                                           : (op->device ? op->device : ""));
    if (op->reply_dropped) {
        g_message("reply not sent: the host gave up on it (sync or disconnect)");
        return;
    }
    b = agent_return_begin();
    json_builder_set_member_name(b, "state");
    json_builder_add_string_value(b, agent_state_to_string(agent->state));
    if (op->kind == AGENT_OP_PREPARE) {
        agent_json_add_infos(b, "quiesced", op->done);
    } else {
        agent_json_add_infos(b, "resumed", op->done);
    }
    agent_json_add_infos(b, "failed", op->failed);
    json_builder_set_member_name(b, "device");
    if (op->kind == AGENT_OP_PREPARE)
        json_builder_add_string_value(b, agent->old_device ? agent->old_device : "");
    else
        json_builder_add_string_value(b, op->device ? op->device : "");
    /* the standby device this prepare made: the processes' connections can run over it */
    if (op->kind == AGENT_OP_PREPARE && agent->standby && !agent->no_standby_move &&
        agent_standby_get_state(agent->standby) == AGENT_STANDBY_STATE_READY) {
        json_builder_set_member_name(b, "standby");
        json_builder_add_string_value(b, agent_standby_get_device(agent->standby));
    }
    /* No device came up: say why (a port that stays DOWN, no device at all), so that the host
     * reports a device that never came up rather than processes that did not answer. */
    if (op->kind != AGENT_OP_PREPARE && !op->device) {
        g_autofree char *why = g_strdup_printf(
            "no RDMA device with an ACTIVE port within %u ms: %s", op->device_wait_ms,
            op->device_error ? op->device_error : "none found");

        json_builder_set_member_name(b, "device_error");
        json_builder_add_string_value(b, why);
    }
    agent_return_end(agent, b);
}

/* Every process still waited for fails with @error. */
static void agent_op_fail_waiting(Agent *agent, const char *error)
{
    AgentOp *op = agent->op;

    while (op->waiting->len > 0) {
        AgentProc *proc = op->waiting->pdata[op->waiting->len - 1];

        g_warning("process did not answer: pid=%d name='%s' seq=%" G_GUINT64_FORMAT " error='%s'",
                  proc->pid, proc->name, op->seq, error);
        agent_op_settle(agent, proc, error, NULL);
    }
}

static void agent_op_check_done(Agent *agent)
{
    if (agent->op && !agent->op->waiting_device && agent->op->waiting->len == 0)
        agent_op_finish(agent);
}

static gboolean agent_op_deadline(gpointer user_data)
{
    Agent *agent = user_data;
    g_autofree char *error = g_strdup_printf("no answer within %u ms", agent->op->timeout_ms);

    agent->op->timer_id = 0;
    agent_op_fail_waiting(agent, error);
    agent_op_finish(agent);
    return G_SOURCE_REMOVE;
}

static void agent_op_arm_deadline(Agent *agent)
{
    AgentOp *op = agent->op;

    if (op->timer_id)
        g_source_remove(op->timer_id);
    op->timer_id = g_timeout_add(hm_deadline_remaining_ms(op->deadline), agent_op_deadline, agent);
}

/* The device phase is over: stops the looks and the port watch. */
static void agent_resume_unwatch(AgentOp *op)
{
    op->waiting_device = FALSE;
    if (op->timer_id)
        g_source_remove(op->timer_id);
    op->timer_id = 0;
    if (op->wake_id)
        g_source_remove(op->wake_id);
    op->wake_id = 0;
    if (op->port_watch_id)
        g_source_remove(op->port_watch_id);
    op->port_watch_id = 0;
    if (op->port_watch)
        op->port_watch_free(op->port_watch);
    op->port_watch = NULL;
}

static void agent_resume_send(Agent *agent)
{
    AgentOp *op = agent->op;

    agent_resume_unwatch(op);
    agent->state = AGENT_STATE_RUNNING;
    for (guint i = 0; i < agent->procs->len; i++) {
        AgentProc *proc = agent->procs->pdata[i];

        if (!proc->registered)
            continue;
        g_ptr_array_add(op->waiting, proc);
        agent_proc_request(agent, proc, TRUE, op->seq, op->device);
    }
    agent_op_arm_deadline(agent);
    agent_op_check_done(agent);
}

/* Looks for an active device once. TRUE when the device phase is over. */
/* The standby device (never handed to the processes, never the one to come back to), or NULL. */
static const char *agent_standby_name(const Agent *agent)
{
    return agent->standby ? agent_standby_get_device(agent->standby) : NULL;
}

static gboolean agent_resume_look(Agent *agent)
{
    AgentOp *op = agent->op;
    g_autoptr(GError) error = NULL;
    const char *prefer = op->kind == AGENT_OP_ABORT ? agent->old_device : NULL;
    g_autofree char *device = agent->verbs->find_active_device(agent->verbs_data, prefer,
                                                               agent_standby_name(agent), &error);

    if (device && (strlen(device) == 0 || strlen(device) > AGENT_DEVICE_MAX ||
                   strpbrk(device, " \t\r\n") != NULL)) {
        g_warning("ignoring RDMA device with an unusable name");
        g_clear_pointer(&device, g_free);
    }
    if (device) {
        g_message("%s: RDMA device active: device='%s'%s", agent_op_names[op->kind], device,
                  prefer && !g_str_equal(prefer, device) ? " (the old device is gone)" : "");
        op->device = g_steal_pointer(&device);
        return TRUE;
    }
    if (error) {
        g_free(op->device_error);
        op->device_error = g_strdup(error->message);
    }
    if (g_get_monotonic_time() >= op->device_deadline) {
        g_warning("%s: no active RDMA device within %u ms: %s", agent_op_names[op->kind],
                  op->device_wait_ms, op->device_error ? op->device_error : "none found");
        return TRUE;
    }
    return FALSE;
}

static gboolean agent_resume_poll(gpointer user_data);
static gboolean agent_resume_wake(gpointer user_data);

/* A look from the main loop, soon; several requests make one. */
static void agent_resume_wake_soon(Agent *agent)
{
    AgentOp *op = agent->op;

    if (op && op->waiting_device && !op->wake_id)
        op->wake_id = g_idle_add(agent_resume_wake, agent);
}

static gboolean agent_resume_port_event(int fd, GIOCondition condition, gpointer user_data)
{
    Agent *agent = user_data;
    AgentOp *op = agent->op;
    guint n = agent->verbs->port_watch_drain(op->port_watch);

    g_debug("%s: %u RDMA port event(s)", agent_op_names[op->kind], n);
    /* A port event may be a device lost: reopen on the devices present at the next look. */
    op->port_watch_stale = TRUE;
    agent_resume_wake_soon(agent);
    if (condition & (G_IO_HUP | G_IO_ERR | G_IO_NVAL)) {
        op->port_watch_id = 0;
        return G_SOURCE_REMOVE;
    }
    return G_SOURCE_CONTINUE;
}

/* No active device yet: watches the ports of the devices present (when the adapter can and
 * they changed) and arms the fallback poll. */
static void agent_resume_wait(Agent *agent)
{
    AgentOp *op = agent->op;
    guint interval =
        agent->device_events ? MAX(agent->poll_ms, AGENT_DEVICE_POLL_EVENTS_MS) : agent->poll_ms;

    if (op->port_watch_stale && agent->verbs->port_watch_new) {
        g_autoptr(GError) error = NULL;
        int fd = -1;

        if (op->port_watch_id)
            g_source_remove(op->port_watch_id);
        op->port_watch_id = 0;
        if (op->port_watch)
            op->port_watch_free(op->port_watch);
        op->port_watch = agent->verbs->port_watch_new(agent->verbs_data, &fd, &error);
        op->port_watch_free = agent->verbs->port_watch_free;
        if (op->port_watch)
            op->port_watch_id =
                g_unix_fd_add(fd, G_IO_IN | G_IO_HUP | G_IO_ERR, agent_resume_port_event, agent);
        else
            g_debug("%s: no port events, polling: %s", agent_op_names[op->kind], error->message);
        /* A port that went ACTIVE after the look but before the watch listened sent its event
         * to nobody: look once more now that it listens (else the poll finds it, up to
         * AGENT_DEVICE_POLL_EVENTS_MS later). */
        op->port_watch_stale = FALSE;
        if (op->port_watch)
            agent_resume_wake_soon(agent);
    }
    op->port_watch_stale = FALSE;
    if (!op->timer_id)
        op->timer_id = g_timeout_add(MIN(interval, hm_deadline_remaining_ms(op->device_deadline)),
                                     agent_resume_poll, agent);
}

static void agent_resume_try(Agent *agent)
{
    if (agent_resume_look(agent))
        agent_resume_send(agent);
    else
        agent_resume_wait(agent);
}

static gboolean agent_resume_poll(gpointer user_data)
{
    Agent *agent = user_data;

    agent->op->timer_id = 0;
    agent_resume_try(agent);
    return G_SOURCE_REMOVE;
}

static gboolean agent_resume_wake(gpointer user_data)
{
    Agent *agent = user_data;

    agent->op->wake_id = 0;
    agent_resume_try(agent);
    return G_SOURCE_REMOVE;
}

void agent_devices_changed(Agent *agent)
{
    g_return_if_fail(agent != NULL);
    if (!agent->op || !agent->op->waiting_device)
        return;
    g_debug("%s: RDMA devices changed, looking again", agent_op_names[agent->op->kind]);
    agent->op->port_watch_stale = TRUE;
    agent_resume_wake_soon(agent);
}

/* ---- the standby device (standby.h) ----------------------------------------------------- */

/* prepare: the standby device is made, after the processes were asked to quiesce (they do not
 * wait for it) and after the device to come back to was read (the standby is never that). */
static void agent_standby_make(Agent *agent)
{
    g_autoptr(GError) error = NULL;

    if (!agent->standby)
        return;
    if (g_atomic_int_get(&agent->standby_removing)) {
        g_message("prepare: the standby RDMA device '%s' of the last move is still being removed: "
                  "no standby for this one",
                  agent_standby_get_device(agent->standby));
        return;
    }
    if (!agent_standby_up(agent->standby, &error)) {
        g_warning("prepare: %s", error->message);
        return;
    }
    g_message("prepare: standby RDMA device '%s' on '%s': %s, made in %" G_GINT64_FORMAT " ms",
              agent_standby_get_device(agent->standby), agent_standby_get_netdev(agent->standby),
              agent_standby_state_to_string(agent_standby_get_state(agent->standby)),
              agent_standby_get_created_ms(agent->standby));
}

static gpointer agent_standby_down_thread(gpointer data)
{
    Agent *agent = data;
    g_autoptr(GError) error = NULL;
    gint64 t0 = g_get_monotonic_time();

    if (!agent_standby_down(agent->standby, &error))
        g_warning("%s", error->message);
    else
        g_message("standby RDMA device '%s' removed in %" G_GINT64_FORMAT " ms",
                  agent_standby_get_device(agent->standby),
                  (g_get_monotonic_time() - t0) / G_TIME_SPAN_MILLISECOND);
    g_atomic_int_set(&agent->standby_removing, 0);
    return NULL;
}

/* resume, abort: the standby device goes before the look for the new device (never handed to
 * the processes), in a thread: the kernel removes it only once every process closed it. */
static void agent_standby_remove(Agent *agent)
{
    g_autoptr(GError) error = NULL;

    if (agent->standby && agent->standby_leases) {
        g_message("standby RDMA device '%s' kept: %u processes hold it (removed after the last)",
                  agent_standby_get_device(agent->standby), agent->standby_leases);
        return;
    }
    if (!agent->standby || g_atomic_int_get(&agent->standby_removing) ||
        agent_standby_get_state(agent->standby) == AGENT_STANDBY_STATE_ABSENT ||
        agent_standby_get_state(agent->standby) == AGENT_STANDBY_STATE_UNAVAILABLE)
        return;
    if (agent->standby_down)
        g_thread_join(g_steal_pointer(&agent->standby_down));
    g_atomic_int_set(&agent->standby_removing, 1);
    agent->standby_down =
        g_thread_try_new("standby-down", agent_standby_down_thread, agent, &error);
    if (!agent->standby_down) {
        g_atomic_int_set(&agent->standby_removing, 0);
        g_warning("cannot remove the standby RDMA device '%s': %s",
                  agent_standby_get_device(agent->standby), error->message);
    }
}

/* STANDBY on a connection of its own: the device for a process of this guest, the lease held
 * as long as the connection (answered "STANDBY 0 <device>" or "STANDBY <errno> <reason>").
 * While this guest moves (prepared) only the device that move made is handed out; otherwise
 * (a peer guest moves) it is made now. FALSE drops the connection (a refusal is answered
 * first). */
static gboolean agent_proc_standby(AgentProc *proc)
{
    Agent *agent = proc->agent;
    g_autoptr(GError) error = NULL;
    g_autofree char *line = NULL;
    AgentStandbyState st = agent->standby ? agent_standby_get_state(agent->standby)
                                          : AGENT_STANDBY_STATE_UNAVAILABLE;
    int err = 0;
    const char *why = NULL;

    if (!agent->standby) {
        err = EOPNOTSUPP;
        why = "this guest's agent has no standby device (--standby)";
    } else if (st == AGENT_STANDBY_STATE_UNAVAILABLE) {
        err = EOPNOTSUPP;
        why = "this guest cannot have a standby device (see the inventory)";
    } else if (agent->state == AGENT_STATE_PREPARED &&
               (agent->no_standby_move || st == AGENT_STANDBY_STATE_ABSENT)) {
        err = EOPNOTSUPP;
        why = "this move uses no standby device";
    } else if (g_atomic_int_get(&agent->standby_removing)) {
        err = EBUSY;
        why = "the standby device of the last move is still being removed";
    } else if (st == AGENT_STANDBY_STATE_ABSENT && !agent_standby_up(agent->standby, &error)) {
        g_message("standby for a process: %s", error->message);
        err = EIO;
        why = "the standby device could not be made (see the agent's log)";
    }
    if (err) {
        g_message("standby lease refused: pid=%d: %s", (int)proc->cred_pid, why);
        line = g_strdup_printf("STANDBY %d %s\n", err, why);
        agent_proc_send(proc, line, NULL);
        proc->drop_reason = g_strdup("standby lease refused");
        return FALSE;
    }
    line = g_strdup_printf("STANDBY 0 %s\n", agent_standby_get_device(agent->standby));
    if (!agent_proc_send(proc, line, &error)) {
        proc->drop_reason = g_strdup_printf("standby lease: %s", error->message);
        return FALSE;
    }
    proc->standby_lease = TRUE;
    agent->standby_leases++;
    g_message("standby lease: pid=%d uid=%u device '%s' (%u held)", (int)proc->cred_pid,
              (unsigned)proc->cred_uid, agent_standby_get_device(agent->standby),
              agent->standby_leases);
    return TRUE;
}

void agent_set_standby(Agent *agent, AgentStandby *standby)
{
    g_return_if_fail(agent != NULL && !agent->standby);
    agent->standby = standby;
}

void agent_standby_wait(Agent *agent)
{
    g_return_if_fail(agent != NULL);
    if (agent->standby_down)
        g_thread_join(g_steal_pointer(&agent->standby_down));
}

static void agent_prepare_start(Agent *agent, guint timeout_ms, gboolean no_standby)
{
    AgentOp *op = agent_op_new(agent, AGENT_OP_PREPARE, timeout_ms);

    agent->op = op;
    agent->state = AGENT_STATE_PREPARED;
    g_message("prepare: seq=%" G_GUINT64_FORMAT " timeout_ms=%u processes=%u", op->seq, timeout_ms,
              agent_get_n_procs(agent));
    for (guint i = 0; i < agent->procs->len; i++) {
        AgentProc *proc = agent->procs->pdata[i];

        if (!proc->registered)
            continue;
        g_ptr_array_add(op->waiting, proc);
        agent_proc_request(agent, proc, FALSE, op->seq, NULL);
    }
    /* After the requests went out, so the processes need not wait for the device scan: the
     * device they are quiescing on, for abort. */
    {
        g_autoptr(GError) error = NULL;

        g_clear_pointer(&agent->old_device, g_free);
        agent->old_device = agent->verbs->find_active_device(agent->verbs_data, NULL,
                                                             agent_standby_name(agent), &error);
        if (!agent->old_device)
            g_message("prepare: no active RDMA device to come back to: %s", error->message);
    }
    agent->no_standby_move = no_standby;
    if (no_standby)
        g_message("prepare: no standby device for this move (\"standby\":0)");
    else
        agent_standby_make(agent);
    agent_op_arm_deadline(agent);
    agent_op_check_done(agent);
}

static void agent_resume_start(Agent *agent, AgentOpKind kind, guint timeout_ms)
{
    AgentOp *op = agent_op_new(agent, kind, timeout_ms);
    /* Keep a quarter of the time (at most 2 s) for the processes' answers. */
    guint reserve = MIN(timeout_ms / 4, 2000);

    op->device_wait_ms = timeout_ms - reserve;
    op->device_deadline = op->deadline - (gint64)reserve * G_TIME_SPAN_MILLISECOND;
    op->waiting_device = TRUE;
    op->port_watch_stale = TRUE;
    agent->op = op;
    g_message("%s: seq=%" G_GUINT64_FORMAT " timeout_ms=%u processes=%u old_device='%s'",
              agent_op_names[kind], op->seq, timeout_ms, agent_get_n_procs(agent),
              agent->old_device ? agent->old_device : "");
    agent_standby_remove(agent);
    agent_resume_try(agent);
}

/* ---- host commands ----------------------------------------------------------------------- */

typedef void (*AgentHandler)(Agent *agent, const AgentRequest *req);

static void agent_cmd_sync(Agent *agent, const AgentRequest *req)
{
    g_autofree char *line = g_strdup_printf("%c{\"return\":%" G_GINT64_FORMAT "}\n",
                                            (char)AGENT_SYNC_BYTE, req->sync_id);

    agent_send_raw(agent, line, strlen(line));
}

static void agent_cmd_ping(Agent *agent, const AgentRequest *req)
{
    g_autoptr(JsonBuilder) b = agent_return_begin();

    agent_return_end(agent, b);
}

static void agent_cmd_info(Agent *agent, const AgentRequest *req)
{
    g_autoptr(JsonBuilder) b = NULL;

    if (req->protocol) {
        if (req->protocol < AGENT_PROTOCOL_MIN) {
            g_autofree char *desc =
                g_strdup_printf("Protocol %d is not supported (this agent speaks %d to %d)",
                                req->protocol, AGENT_PROTOCOL_MIN, AGENT_PROTOCOL_VERSION);

            agent_send_error(agent, AGENT_ERROR_UNSUPPORTED, desc);
            return;
        }
        agent->protocol = MIN(req->protocol, AGENT_PROTOCOL_VERSION);
        g_message("host: protocol %d negotiated (host %d, agent %d)", agent->protocol,
                  req->protocol, AGENT_PROTOCOL_VERSION);
    }
    b = agent_return_begin();
    json_builder_set_member_name(b, "version");
    json_builder_add_string_value(b, HOTMIG_VERSION);
    json_builder_set_member_name(b, "protocol");
    json_builder_add_int_value(b, agent->protocol);
    json_builder_set_member_name(b, "protocol_min");
    json_builder_add_int_value(b, AGENT_PROTOCOL_MIN);
    json_builder_set_member_name(b, "protocol_max");
    json_builder_add_int_value(b, AGENT_PROTOCOL_VERSION);
    json_builder_set_member_name(b, "line_max");
    json_builder_add_int_value(b, AGENT_HOST_LINE_MAX);
    json_builder_set_member_name(b, "commands");
    json_builder_begin_array(b);
    for (int i = 0; i < AGENT_COMMAND_LAST; i++) {
        if (agent_command_specs[i].since <= agent->protocol)
            json_builder_add_string_value(b, agent_command_specs[i].name);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "capabilities");
    json_builder_begin_array(b);
    json_builder_add_string_value(b, "mode-lazy");
    json_builder_add_string_value(b, "mode-threaded");
    json_builder_add_string_value(b, "hold-while-prepared");
    if (agent->verbs->list_devices)
        json_builder_add_string_value(b, "rdma-inventory");
    json_builder_end_array(b);
    agent_return_end(agent, b);
}

static AgentProcState agent_proc_get_state(const AgentProc *proc)
{
    if (proc->pending_seq)
        return proc->pending_is_resume ? AGENT_PROC_STATE_RESUMING : AGENT_PROC_STATE_QUIESCING;
    if (proc->error)
        return AGENT_PROC_STATE_FAILED;
    return proc->quiesced ? AGENT_PROC_STATE_QUIESCED : AGENT_PROC_STATE_RUNNING;
}

static void agent_json_add_device(JsonBuilder *b, const AgentRdmaDevice *dev)
{
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, dev->name);
    json_builder_set_member_name(b, "node_guid");
    json_builder_add_string_value(b, dev->node_guid);
    json_builder_set_member_name(b, "ports");
    json_builder_begin_array(b);
    for (guint i = 0; i < dev->ports->len; i++) {
        const AgentRdmaPort *port = dev->ports->pdata[i];

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "port");
        json_builder_add_int_value(b, port->port);
        json_builder_set_member_name(b, "state");
        json_builder_add_string_value(b, port->state);
        json_builder_set_member_name(b, "link_layer");
        json_builder_add_string_value(b, port->link_layer);
        json_builder_set_member_name(b, "lid");
        json_builder_add_int_value(b, port->lid);
        json_builder_set_member_name(b, "gids");
        json_builder_begin_array(b);
        for (guint j = 0; j < port->gids->len; j++)
            json_builder_add_string_value(b, port->gids->pdata[j]);
        json_builder_end_array(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
}

/* inventory: "peers" [{"gid","qpn"}], "peers_dropped" when over the bound, "refused" [call]. */
static void agent_json_add_proc_peers(JsonBuilder *b, const AgentProc *proc)
{
    json_builder_set_member_name(b, "peers");
    json_builder_begin_array(b);
    for (guint i = 0; proc->peers && i < proc->peers->len; i++) {
        const AgentPeerRef *ref = &g_array_index(proc->peers, AgentPeerRef, i);
        g_autoptr(GInetAddress) addr =
            g_inet_address_new_from_bytes(ref->gid, G_SOCKET_FAMILY_IPV6);
        g_autofree char *gid = g_inet_address_to_string(addr);

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "gid");
        json_builder_add_string_value(b, gid);
        json_builder_set_member_name(b, "qpn");
        json_builder_add_int_value(b, ref->qpn);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    if (proc->peers_dropped) {
        json_builder_set_member_name(b, "peers_dropped");
        json_builder_add_int_value(b, proc->peers_dropped);
    }
    json_builder_set_member_name(b, "refused");
    json_builder_begin_array(b);
    for (guint i = 0; proc->refused && i < proc->refused->len; i++)
        json_builder_add_string_value(b, proc->refused->pdata[i]);
    json_builder_end_array(b);
}

/* inventory: "job", the batch job of the process as the guest sees it, when it has one
 * (guest-agent/agent/job.c; read from /proc at each inventory: a process's environment and
 * cgroup do not change its job). */
static void agent_json_add_proc_job(JsonBuilder *b, gint pid)
{
    g_autofree char *job = agent_job_of_pid("/proc", pid);

    if (!job)
        return;
    json_builder_set_member_name(b, "job");
    json_builder_add_string_value(b, job);
}

/* inventory: "unregistered", the processes that hold a verbs device open without having
 * registered (neither the verbs layer nor libhotmig: a move takes the device from under them),
 * read from /proc at each inventory (guest-agent/agent/device-users.c); "unregistered_dropped"
 * counts those past AGENT_DEVICE_USERS_MAX. */
static void agent_json_add_unregistered(JsonBuilder *b, const Agent *agent)
{
    g_autoptr(GArray) skip = g_array_new(FALSE, FALSE, sizeof(gint));
    g_autoptr(GPtrArray) users = NULL;
    gint self = (gint)getpid();
    guint dropped = 0, unreadable = 0;

    g_array_append_val(skip, self);
    for (guint i = 0; i < agent->procs->len; i++) {
        const AgentProc *proc = agent->procs->pdata[i];

        if (proc->registered)
            g_array_append_val(skip, proc->pid);
    }
    users = agent_device_users(agent->proc_root ? agent->proc_root : "/proc",
                               (const gint *)skip->data, skip->len, &dropped, &unreadable);
    if (unreadable)
        g_debug("inventory: %u process(es) whose descriptors cannot be read", unreadable);
    json_builder_set_member_name(b, "unregistered");
    json_builder_begin_array(b);
    for (guint i = 0; i < users->len; i++) {
        const AgentDeviceUser *user = users->pdata[i];

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "pid");
        json_builder_add_int_value(b, user->pid);
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, user->name);
        json_builder_set_member_name(b, "device");
        json_builder_add_string_value(b, user->device);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    if (dropped) {
        json_builder_set_member_name(b, "unregistered_dropped");
        json_builder_add_int_value(b, dropped);
    }
}

static void agent_cmd_inventory(Agent *agent, const AgentRequest *req)
{
    g_autoptr(JsonBuilder) b = agent_return_begin();
    g_autoptr(GPtrArray) devices = NULL;
    g_autoptr(GError) error = NULL;

    json_builder_set_member_name(b, "state");
    json_builder_add_string_value(b, agent_state_to_string(agent->state));
    json_builder_set_member_name(b, "processes");
    json_builder_begin_array(b);
    for (guint i = 0; i < agent->procs->len; i++) {
        AgentProc *proc = agent->procs->pdata[i];

        if (!proc->registered)
            continue;
        agent_json_add_proc(b, proc->pid, proc->name, proc->mode, proc->error);
        json_builder_set_member_name(b, "state");
        json_builder_add_string_value(b, agent_proc_state_to_string(agent_proc_get_state(proc)));
        agent_json_add_proc_peers(b, proc);
        agent_json_add_proc_job(b, proc->pid);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    agent_json_add_unregistered(b, agent);
    if (agent->verbs->list_devices)
        devices = agent->verbs->list_devices(agent->verbs_data, &error);
    else
        g_set_error_literal(&error, HM_COMMON_ERROR, HM_COMMON_ERROR_FAILED,
                            "The verbs adapter cannot list devices");
    json_builder_set_member_name(b, "devices");
    json_builder_begin_array(b);
    for (guint i = 0; devices && i < devices->len; i++)
        agent_json_add_device(b, devices->pdata[i]);
    json_builder_end_array(b);
    if (!devices) {
        g_autofree char *valid = g_utf8_make_valid(error->message, -1);

        json_builder_set_member_name(b, "devices_error");
        json_builder_add_string_value(b, valid);
    }
    if (agent->standby)
        agent_standby_add_json(agent->standby, b);
    agent_return_end(agent, b);
}

static void agent_cmd_status(Agent *agent, const AgentRequest *req)
{
    g_autoptr(JsonBuilder) b = agent_return_begin();

    json_builder_set_member_name(b, "state");
    json_builder_add_string_value(b, agent_state_to_string(agent->state));
    json_builder_set_member_name(b, "processes");
    json_builder_begin_array(b);
    for (guint i = 0; i < agent->procs->len; i++) {
        AgentProc *proc = agent->procs->pdata[i];

        if (!proc->registered)
            continue;
        agent_json_add_proc(b, proc->pid, proc->name, proc->mode, proc->error);
        json_builder_set_member_name(b, "quiesced");
        json_builder_add_boolean_value(b, proc->quiesced);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    agent_return_end(agent, b);
}

static void agent_cmd_prepare(Agent *agent, const AgentRequest *req)
{
    if (agent->op) {
        agent_send_error(agent, AGENT_ERROR_BUSY, "A prepare or resume is under way");
        return;
    }
    if (agent->state == AGENT_STATE_PREPARED) {
        agent_send_error(agent, AGENT_ERROR_BUSY, "The agent is already prepared");
        return;
    }
    agent_prepare_start(agent, req->timeout_ms, req->no_standby);
}

/* resume and abort: both end a prepare under way and bring the processes back. */
static void agent_resume_or_abort(Agent *agent, AgentOpKind kind, guint timeout_ms)
{
    if (agent->op && agent->op->kind != AGENT_OP_PREPARE) {
        g_autofree char *desc =
            g_strdup_printf("A %s is under way", agent_op_names[agent->op->kind]);

        agent_send_error(agent, AGENT_ERROR_BUSY, desc);
        return;
    }
    if (agent->op) {
        /* The host gave up on the prepare (rollback): end it now, then resume. */
        g_autofree char *why = g_strdup_printf("prepare ended by %s", agent_op_names[kind]);

        g_message("%s: ending the prepare under way", agent_op_names[kind]);
        agent_op_fail_waiting(agent, why);
        agent_op_finish(agent);
    }
    if (agent->state == AGENT_STATE_RUNNING) {
        g_autoptr(JsonBuilder) b = agent_return_begin();

        g_message("%s: already running, nothing to do", agent_op_names[kind]);
        json_builder_set_member_name(b, "state");
        json_builder_add_string_value(b, "running");
        json_builder_set_member_name(b, "resumed");
        json_builder_begin_array(b);
        json_builder_end_array(b);
        json_builder_set_member_name(b, "failed");
        json_builder_begin_array(b);
        json_builder_end_array(b);
        json_builder_set_member_name(b, "device");
        json_builder_add_string_value(b, "");
        agent_return_end(agent, b);
        return;
    }
    agent_resume_start(agent, kind, timeout_ms);
}

static void agent_cmd_resume(Agent *agent, const AgentRequest *req)
{
    agent_resume_or_abort(agent, AGENT_OP_RESUME, req->timeout_ms);
}

static void agent_cmd_abort(Agent *agent, const AgentRequest *req)
{
    agent_resume_or_abort(agent, AGENT_OP_ABORT, req->timeout_ms);
}

/* The dispatcher: indexed by the command enum generated from the schema. */
static const AgentHandler agent_handlers[] = {
    [AGENT_COMMAND_SYNC] = agent_cmd_sync,       [AGENT_COMMAND_PING] = agent_cmd_ping,
    [AGENT_COMMAND_INFO] = agent_cmd_info,       [AGENT_COMMAND_INVENTORY] = agent_cmd_inventory,
    [AGENT_COMMAND_PREPARE] = agent_cmd_prepare, [AGENT_COMMAND_RESUME] = agent_cmd_resume,
    [AGENT_COMMAND_STATUS] = agent_cmd_status,   [AGENT_COMMAND_ABORT] = agent_cmd_abort,
};
G_STATIC_ASSERT(G_N_ELEMENTS(agent_handlers) == AGENT_COMMAND_LAST);

gboolean agent_command_has_handler(AgentCommand command)
{
    g_return_val_if_fail((int)command >= 0 && command < AGENT_COMMAND_LAST, FALSE);
    return agent_handlers[command] != NULL;
}

static gboolean agent_host_frame(AgentFrameEvent event, const char *line, gsize len,
                                 gpointer user_data)
{
    Agent *agent = user_data;
    g_autoptr(GError) error = NULL;
    const AgentCommandSpec *spec;
    AgentRequest req;
    gsize i;

    switch (event) {
    case AGENT_FRAME_SYNC:
        g_debug("host: sync byte");
        if (agent->op)
            agent->op->reply_dropped = TRUE;
        return TRUE;
    case AGENT_FRAME_OVERSIZE: {
        g_autofree char *desc =
            g_strdup_printf("Request longer than %d bytes", AGENT_HOST_LINE_MAX);

        g_warning("host: request longer than %d bytes discarded", AGENT_HOST_LINE_MAX);
        agent_send_error(agent, AGENT_ERROR_TOO_LARGE, desc);
        return TRUE;
    }
    case AGENT_FRAME_LINE:
        break;
    }
    for (i = 0; i < len && g_ascii_isspace(line[i]); i++)
        ;
    if (i == len)
        return TRUE;
    if (!agent_request_parse(line, len, &req, &error)) {
        g_warning("host: bad request: class=%s desc='%s'",
                  agent_error_class_to_string((AgentError)error->code), error->message);
        agent_send_error(agent, (AgentError)error->code, error->message);
        return TRUE;
    }
    spec = &agent_command_specs[req.command];
    if (spec->since > agent->protocol) {
        g_autofree char *desc = g_strdup_printf(
            "The command '%s' needs protocol %d; this session speaks %d (negotiate with 'info')",
            spec->name, spec->since, agent->protocol);

        g_warning("host: %s", desc);
        agent_send_error(agent, AGENT_ERROR_COMMAND_NOT_FOUND, desc);
        return TRUE;
    }
    g_debug("host: command %s", spec->name);
    agent_handlers[req.command](agent, &req);
    return TRUE;
}

void agent_host_feed(Agent *agent, const guint8 *data, gsize len)
{
    g_return_if_fail(agent != NULL);
    agent_framer_feed(&agent->host, data, len, agent_host_frame, agent);
}

void agent_host_reset(Agent *agent)
{
    g_return_if_fail(agent != NULL);
    agent_framer_reset(&agent->host);
    /* The next host (possibly another machine after a migration) negotiates anew. */
    agent->protocol = AGENT_PROTOCOL_MIN;
    if (agent->op)
        agent->op->reply_dropped = TRUE;
}

/* ---- life cycle -------------------------------------------------------------------------- */

Agent *agent_new(const AgentVerbsOps *verbs, gpointer verbs_data)
{
    Agent *agent;

    g_return_val_if_fail(verbs != NULL && verbs->find_active_device != NULL, NULL);
    g_return_val_if_fail(!verbs->port_watch_new == !verbs->port_watch_drain &&
                             !verbs->port_watch_new == !verbs->port_watch_free,
                         NULL);

    agent = g_new0(Agent, 1);
    agent->verbs = verbs;
    agent->verbs_data = verbs_data;
    agent->poll_ms = AGENT_DEVICE_POLL_MS;
    agent_framer_init_host(&agent->host);
    agent->protocol = AGENT_PROTOCOL_MIN;
    agent->state = AGENT_STATE_RUNNING;
    agent->next_seq = 1;
    agent->procs = g_ptr_array_new_with_free_func((GDestroyNotify)agent_proc_free);
    agent->listen_fd = -1;
    return agent;
}

void agent_free(Agent *agent)
{
    if (!agent)
        return;
    g_clear_pointer(&agent->op, agent_op_free);
    g_ptr_array_unref(agent->procs);
    if (agent->listen_id)
        g_source_remove(agent->listen_id);
    if (agent->listen_fd >= 0) {
        close(agent->listen_fd);
        unlink(agent->socket_path);
    }
    g_free(agent->socket_path);
    g_free(agent->proc_root);
    g_free(agent->old_device);
    agent_framer_clear(&agent->host);
    agent_standby_wait(agent);
    agent_standby_free(agent->standby);
    g_free(agent);
}

void agent_set_reply_func(Agent *agent, AgentReplyFunc func, gpointer user_data)
{
    g_return_if_fail(agent != NULL);
    agent->reply_func = func;
    agent->reply_data = user_data;
}

void agent_set_proc_root(Agent *agent, const char *proc_root)
{
    g_return_if_fail(agent != NULL);
    g_free(agent->proc_root);
    agent->proc_root = g_strdup(proc_root);
}

void agent_set_device_poll_ms(Agent *agent, guint poll_ms)
{
    g_return_if_fail(agent != NULL && poll_ms > 0);
    agent->poll_ms = poll_ms;
}

void agent_set_device_events(Agent *agent, gboolean device_events)
{
    g_return_if_fail(agent != NULL);
    agent->device_events = device_events;
}

AgentState agent_get_state(const Agent *agent)
{
    return agent->state;
}

gboolean agent_is_busy(const Agent *agent)
{
    return agent->op != NULL;
}

gint agent_get_protocol(const Agent *agent)
{
    return agent->protocol;
}

/* ---- RDMA device descriptions (filled by the verbs adapter) ------------------------------ */

static void agent_rdma_port_free(AgentRdmaPort *port)
{
    if (!port)
        return;
    g_free(port->state);
    g_free(port->link_layer);
    g_ptr_array_unref(port->gids);
    g_free(port);
}

AgentRdmaDevice *agent_rdma_device_new(const char *name, const char *node_guid)
{
    AgentRdmaDevice *dev = g_new0(AgentRdmaDevice, 1);

    dev->name = g_strdup(name);
    dev->node_guid = g_strdup(node_guid);
    dev->ports = g_ptr_array_new_with_free_func((GDestroyNotify)agent_rdma_port_free);
    return dev;
}

const char *agent_rdma_port_state_name(guint state)
{
    static const char *const names[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};

    return state < G_N_ELEMENTS(names) ? names[state] : "UNKNOWN";
}

AgentRdmaPort *agent_rdma_device_add_port(AgentRdmaDevice *dev, guint8 port, const char *state,
                                          const char *link_layer, guint16 lid)
{
    AgentRdmaPort *p = g_new0(AgentRdmaPort, 1);

    p->port = port;
    p->state = g_strdup(state);
    p->link_layer = g_strdup(link_layer);
    p->lid = lid;
    p->gids = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(dev->ports, p);
    return p;
}

void agent_rdma_device_free(AgentRdmaDevice *dev)
{
    if (!dev)
        return;
    g_free(dev->name);
    g_free(dev->node_guid);
    g_ptr_array_unref(dev->ports);
    g_free(dev);
}

guint agent_get_n_procs(const Agent *agent)
{
    guint n = 0;

    for (guint i = 0; i < agent->procs->len; i++)
        n += ((AgentProc *)agent->procs->pdata[i])->registered ? 1 : 0;
    return n;
}
