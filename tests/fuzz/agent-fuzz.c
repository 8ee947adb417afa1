/* Fuzz target for the agent's parsers: every input goes through
 *  1. the host framer, fed once whole and once in small pieces: both must cut the same lines
 *     (and oversize and sync events); the same with a limit of FUZZ_SMALL_LINE_MAX bytes, so
 *     that overlong lines, cut up by sync bytes and pieces, come with small inputs (the
 *     campaign's inputs are smaller than AGENT_HOST_LINE_MAX: tests/fuzz/run);
 *  2. the host side of an in-process agent (framing, 0xFF sync, JSON requests, commands), fed
 *     in those pieces: every reply must be one line of valid JSON (after the sync byte of a
 *     sync reply). The agent's replies depend on nothing but the framer's events (the fake
 *     verbs answer at once and no main loop runs, so no timer fires), so 1. is what feeding
 *     two agents and comparing their replies checked, for the price of one;
 *  3. the process line framer and parser, with the invariants of a parsed message checked;
 *  4. the kernel uevent filter of the agent (uevent.c).
 * libFuzzer entry point; tests/fuzz/fuzz-replay.c replays the corpus as a test. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-glib/json-glib.h>

#include "guest-agent/agent/agent-priv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *fuzz_find_device(gpointer data, const char *prefer, const char *except, GError **error)
{
    return g_strdup("rxe0");
}

static GPtrArray *fuzz_list_devices(gpointer data, GError **error)
{
    GPtrArray *devices = g_ptr_array_new_with_free_func((GDestroyNotify)agent_rdma_device_free);
    AgentRdmaDevice *dev = agent_rdma_device_new("rxe0", "5054:00ff:fe12:3456");
    AgentRdmaPort *port = agent_rdma_device_add_port(dev, 1, "ACTIVE", "Ethernet", 0);

    g_ptr_array_add(port->gids, g_strdup("fe80::5054:ff:fe12:3456"));
    g_ptr_array_add(devices, dev);
    return devices;
}

static const AgentVerbsOps fuzz_verbs = {.find_active_device = fuzz_find_device,
                                         .list_devices = fuzz_list_devices};

static GLogWriterOutput fuzz_log_drop(GLogLevelFlags level, const GLogField *fields, gsize n_fields,
                                      gpointer user_data)
{
    return G_LOG_WRITER_HANDLED;
}

/* Replies already found valid: the agent sends the same few over and over (about one in two
 * hundred is new), and json-glib's verdict on a string does not change. Bounded. */
#define FUZZ_VALID_MAX 65536

static GHashTable *fuzz_valid; /* GBytes */

static void fuzz_check_reply(const char *data, gsize len, gpointer user_data)
{
    g_autoptr(GBytes) key = g_bytes_new_static(data, len);
    g_autoptr(JsonParser) parser = NULL;
    const char *text = data;
    gsize text_len = len;

    /* One complete line per reply, valid JSON, an object. */
    if (len == 0 || data[len - 1] != '\n' || memchr(data, '\n', len - 1))
        abort();
    if (g_hash_table_contains(fuzz_valid, key))
        return;
    if ((guchar)text[0] == AGENT_SYNC_BYTE) {
        text++;
        text_len--;
    }
    parser = json_parser_new();
    if (!json_parser_load_from_data(parser, text, (gssize)text_len - 1, NULL) ||
        !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser)))
        abort();
    if (g_hash_table_size(fuzz_valid) >= FUZZ_VALID_MAX)
        g_hash_table_remove_all(fuzz_valid);
    g_hash_table_add(fuzz_valid, g_bytes_new(data, len));
}

/* Records each event of the host framer: its kind, length and line. */
static gboolean fuzz_record_frame(AgentFrameEvent event, const char *line, gsize len,
                                  gpointer user_data)
{
    GString *out = user_data;
    guint64 header[2] = {event, len};

    g_string_append_len(out, (const char *)header, sizeof(header));
    g_string_append_len(out, line, (gssize)len);
    return TRUE;
}

/* The host framer (sync byte, overlong lines reported at their end) with a line limit of
 * @max bytes. */
static GString *fuzz_host_frames(const uint8_t *data, size_t size, gsize piece, gsize max)
{
    GString *out = g_string_new(NULL);
    AgentFramer framer;

    agent_framer_init(&framer, max, TRUE, FALSE);
    for (gsize off = 0; off < size; off += piece)
        agent_framer_feed(&framer, data + off, MIN(piece, size - off), fuzz_record_frame, out);
    agent_framer_clear(&framer);
    return out;
}

static void fuzz_host(const uint8_t *data, size_t size, gsize piece)
{
    g_autoptr(Agent) agent = agent_new(&fuzz_verbs, NULL);

    agent_set_reply_func(agent, fuzz_check_reply, NULL);
    for (gsize off = 0; off < size; off += piece)
        agent_host_feed(agent, data + off, MIN(piece, size - off));
}

static gboolean fuzz_proc_frame(AgentFrameEvent event, const char *line, gsize len,
                                gpointer user_data)
{
    AgentProcMsg msg;

    if (event != AGENT_FRAME_LINE)
        return TRUE;
    if (len >= AGENT_PROC_LINE_MAX)
        abort();
    if (agent_proc_msg_parse(line, len, &msg, NULL)) {
        switch (msg.kind) {
        case AGENT_MSG_HELLO:
            if (msg.pid <= 0 || strlen(msg.name) == 0 || strlen(msg.name) > AGENT_NAME_MAX ||
                strpbrk(msg.name, " \t\r\n") || !agent_proc_mode_to_string(msg.mode))
                abort();
            break;
        case AGENT_MSG_DONE:
        case AGENT_MSG_FAILED:
            if (msg.seq == 0)
                abort();
            break;
        case AGENT_MSG_PEER:
            if (msg.qpn >= (1u << 24))
                abort();
            break;
        case AGENT_MSG_REFUSED:
            if (strlen(msg.call) == 0 || strlen(msg.call) > AGENT_CALL_MAX ||
                strpbrk(msg.call, " \t\r\n"))
                abort();
            break;
        case AGENT_MSG_STANDBY:
            break;
        case AGENT_MSG_STATS:
            if (msg.stats.switched > AGENT_STATS_QPS_MAX ||
                msg.stats.paused > AGENT_STATS_QPS_MAX || msg.stats.sends > AGENT_STATS_COUNT_MAX ||
                msg.stats.recvs > AGENT_STATS_COUNT_MAX || msg.stats.ms > AGENT_STATS_MS_MAX ||
                (msg.stats.used != TRUE && msg.stats.used != FALSE))
                abort();
            break;
        case AGENT_MSG_LAST:
        default:
            abort();
        }
    }
    return TRUE;
}

#define FUZZ_SMALL_LINE_MAX 256

/* Framing @data whole and in pieces of @piece bytes gives the same events. */
static void fuzz_check_host_frames(const uint8_t *data, size_t size, gsize piece, gsize max)
{
    g_autoptr(GString) whole = fuzz_host_frames(data, size, size > 0 ? size : 1, max);
    g_autoptr(GString) pieces = fuzz_host_frames(data, size, piece, max);

    if (!g_string_equal(whole, pieces))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gsize piece = 1 + (size > 0 ? data[0] % 13 : 0);
    AgentFramer framer;

    if (!fuzz_valid) {
        g_log_set_writer_func(fuzz_log_drop, NULL, NULL);
        fuzz_valid =
            g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref, NULL);
    }

    fuzz_check_host_frames(data, size, piece, AGENT_HOST_LINE_MAX);
    fuzz_check_host_frames(data, size, piece, FUZZ_SMALL_LINE_MAX);
    fuzz_host(data, size, piece);

    agent_framer_init(&framer, AGENT_PROC_LINE_MAX, FALSE, TRUE);
    agent_framer_feed(&framer, data, size, fuzz_proc_frame, NULL);
    agent_framer_clear(&framer);

    /* The kernel uevent filter: reads nothing outside the message, and what it accepts names
     * an RDMA subsystem. */
    if (agent_uevent_is_rdma(data, size) &&
        (!memmem(data, size, "SUBSYSTEM=infiniband", 20) || !memchr(data, '@', size)))
        abort();
    return 0;
}
