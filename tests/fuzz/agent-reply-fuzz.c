/* Fuzz target: the host's reader of what a guest agent sends (hostile input). The fake
 * channel answers the sync handshake correctly, then hands the input over as the reply to
 * 'prepare' (first byte even) or puts it before the handshake's answer as noise (odd). The
 * reader must never crash, hang or leak, whatever the guest sends. An input that is a JSON
 * object also goes to the typed readers of `info` and `inventory` (orch_agent_*_parse(), the inventory's processes
 * included). */
#include <stdint.h>
#include <string.h>

#include "engine/agent-client.h"

typedef struct {
    OrchVirt parent;
    const uint8_t *data;
    size_t size;
    gboolean noise_first;
} FuzzVirt;

typedef struct {
    OrchVirtChannel parent;
    GString *out; /* what the "guest" sends next */
    gboolean synced;
} FuzzChannel;

static OrchVirtChannel *fuzz_channel_open(OrchVirt *v, const char *d, const char *name,
                                          gboolean force, GError **e)
{
    FuzzChannel *c = g_new0(FuzzChannel, 1);

    c->parent.virt = v;
    c->out = g_string_new(NULL);
    return &c->parent;
}

static gboolean fuzz_channel_send(OrchVirtChannel *chan, const void *buf, gsize len,
                                  HmDeadline deadline, GError **e)
{
    FuzzChannel *c = (FuzzChannel *)chan;
    FuzzVirt *v = (FuzzVirt *)chan->virt;
    const char *id = g_strstr_len(buf, len, "\"id\":");

    if (id && !c->synced) {
        if (v->noise_first)
            g_string_append_len(c->out, (const char *)v->data, v->size);
        g_string_append_printf(c->out, "\xff{\"return\":%.*s}\n",
                               (int)strspn(id + 5, "0123456789"), id + 5);
        c->synced = TRUE;
    } else if (!v->noise_first) {
        g_string_append_len(c->out, (const char *)v->data, v->size);
    }
    return TRUE;
}

static gssize fuzz_channel_recv(OrchVirtChannel *chan, void *buf, gsize len, HmDeadline deadline,
                                GError **e)
{
    FuzzChannel *c = (FuzzChannel *)chan;
    gsize n = MIN(MIN(len, c->out->len), 7); /* small pieces: lines split across reads */

    if (n == 0) {
        g_set_error(e, HM_COMMON_ERROR, HM_COMMON_ERROR_TIMEOUT, "Timed out (fuzz)");
        return -1;
    }
    memcpy(buf, c->out->str, n);
    g_string_erase(c->out, 0, n);
    return n;
}

static void fuzz_channel_close(OrchVirtChannel *chan)
{
    FuzzChannel *c = (FuzzChannel *)chan;

    g_string_free(c->out, TRUE);
    g_free(c);
}

static void fuzz_free(OrchVirt *v)
{
    orch_virt_clear(v);
    g_free(v);
}

static const OrchVirtOps fuzz_ops = {
    .channel_open = fuzz_channel_open,
    .channel_send = fuzz_channel_send,
    .channel_recv = fuzz_channel_recv,
    .channel_close = fuzz_channel_close,
    .free = fuzz_free,
};

/* The typed readers on @data as a reply's "return" object. */
static void fuzz_typed(const uint8_t *data, size_t size)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(OrchAgentInfo) info = NULL;
    g_autoptr(OrchAgentInventory) inv = NULL;
    JsonNode *root;
    gsize total = 0;

    if (!g_utf8_validate((const char *)data, (gssize)size, NULL) ||
        !json_parser_load_from_data(parser, (const char *)data, (gssize)size, NULL) ||
        !(root = json_parser_get_root(parser)) || !JSON_NODE_HOLDS_OBJECT(root))
        return;
    info = orch_agent_info_parse(json_node_get_object(root), NULL);
    g_assert(info != NULL);
    inv = orch_agent_inventory_parse(json_node_get_object(root), NULL);
    /* Touch what the readers built so a bad pointer shows. */
    total += info->version ? strlen(info->version) : 0;
    for (guint i = 0; inv && i < inv->devices->len; i++) {
        OrchAgentDevice *dev = g_ptr_array_index(inv->devices, i);

        g_assert(i < ORCH_AGENT_MAX_DEVICES && dev->ports->len <= ORCH_AGENT_MAX_PORTS);
        total +=
            (dev->name ? strlen(dev->name) : 0) + (dev->node_guid ? strlen(dev->node_guid) : 0);
        for (guint j = 0; j < dev->ports->len; j++) {
            OrchAgentPort *port = g_ptr_array_index(dev->ports, j);

            g_assert(g_strv_length(port->gids) <= ORCH_AGENT_MAX_GIDS);
            total += port->link_layer ? strlen(port->link_layer) : 0;
        }
    }
    g_assert(total < G_MAXSIZE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FuzzVirt *v;
    g_autoptr(OrchAgent) agent = NULL;
    g_autoptr(JsonObject) args = NULL;
    g_autoptr(JsonObject) ret = NULL;

    if (size < 1 || size > 256 * 1024)
        return 0;
    v = g_new0(FuzzVirt, 1);
    orch_virt_init(&v->parent, &fuzz_ops, "fuzz://", "source");
    v->noise_first = data[0] & 1;
    v->data = data + 1;
    v->size = size - 1;
    fuzz_typed(v->data, v->size);
    agent = orch_agent_open(&v->parent, "vm", "org.hotmig.agent.0", 1000, NULL);
    if (agent) {
        args = orch_agent_timeout_args(1000);
        ret = orch_agent_execute(agent, "prepare", args, 1000, NULL);
        if (ret) {
            guint n;
            g_autofree char *quiesced = orch_agent_process_list(ret, "quiesced", &n);
            g_autofree char *failed = orch_agent_process_list(ret, "failed", &n);
            const char *device = orch_json_get_string(ret, "device");
            /* The same object read as an inventory's processes (jobs): bounded, typed. */
            g_autoptr(GPtrArray) procs = orch_agent_processes_parse(ret, NULL);
            guint n_peers = 0;
            g_autofree char *peers = orch_agent_peers_summary(procs, &n_peers);
            g_autofree char *refused = orch_agent_refused_summary(procs);

            for (guint i = 0; procs && i < procs->len; i++) {
                OrchAgentProcess *p = procs->pdata[i];

                g_assert(p->pid > 0 && strlen(p->name) <= ORCH_AGENT_MAX_TOKEN);
                g_assert(!p->job || (*p->job && strlen(p->job) <= ORCH_AGENT_MAX_TOKEN));
                g_assert(p->peers->len <= ORCH_AGENT_MAX_PEERS);
                g_assert(p->refused->len <= ORCH_AGENT_MAX_REFUSED);
                g_assert(!p->unregistered ||
                         (p->device && strlen(p->device) <= ORCH_AGENT_MAX_TOKEN));
            }
            g_assert(!procs || procs->len <= ORCH_AGENT_MAX_PROCESSES);
            /* The standby records (issue 30), as the prepare and the resume read them. */
            for (guint k = 0; k < 2; k++) {
                OrchStandbyFigures sb = {0};
                g_autofree char *text = NULL;

                if (!orch_agent_standby_parse(ret, k ? "resumed" : "quiesced", &sb, NULL))
                    continue;
                g_assert(sb.ms <= ORCH_AGENT_STANDBY_MS_MAX && (sb.used || sb.ms == 0));
                g_assert(sb.switched <= ORCH_AGENT_MAX_PROCESSES * ORCH_AGENT_STANDBY_QPS_MAX &&
                         sb.paused <= ORCH_AGENT_MAX_PROCESSES * ORCH_AGENT_STANDBY_QPS_MAX);
                g_assert(sb.sends <=
                             ORCH_AGENT_MAX_PROCESSES * (guint64)ORCH_AGENT_STANDBY_COUNT_MAX &&
                         sb.receives <=
                             ORCH_AGENT_MAX_PROCESSES * (guint64)ORCH_AGENT_STANDBY_COUNT_MAX);
                text = orch_agent_standby_detail(&sb, k);
                g_assert(sb.used == (*text != '\0'));
            }
            g_assert((peers ? strlen(peers) : 0) + (refused ? strlen(refused) : 0) < G_MAXSIZE);

            /* Touch what the reader built so a bad pointer shows. */
            g_assert(strlen(quiesced) + strlen(failed) + (device ? strlen(device) : 0) <
                     G_MAXSIZE);
        }
    }
    g_clear_pointer(&agent, orch_agent_free);
    orch_virt_free(&v->parent);
    return 0;
}
