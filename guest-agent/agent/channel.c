/* The host channel: a virtio-serial port in the guest (or, for tests, any fd).
 *
 * A virtio-serial port without a host on the other end polls HUP (and reads return 0) until
 * the host opens its side. QEMU's guest agent opens the port O_ASYNC and naps in its read
 * callback when that happens. We do the event-driven equivalent: on HUP the channel drops
 * its watch and looks again either when the kernel signals the host's connect (O_ASYNC; the
 * signal is routed with F_SETSIG to SIGUSR2 so GLib can deliver it as a source) or when a
 * retry timer fires, whichever comes first. No busy loop either way. */
#include "guest-agent/agent/agent-priv.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#define AGENT_CHANNEL_SIGNAL SIGUSR2
#define AGENT_CHANNEL_READ_MAX (256 * 1024) /* per main loop turn */

struct AgentChannel {
    Agent *agent;
    char *path;
    int fd;
    gboolean is_port;
    gboolean connected; /* port: the host is there, as far as we know */
    guint retry_ms;
    guint watch_id;
    guint retry_id;
    guint signal_id;
    guint out_id;
    GByteArray *out;
    gint64 hup_since; /* port: HUP seen while the host was talking to us (0: not) */
    GSourceFunc eof_func;
    gpointer eof_data;
};

static gboolean agent_channel_io(int fd, GIOCondition condition, gpointer user_data);
static gboolean agent_channel_out(int fd, GIOCondition condition, gpointer user_data);

/* A host that has just connected can send data before the guest kernel has processed the
 * port-open notice (they travel on different virtqueues): meanwhile the port polls HUP and
 * writes fail with EAGAIN. That is not a disconnect; the notice follows within moments and
 * raises SIGIO. This long at most, then HUP means the host is gone. */
#define AGENT_CHANNEL_OPEN_GRACE_US (1 * G_TIME_SPAN_SECOND)
char *agent_channel_find_port(const char *sysfs_root, const char *dev_root, const char *name,
                              GError **error)
{
    g_autofree char *class_dir = g_build_filename(sysfs_root, "class", "virtio-ports", NULL);
    g_autoptr(GDir) dir = NULL;
    g_autoptr(GError) local_error = NULL;
    const char *entry;

    dir = g_dir_open(class_dir, 0, &local_error);
    if (!dir) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_IO, "No virtio-serial ports ('%s'): %s",
                    class_dir, local_error->message);
        return NULL;
    }
    while ((entry = g_dir_read_name(dir))) {
        g_autofree char *name_path = g_build_filename(class_dir, entry, "name", NULL);
        g_autofree char *contents = NULL;
        gsize len = 0;

        if (!hm_file_read_limited(name_path, 256, &contents, &len, NULL))
            continue;
        g_strchomp(contents);
        if (g_str_equal(contents, name))
            return g_build_filename(dev_root, entry, NULL);
    }
    g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_IO,
                "No virtio-serial port named '%s' in '%s'", name, class_dir);
    return NULL;
}

/* ---- output ------------------------------------------------------------------------------ */

static void agent_channel_drop_output(AgentChannel *channel)
{
    if (channel->out_id) {
        g_source_remove(channel->out_id);
        channel->out_id = 0;
    }
    g_byte_array_set_size(channel->out, 0);
}

/* Writes what is queued. FALSE when the rest must wait for POLLOUT. */
static gboolean agent_channel_flush(AgentChannel *channel)
{
    while (channel->out->len > 0) {
        ssize_t n = write(channel->fd, channel->out->data, channel->out->len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            g_debug("host channel: %u bytes wait for the port to take them", channel->out->len);
            return FALSE;
        }
        if (n <= 0) {
            g_debug("host channel: dropping %u bytes of output: %s", channel->out->len,
                    n < 0 ? g_strerror(errno) : "short write");
            g_byte_array_set_size(channel->out, 0);
            return TRUE;
        }
        g_debug("host channel: wrote %zd bytes", n);
        g_byte_array_remove_range(channel->out, 0, (guint)n);
    }
    return TRUE;
}

static gboolean agent_channel_out(int fd, GIOCondition condition, gpointer user_data)
{
    AgentChannel *channel = user_data;

    if (agent_channel_flush(channel)) {
        channel->out_id = 0;
        return G_SOURCE_REMOVE;
    }
    if (!(condition & (G_IO_HUP | G_IO_ERR)))
        return G_SOURCE_CONTINUE;
    channel->out_id = 0;
    if (!channel->is_port) {
        g_byte_array_set_size(channel->out, 0);
        return G_SOURCE_REMOVE;
    }
    /* Possibly the port-open race: keep the output; SIGIO or the retry timer flushes it, and
     * a real hang-up drops it (agent_channel_hangup). */
    return G_SOURCE_REMOVE;
}

/* Flushes pending output, watching for POLLOUT if it cannot all go now. */
static void agent_channel_kick_output(AgentChannel *channel)
{
    if (channel->out->len == 0 || channel->out_id)
        return;
    if (!agent_channel_flush(channel))
        channel->out_id = g_unix_fd_add(channel->fd, G_IO_OUT, agent_channel_out, channel);
}

static void agent_channel_write(const char *data, gsize len, gpointer user_data)
{
    AgentChannel *channel = user_data;

    if (channel->out->len + len > AGENT_OUTPUT_MAX) {
        g_warning("host channel: the host does not read; dropping %u bytes of output",
                  channel->out->len);
        agent_channel_drop_output(channel);
    }
    g_byte_array_append(channel->out, (const guint8 *)data, (guint)len);
    if (channel->out_id)
        return;
    if (!agent_channel_flush(channel))
        channel->out_id = g_unix_fd_add(channel->fd, G_IO_OUT, agent_channel_out, channel);
}

/* ---- input ------------------------------------------------------------------------------- */

static void agent_channel_watch(AgentChannel *channel)
{
    if (!channel->watch_id)
        channel->watch_id =
            g_unix_fd_add(channel->fd, G_IO_IN | G_IO_HUP | G_IO_ERR, agent_channel_io, channel);
}

static gboolean agent_channel_retry(gpointer user_data)
{
    AgentChannel *channel = user_data;

    channel->retry_id = 0;
    agent_channel_watch(channel);
    agent_channel_kick_output(channel);
    return G_SOURCE_REMOVE;
}

static gboolean agent_channel_signal(gpointer user_data)
{
    AgentChannel *channel = user_data;

    /* The port changed (host connect, or data): look at once. */
    if (!channel->watch_id) {
        g_debug("host channel: SIGIO, watching the port again");
        if (channel->retry_id) {
            g_source_remove(channel->retry_id);
            channel->retry_id = 0;
        }
        agent_channel_watch(channel);
    }
    agent_channel_kick_output(channel);
    return G_SOURCE_CONTINUE;
}

/* The host is not (or no longer) there. Returns what the watch callback returns. */
static gboolean agent_channel_hangup(AgentChannel *channel, const char *why)
{
    if (!channel->is_port) {
        g_message("host channel closed: path='%s' reason='%s'", channel->path, why);
        agent_host_reset(channel->agent);
        agent_channel_drop_output(channel);
        channel->watch_id = 0;
        if (channel->eof_func)
            channel->eof_func(channel->eof_data);
        return G_SOURCE_REMOVE;
    }
    if (channel->connected) {
        g_message("host disconnected: port='%s'", channel->path);
        channel->connected = FALSE;
    }
    agent_host_reset(channel->agent);
    agent_channel_drop_output(channel);
    channel->watch_id = 0;
    if (!channel->retry_id)
        channel->retry_id = g_timeout_add(channel->retry_ms, agent_channel_retry, channel);
    return G_SOURCE_REMOVE;
}

/* Within the grace period after a host spoke, drops the watch and waits for the port-open
 * notice (SIGIO) or the short retry timer, keeping state and output. FALSE once the grace
 * period is over. */
static gboolean agent_channel_wait_open(AgentChannel *channel)
{
    gint64 now = g_get_monotonic_time();

    if (!channel->hup_since)
        channel->hup_since = now;
    if (now - channel->hup_since >= AGENT_CHANNEL_OPEN_GRACE_US)
        return FALSE;
    g_debug("host channel: the host spoke before the port opened; waiting");
    channel->watch_id = 0;
    if (!channel->retry_id)
        channel->retry_id = g_timeout_add(MIN(channel->retry_ms, 50), agent_channel_retry, channel);
    return TRUE;
}

static gboolean agent_channel_io(int fd, GIOCondition condition, gpointer user_data)
{
    AgentChannel *channel = user_data;
    gsize total = 0;

    while (total < AGENT_CHANNEL_READ_MAX) {
        guint8 buf[4096];
        ssize_t n = read(fd, buf, sizeof(buf));

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
            !(condition & (G_IO_HUP | G_IO_ERR))) {
            channel->hup_since = 0;
            return G_SOURCE_CONTINUE;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EIO) {
            g_autofree char *why = g_strdup_printf("read error: %s", g_strerror(errno));

            return agent_channel_hangup(channel, why);
        }
        if (n <= 0) {
            /* HUP, or end of file: a port reads 0 while the guest kernel thinks no host is
             * there. Right after the host talked to us that is the port-open race. */
            if (channel->is_port && (total > 0 || channel->out->len > 0) &&
                agent_channel_wait_open(channel))
                return G_SOURCE_REMOVE;
            channel->hup_since = 0;
            return agent_channel_hangup(channel, n == 0 ? "end of file" : "hangup");
        }
        if (!channel->connected) {
            g_message("host connected: path='%s'", channel->path);
            channel->connected = TRUE;
        }
        total += (gsize)n;
        agent_host_feed(channel->agent, buf, (gsize)n);
    }
    return G_SOURCE_CONTINUE;
}

/* ---- life cycle -------------------------------------------------------------------------- */

static AgentChannel *agent_channel_new(Agent *agent, const char *path, int fd)
{
    AgentChannel *channel = g_new0(AgentChannel, 1);

    channel->agent = agent;
    channel->path = g_strdup(path);
    channel->fd = fd;
    channel->out = g_byte_array_new();
    agent_set_reply_func(agent, agent_channel_write, channel);
    return channel;
}

AgentChannel *agent_channel_new_port(Agent *agent, const char *path, guint retry_ms, GError **error)
{
    AgentChannel *channel;
    int fd;
    int flags;

    g_return_val_if_fail(agent != NULL && path != NULL && retry_ms > 0, NULL);

    fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int errsv = errno;

        if (errsv == EBUSY)
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_IO,
                        "Cannot open port '%s': another program holds it open", path);
        else
            hm_set_error_errno(error, errsv, "Cannot open port '%s'", path);
        return NULL;
    }
    channel = agent_channel_new(agent, path, fd);
    channel->is_port = TRUE;
    channel->retry_ms = retry_ms;
    /* Ask for a signal when the port changes (the host connects, data arrives). */
    channel->signal_id = g_unix_signal_add(AGENT_CHANNEL_SIGNAL, agent_channel_signal, channel);
    flags = fcntl(fd, F_GETFL);
    if (fcntl(fd, F_SETOWN, getpid()) < 0 || fcntl(fd, F_SETSIG, AGENT_CHANNEL_SIGNAL) < 0 ||
        flags < 0 || fcntl(fd, F_SETFL, flags | O_ASYNC) < 0)
        g_message("port '%s' cannot signal host connects (%s); checking every %u ms", path,
                  g_strerror(errno), retry_ms);
    g_message("host channel: port='%s'", path);
    agent_channel_watch(channel);
    return channel;
}

static int agent_channel_open_device(const char *path, GError **error)
{
    struct stat st;
    int fd;

    if (g_str_has_prefix(path, "fd:")) {
        guint64 n;

        if (!g_ascii_string_to_unsigned(path + 3, 10, 0, G_MAXINT, &n, NULL) ||
            fcntl((int)n, F_GETFD) < 0) {
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                        "'%s' is not an open file descriptor", path);
            return -1;
        }
        fd = (int)n;
        if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 ||
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
            hm_set_error_errno(error, errno, "Cannot set up '%s'", path);
            return -1;
        }
        return fd;
    }
    if (stat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
        struct sockaddr_un addr = {.sun_family = AF_UNIX};

        if (strlen(path) >= sizeof(addr.sun_path)) {
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                        "Socket path '%s' is too long", path);
            return -1;
        }
        memcpy(addr.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
            fcntl(fd, F_SETFL, O_NONBLOCK | O_RDWR) < 0) {
            int errsv = errno;

            if (fd >= 0)
                close(fd);
            hm_set_error_errno(error, errsv, "Cannot connect to '%s'", path);
            return -1;
        }
        return fd;
    }
    fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        hm_set_error_errno(error, errno, "Cannot open '%s'", path);
        return -1;
    }
    if (isatty(fd)) {
        struct termios tio;

        /* Byte-transparent: 0xFF and newlines pass as they are. */
        if (tcgetattr(fd, &tio) == 0) {
            cfmakeraw(&tio);
            tcsetattr(fd, TCSANOW, &tio);
        }
    }
    return fd;
}

AgentChannel *agent_channel_new_device(Agent *agent, const char *path, GSourceFunc eof_func,
                                       gpointer eof_data, GError **error)
{
    AgentChannel *channel;
    int fd;

    g_return_val_if_fail(agent != NULL && path != NULL, NULL);

    fd = agent_channel_open_device(path, error);
    if (fd < 0)
        return NULL;
    channel = agent_channel_new(agent, path, fd);
    channel->eof_func = eof_func;
    channel->eof_data = eof_data;
    g_message("host channel: device='%s'", path);
    agent_channel_watch(channel);
    return channel;
}

void agent_channel_free(AgentChannel *channel)
{
    if (!channel)
        return;
    agent_set_reply_func(channel->agent, NULL, NULL);
    if (channel->watch_id)
        g_source_remove(channel->watch_id);
    if (channel->retry_id)
        g_source_remove(channel->retry_id);
    if (channel->signal_id)
        g_source_remove(channel->signal_id);
    if (channel->out_id)
        g_source_remove(channel->out_id);
    if (channel->fd >= 0)
        close(channel->fd);
    g_byte_array_unref(channel->out);
    g_free(channel->path);
    g_free(channel);
}
