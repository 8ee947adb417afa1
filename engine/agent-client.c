#include "engine/agent-client.h"

#include <gio/gio.h>
#include <string.h>

struct OrchAgent {
    OrchVirtChannel *chan;
    GString *inbuf;   /* bytes received and not yet consumed */
    gboolean in_sync; /* FALSE after a timeout or a garbled reply */
    guint64 next_id;
    /* char *: the commands sent whose replies are not read yet, oldest first. The agent
     * answers the lines of the host in order, one reply each: the next line that comes is
     * the reply to the head. A sync drops them (its 0xFF resets the agent's framer and drops
     * any reply of an operation under way; the host skips everything before its reply). */
    GQueue pending;
};

void orch_agent_free(OrchAgent *agent)
{
    if (!agent)
        return;
    orch_virt_channel_close(agent->chan);
    g_string_free(agent->inbuf, TRUE);
    g_queue_clear_full(&agent->pending, g_free);
    g_free(agent);
}

static gboolean agent_send(OrchAgent *agent, const char *data, gsize len, HmDeadline deadline,
                           GError **error)
{
    OrchVirtChannel *chan = agent->chan;

    return orch_virt_channel_send(chan, data, len, deadline, error);
}

/* Receives more bytes into inbuf; FALSE on error, timeout or end of stream. */
static gboolean agent_fill(OrchAgent *agent, HmDeadline deadline, GError **error)
{
    OrchVirtChannel *chan = agent->chan;
    char buf[4096];
    gssize n = orch_virt_channel_recv(chan, buf, sizeof(buf), deadline, error);

    if (n < 0)
        return FALSE;
    if (n == 0) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT, "The guest agent closed the channel");
        return FALSE;
    }
    g_string_append_len(agent->inbuf, buf, n);
    return TRUE;
}

/* Reads one line (without the newline; owned). Lines over the limit are an error. */
static char *agent_read_line(OrchAgent *agent, HmDeadline deadline, GError **error)
{
    for (;;) {
        char *nl = memchr(agent->inbuf->str, '\n', agent->inbuf->len);

        if (nl) {
            gsize len = nl - agent->inbuf->str;
            char *line = g_strndup(agent->inbuf->str, len);

            g_string_erase(agent->inbuf, 0, len + 1);
            return line;
        }
        if (agent->inbuf->len > ORCH_AGENT_MAX_LINE) {
            g_string_truncate(agent->inbuf, 0);
            agent->in_sync = FALSE;
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT,
                        "The guest agent sent a line longer than %d bytes", ORCH_AGENT_MAX_LINE);
            return NULL;
        }
        if (!agent_fill(agent, deadline, error))
            return NULL;
    }
}

static JsonObject *agent_parse_reply(const char *line, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(GError) local = NULL;
    JsonNode *root;

    /* The guest's: nesting is checked before json-glib (which recurses per level) sees it. */
    if (!g_utf8_validate(line, -1, NULL) ||
        !hm_json_check_depth(line, -1, HM_JSON_MAX_DEPTH, &local) ||
        !json_parser_load_from_data(parser, line, -1, &local)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT, "The guest agent sent bad JSON: %s",
                    local ? local->message : "not UTF-8");
        return NULL;
    }
    root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT,
                    "The guest agent sent a reply that is not a JSON object");
        return NULL;
    }
    return json_object_ref(json_node_get_object(root));
}

/* 0xFF + sync{id}, then @more (request lines, may be NULL) in the same write; skip everything
 * up to the agent's 0xFF, then expect {"return":id}. What follows it are the replies to @more. */
static gboolean agent_sync(OrchAgent *agent, const char *more, HmDeadline deadline,
                           GError **error)
{
    guint64 id = (g_get_real_time() << 8) ^ ++agent->next_id;
    g_autofree char *req = g_strdup_printf("\xff{\"execute\":\"sync\",\"arguments\":{\"id\":%" G_GUINT64_FORMAT "}}\n%s", id & G_MAXINT32, more ? more : "");
    gint64 want = (gint64)(id & G_MAXINT32);

    g_string_truncate(agent->inbuf, 0);
    if (!agent_send(agent, req, strlen(req), deadline, error))
        return FALSE;
    for (;;) {
        char *ff = memchr(agent->inbuf->str, 0xff, agent->inbuf->len);

        if (ff) {
            g_string_erase(agent->inbuf, 0, ff - agent->inbuf->str + 1);
            break;
        }
        g_string_truncate(agent->inbuf, 0);
        if (!agent_fill(agent, deadline, error))
            return FALSE;
    }
    for (;;) {
        g_autofree char *line = agent_read_line(agent, deadline, error);
        g_autoptr(JsonObject) reply = NULL;
        const char *text;
        JsonNode *ret;

        if (!line)
            return FALSE;
        /* The reply to an earlier sync may come first (a retried open): ours follows its own
         * 0xFF, which then starts this line. */
        text = strrchr(line, 0xff) ? strrchr(line, 0xff) + 1 : line;
        reply = agent_parse_reply(text, NULL);
        ret = reply ? json_object_get_member(reply, "return") : NULL;
        if (ret && JSON_NODE_HOLDS_VALUE(ret) &&
            json_node_get_value_type(ret) == G_TYPE_INT64 && json_node_get_int(ret) == want) {
            agent->in_sync = TRUE;
            return TRUE;
        }
        /* A stale reply or noise: keep reading until ours or the deadline. */
    }
}

/* The request line for @command with @args (borrowed, may be NULL), newline included (owned). */
static char *agent_request_line(const char *command, JsonObject *args)
{
    g_autoptr(JsonBuilder) builder = json_builder_new();
    g_autoptr(JsonNode) root = NULL;
    g_autofree char *body = NULL;

    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "execute");
    json_builder_add_string_value(builder, command);
    if (args) {
        JsonNode *node = json_node_init_object(json_node_alloc(), args);

        json_builder_set_member_name(builder, "arguments");
        json_builder_add_value(builder, node);
    }
    json_builder_end_object(builder);
    root = json_builder_get_root(builder);
    body = json_to_string(root, FALSE);
    return g_strconcat(body, "\n", NULL);
}

/* The lines of @reqs, one write's worth (owned); their commands join the pending queue. */
static char *agent_requests_queue(OrchAgent *agent, const OrchAgentRequest *reqs, guint n)
{
    g_autoptr(GString) out = g_string_new(NULL);

    for (guint i = 0; i < n; i++) {
        g_autofree char *line = agent_request_line(reqs[i].command, reqs[i].args);

        g_string_append(out, line);
        g_queue_push_tail(&agent->pending, g_strdup(reqs[i].command));
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}

/* The replies still expected are of no use any more (a reply failed, or a caller stopped
 * reading): the next command re-synchronizes first, which skips them. */
static void agent_drop_pending(OrchAgent *agent)
{
    if (g_queue_is_empty(&agent->pending))
        return;
    g_queue_clear_full(&agent->pending, g_free);
    agent->in_sync = FALSE;
}

/* The channel failed under @command (@local: a read or write error): nothing more is expected
 * on it in order; the error, a timeout or an agent error, names the command. */
static void agent_lost(OrchAgent *agent, const char *command, const GError *local, GError **error)
{
    agent_drop_pending(agent);
    agent->in_sync = FALSE;
    g_set_error(error, ORCH_ERROR,
                g_error_matches(local, HM_COMMON_ERROR, HM_COMMON_ERROR_TIMEOUT)
                    ? ORCH_ERROR_TIMEOUT
                    : ORCH_ERROR_AGENT,
                "Agent command '%s': %s", command, local->message);
}

/* orch_agent_open_with(); @force: the channel is taken from a client that holds it. */
static OrchAgent *agent_open(OrchVirt *virt, const char *domain, const char *channel,
                             gboolean force, const OrchAgentRequest *reqs, guint n_reqs,
                             guint timeout_ms, GError **error)
{
    g_autoptr(OrchAgent) agent = g_new0(OrchAgent, 1);
    g_autoptr(GError) local = NULL;
    HmDeadline deadline = hm_deadline_in_ms(timeout_ms);
    gint64 start = g_get_monotonic_time();

    agent->inbuf = g_string_new(NULL);
    g_queue_init(&agent->pending);
    /* Two tries, each with half the time: libvirtd may still be tearing down the stream of
     * a client that died (a killed migrate-vm), and a channel opened meanwhile can stay
     * silent although the agent answered (seen with libvirt 9.0). A fresh stream works.
     * The requests go again with the second handshake: they must change nothing. */
    for (guint attempt = 1; attempt <= 2; attempt++) {
        HmDeadline until = attempt == 1 ? hm_deadline_in_ms(MAX(timeout_ms / 2, 1)) : deadline;
        g_autofree char *more = NULL;

        g_clear_error(&local);
        g_clear_pointer(&agent->chan, orch_virt_channel_close);
        g_queue_clear_full(&agent->pending, g_free);
        agent->chan = orch_virt_channel_open(virt, domain, channel, force, error);
        if (!agent->chan)
            return NULL;
        more = agent_requests_queue(agent, reqs, n_reqs);
        if (agent_sync(agent, more, until, &local)) {
            g_debug("Agent of '%s' on %s host: channel open and in sync in %.1f ms%s", domain,
                    virt->label, (g_get_monotonic_time() - start) / 1000.0,
                    n_reqs ? " (requests sent with the handshake)" : "");
            return g_steal_pointer(&agent);
        }
        g_debug("Agent handshake with '%s', try %u: %s", domain, attempt, local->message);
    }
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT,
                "The guest agent of '%s' on %s host did not answer the handshake within %u ms: %s",
                domain, virt->label, timeout_ms, local->message);
    return NULL;
}

OrchAgent *orch_agent_open_with(OrchVirt *virt, const char *domain, const char *channel,
                                const OrchAgentRequest *reqs, guint n_reqs, guint timeout_ms,
                                GError **error)
{
    return agent_open(virt, domain, channel, TRUE, reqs, n_reqs, timeout_ms, error);
}

OrchAgent *orch_agent_open(OrchVirt *virt, const char *domain, const char *channel,
                           guint timeout_ms, GError **error)
{
    return orch_agent_open_with(virt, domain, channel, NULL, 0, timeout_ms, error);
}

/* Reads the reply to the oldest pending request, waiting until @deadline. A reply that does
 * not come, or is not what the protocol says, leaves the agent out of sync (the rest of the
 * pending replies dropped); an error reply keeps the order. */
static JsonObject *agent_reply_read(OrchAgent *agent, HmDeadline deadline, gint64 start,
                                    GError **error)
{
    g_autofree char *command = g_queue_pop_head(&agent->pending);
    g_autofree char *line = NULL;
    g_autoptr(JsonObject) reply = NULL;
    g_autoptr(GError) local = NULL;
    JsonNode *member;

    g_return_val_if_fail(command != NULL, NULL);
    if (!(line = agent_read_line(agent, deadline, &local))) {
        agent_lost(agent, command, local, error);
        return NULL;
    }
    g_debug("Agent command '%s' answered in %.1f ms", command,
            (g_get_monotonic_time() - start) / 1000.0);
    reply = agent_parse_reply(line, &local);
    if (!reply) {
        agent_drop_pending(agent);
        agent->in_sync = FALSE;
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "Agent command '%s': ",
                                   command);
        return NULL;
    }
    member = json_object_get_member(reply, "error");
    if (member) {
        JsonObject *err = JSON_NODE_HOLDS_OBJECT(member) ? json_node_get_object(member) : NULL;
        const char *cls = orch_json_get_string(err, "class");
        /* The guest's words: stripped of what a terminal, a log or JSON would act on. */
        g_autofree char *cls_text = hm_text_sanitize(cls ? cls : "?", 64);
        g_autofree char *desc_text =
            hm_text_sanitize(orch_json_get_string(err, "desc"), HM_TEXT_UNTRUSTED_MAX);

        g_set_error(error, ORCH_ERROR,
                    g_strcmp0(cls, "Busy") == 0 ? ORCH_ERROR_BUSY : ORCH_ERROR_AGENT,
                    "Agent command '%s' failed: %s: %s", command, cls_text, desc_text);
        return NULL;
    }
    member = json_object_get_member(reply, "return");
    if (!member || !JSON_NODE_HOLDS_OBJECT(member)) {
        agent_drop_pending(agent);
        agent->in_sync = FALSE;
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT,
                    "Agent command '%s': the reply has no \"return\" object", command);
        return NULL;
    }
    return json_object_ref(json_node_get_object(member));
}

JsonObject *orch_agent_reply(OrchAgent *agent, guint timeout_ms, GError **error)
{
    g_return_val_if_fail(agent != NULL, NULL);
    if (g_queue_is_empty(&agent->pending)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT,
                    "No reply of the guest agent to wait for (an earlier reply failed)");
        return NULL;
    }
    return agent_reply_read(agent, hm_deadline_in_ms(timeout_ms), g_get_monotonic_time(),
                            error);
}

/* Sends @reqs in one write, re-synchronizing first when needed (replies nobody read would be
 * taken for theirs); their replies are read with agent_reply_read() in order. */
static gboolean agent_send_requests(OrchAgent *agent, const OrchAgentRequest *reqs, guint n,
                                    HmDeadline deadline, GError **error)
{
    g_autofree char *lines = NULL;
    g_autoptr(GError) local = NULL;

    agent_drop_pending(agent);
    if (!agent->in_sync && !agent_sync(agent, NULL, deadline, &local)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT,
                    "Cannot re-synchronize with the guest agent: %s", local->message);
        return FALSE;
    }
    lines = agent_requests_queue(agent, reqs, n);
    if (!agent_send(agent, lines, strlen(lines), deadline, &local)) {
        agent_lost(agent, reqs[0].command, local, error);
        return FALSE;
    }
    return TRUE;
}

JsonObject *orch_agent_execute(OrchAgent *agent, const char *command, JsonObject *args,
                               guint timeout_ms, GError **error)
{
    HmDeadline deadline = hm_deadline_in_ms(timeout_ms);
    OrchAgentRequest req = {command, args};
    gint64 start = g_get_monotonic_time();

    if (!agent_send_requests(agent, &req, 1, deadline, error))
        return NULL;
    return agent_reply_read(agent, deadline, start, error);
}

JsonObject *orch_agent_timeout_args(guint timeout_ms)
{
    JsonObject *args = json_object_new();

    json_object_set_int_member(args, "timeout_ms", timeout_ms);
    return args;
}

/* Names of the processes listed in @member of @ret ("pid name (error)"), comma-separated. */
char *orch_agent_process_list(JsonObject *ret, const char *member, guint *ret_count)
{
    JsonNode *node = json_object_get_member(ret, member);
    JsonArray *arr = node && JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;
    g_autoptr(GString) out = g_string_new(NULL);
    guint n = arr ? json_array_get_length(arr) : 0;

    for (guint i = 0; i < n && i < 16; i++) {
        JsonNode *el = json_array_get_element(arr, i);
        JsonObject *p = JSON_NODE_HOLDS_OBJECT(el) ? json_node_get_object(el) : NULL;
        g_autofree char *name = hm_text_sanitize(orch_json_get_string(p, "name"), 64);
        const char *err_raw = orch_json_get_string(p, "error");
        g_autofree char *err = err_raw ? hm_text_sanitize(err_raw, HM_TEXT_UNTRUSTED_MAX) : NULL;
        JsonNode *pid = p ? json_object_get_member(p, "pid") : NULL;

        g_string_append_printf(out, "%s%s[%" G_GINT64_FORMAT "]%s%s%s", i ? ", " : "",
                               *name ? name : "?",
                               pid && JSON_NODE_HOLDS_VALUE(pid) &&
                                       json_node_get_value_type(pid) == G_TYPE_INT64
                                   ? json_node_get_int(pid)
                                   : (gint64)-1,
                               err ? " (" : "", err ? err : "", err ? ")" : "");
    }
    if (n > 16)
        g_string_append_printf(out, ", and %u more", n - 16);
    *ret_count = n;
    return g_string_free(g_steal_pointer(&out), FALSE);
}

gboolean orch_agent_resume(OrchVirt *virt, const char *domain, const char *channel,
                           guint agent_timeout_ms, guint resume_timeout_ms, char **ret_detail,
                           OrchStandbyFigures *ret_standby, GError **error)
{
    g_autoptr(OrchAgent) agent = orch_agent_open(virt, domain, channel, agent_timeout_ms, error);

    return agent && orch_agent_resume_open(agent, agent_timeout_ms, resume_timeout_ms, ret_detail,
                                           ret_standby, error);
}

gboolean orch_agent_resume_open(OrchAgent *agent, guint agent_timeout_ms, guint resume_timeout_ms,
                                char **ret_detail, OrchStandbyFigures *ret_standby, GError **error)
{
    g_autoptr(JsonObject) args = orch_agent_timeout_args(resume_timeout_ms);
    g_autoptr(JsonObject) ret = NULL;
    g_autofree char *resumed = NULL;
    g_autofree char *failed = NULL;
    const char *device;
    const char *device_error;
    guint n_resumed;
    guint n_failed;
    HmDeadline deadline = hm_deadline_in_ms(resume_timeout_ms + agent_timeout_ms);

    /* A resume under way (asked by a migrate-vm that was killed, or by an earlier try) ends
     * by itself: ask again once it did (resume is idempotent). */
    for (;;) {
        g_autoptr(GError) local = NULL;

        ret = orch_agent_execute(agent, "resume", args, resume_timeout_ms + agent_timeout_ms,
                                 &local);
        if (ret || !g_error_matches(local, ORCH_ERROR, ORCH_ERROR_BUSY) ||
            hm_deadline_remaining_ms(deadline) < 250) {
            if (!ret)
                g_propagate_error(error, g_steal_pointer(&local));
            break;
        }
        g_debug("%s: waiting for it", local->message);
        g_usleep(250 * 1000);
    }
    if (!ret)
        return FALSE;
    resumed = orch_agent_process_list(ret, "resumed", &n_resumed);
    failed = orch_agent_process_list(ret, "failed", &n_failed);
    device = orch_json_get_string(ret, "device");
    device_error = orch_json_get_string(ret, "device_error");
    /* The agent answered: a failure from here on is the guest's, ORCH_ERROR_FAILED, which a
     * retry must not turn into success (a second resume finds the processes running and
     * resumes none: the failed ones would go unreported). */
    if (n_failed > 0 && (!device || !*device) && device_error) {
        /* The processes waited for a device that never came: that is the failure. */
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "The guest's RDMA device never came up (%s); %u process(es) failed to "
                    "resume: %s", device_error, n_failed, failed);
        return FALSE;
    }
    if (n_failed > 0) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "%u process(es) failed to resume: %s", n_failed, failed);
        return FALSE;
    }
    {
        g_autofree char *device_text = hm_text_sanitize(device, 64);
        OrchStandbyFigures figures = {0};
        /* what the switch back did: the guest's word, for the report only */
        g_autofree char *standby = orch_agent_standby_report(ret, "resumed", TRUE, &figures);

        *ret_detail = g_strdup_printf("%u process(es) resumed on %s%s", n_resumed,
                                      *device_text ? device_text : "no RDMA device", standby);
        if (ret_standby)
            *ret_standby = figures;
    }
    return TRUE;
}

/* ---- typed calls --------------------------------------------------------------------------- */

void orch_agent_info_free(OrchAgentInfo *info)
{
    if (!info)
        return;
    g_free(info->version);
    g_free(info);
}

static void agent_port_free(OrchAgentPort *port)
{
    g_free(port->link_layer);
    g_strfreev(port->gids);
    g_free(port);
}

static void agent_device_free(OrchAgentDevice *dev)
{
    g_free(dev->name);
    g_free(dev->node_guid);
    g_ptr_array_unref(dev->ports);
    g_free(dev);
}

void orch_agent_inventory_free(OrchAgentInventory *inv)
{
    if (!inv)
        return;
    g_ptr_array_unref(inv->devices);
    if (inv->processes)
        g_ptr_array_unref(inv->processes);
    g_clear_error(&inv->processes_error);
    g_free(inv->standby_state);
    g_free(inv);
}

/* The array member @name of @obj (borrowed), NULL when missing or of another type; more than
 * @max elements is an error naming @what. */
static gboolean agent_array(JsonObject *obj, const char *name, guint max, const char *what,
                            JsonArray **ret, GError **error)
{
    JsonNode *node = obj ? json_object_get_member(obj, name) : NULL;
    JsonArray *array = node && JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;

    if (array && json_array_get_length(array) > max) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT,
                    "The agent's %s lists %u %s, more than %u", what,
                    json_array_get_length(array), name, max);
        return FALSE;
    }
    *ret = array;
    return TRUE;
}

/* Element @i of @array as an object (borrowed), NULL when it is not one. */
static JsonObject *agent_object_at(JsonArray *array, guint i)
{
    JsonNode *node = json_array_get_element(array, i);

    return JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
}

OrchAgentInfo *orch_agent_info_parse(JsonObject *ret, GError **error)
{
    g_autoptr(OrchAgentInfo) info = g_new0(OrchAgentInfo, 1);
    JsonNode *protocol = ret ? json_object_get_member(ret, "protocol") : NULL;

    g_return_val_if_fail(ret != NULL, NULL);
    info->version = g_strdup(orch_json_get_string(ret, "version"));
    if (protocol && JSON_NODE_HOLDS_VALUE(protocol) &&
        json_node_get_value_type(protocol) == G_TYPE_INT64)
        info->protocol = json_node_get_int(protocol);
    return g_steal_pointer(&info);
}

static OrchAgentPort *agent_port_parse(JsonObject *obj, GError **error)
{
    g_autoptr(GPtrArray) gids = g_ptr_array_new_with_free_func(g_free);
    OrchAgentPort *port;
    JsonArray *array = NULL;

    if (!agent_array(obj, "gids", ORCH_AGENT_MAX_GIDS, "inventory port", &array, error))
        return NULL;
    for (guint i = 0; array && i < json_array_get_length(array); i++) {
        JsonNode *node = json_array_get_element(array, i);

        if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING)
            break;
        g_ptr_array_add(gids, g_strdup(json_node_get_string(node)));
    }
    g_ptr_array_add(gids, NULL);
    port = g_new0(OrchAgentPort, 1);
    port->link_layer = g_strdup(orch_json_get_string(obj, "link_layer"));
    port->gids = (char **)g_ptr_array_steal(gids, NULL);
    return port;
}

static OrchAgentDevice *agent_device_parse(JsonObject *obj, GError **error)
{
    OrchAgentDevice *dev = g_new0(OrchAgentDevice, 1);
    JsonArray *ports = NULL;

    dev->name = g_strdup(orch_json_get_string(obj, "name"));
    dev->node_guid = g_strdup(orch_json_get_string(obj, "node_guid"));
    dev->ports = g_ptr_array_new_with_free_func((GDestroyNotify)agent_port_free);
    if (!agent_array(obj, "ports", ORCH_AGENT_MAX_PORTS, "inventory device", &ports, error)) {
        agent_device_free(dev);
        return NULL;
    }
    for (guint i = 0; ports && i < json_array_get_length(ports); i++) {
        JsonObject *p = agent_object_at(ports, i);
        OrchAgentPort *port;

        if (!p)
            continue;
        if (!(port = agent_port_parse(p, error))) {
            agent_device_free(dev);
            return NULL;
        }
        g_ptr_array_add(dev->ports, port);
    }
    return dev;
}

OrchAgentInventory *orch_agent_inventory_parse(JsonObject *ret, GError **error)
{
    g_autoptr(OrchAgentInventory) inv = g_new0(OrchAgentInventory, 1);
    JsonArray *devices = NULL;

    g_return_val_if_fail(ret != NULL, NULL);
    inv->devices = g_ptr_array_new_with_free_func((GDestroyNotify)agent_device_free);
    if (!agent_array(ret, "devices", ORCH_AGENT_MAX_DEVICES, "inventory", &devices, error))
        return NULL;
    for (guint i = 0; devices && i < json_array_get_length(devices); i++) {
        JsonObject *d = agent_object_at(devices, i);
        OrchAgentDevice *dev = d ? agent_device_parse(d, error) : g_new0(OrchAgentDevice, 1);

        if (!dev)
            return NULL;
        if (!dev->ports)
            dev->ports = g_ptr_array_new_with_free_func((GDestroyNotify)agent_port_free);
        g_ptr_array_add(inv->devices, dev);
    }
    /* The processes (jobs) do not make the devices unreadable: kept apart with their error. */
    inv->processes = orch_agent_processes_parse(ret, &inv->processes_error);
    {
        JsonNode *sb = json_object_get_member(ret, "standby");

        if (sb && JSON_NODE_HOLDS_OBJECT(sb))
            inv->standby_state =
                g_strdup(orch_json_get_string(json_node_get_object(sb), "state"));
    }
    return g_steal_pointer(&inv);
}

/* {"protocol": @protocol}, or NULL for 0 (owned). */
static JsonObject *agent_info_args(guint protocol)
{
    JsonObject *args;

    if (!protocol)
        return NULL;
    args = json_object_new();
    json_object_set_int_member(args, "protocol", protocol);
    return args;
}

OrchAgentInfo *orch_agent_info(OrchAgent *agent, guint protocol, guint timeout_ms,
                               GError **error)
{
    g_autoptr(JsonObject) args = agent_info_args(protocol);
    g_autoptr(JsonObject) ret = orch_agent_execute(agent, "info", args, timeout_ms, error);

    return ret ? orch_agent_info_parse(ret, error) : NULL;
}

OrchAgentInventory *orch_agent_inventory(OrchAgent *agent, guint timeout_ms, GError **error)
{
    g_autoptr(JsonObject) ret = orch_agent_execute(agent, "inventory", NULL, timeout_ms, error);

    return ret ? orch_agent_inventory_parse(ret, error) : NULL;
}

/* Reads the replies to `info` and `inventory` sent in one write, each waited for at most
 * @timeout_ms. When info fails, that is the error: the inventory's reply is not waited for
 * (the agent re-synchronizes before its next command, which skips it). */
static OrchAgentInventory *agent_inventory_replies(OrchAgent *agent, guint timeout_ms,
                                                   GError **error)
{
    g_autoptr(JsonObject) info_ret = orch_agent_reply(agent, timeout_ms, error);
    g_autoptr(OrchAgentInfo) info = info_ret ? orch_agent_info_parse(info_ret, error) : NULL;
    g_autoptr(JsonObject) inv_ret = NULL;

    if (!info) {
        agent_drop_pending(agent);
        return NULL;
    }
    inv_ret = orch_agent_reply(agent, timeout_ms, error);
    return inv_ret ? orch_agent_inventory_parse(inv_ret, error) : NULL;
}

OrchAgent *orch_agent_open_inventory(OrchVirt *virt, const char *domain, const char *channel,
                                     guint timeout_ms, OrchAgentInventory **ret_inv,
                                     GError **inv_error, GError **error)
{
    g_autoptr(JsonObject) args = agent_info_args(2);
    OrchAgentRequest reqs[] = {{"info", args}, {"inventory", NULL}};
    g_autoptr(OrchAgent) agent =
        orch_agent_open_with(virt, domain, channel, reqs, G_N_ELEMENTS(reqs), timeout_ms, error);

    if (!agent)
        return NULL;
    *ret_inv = agent_inventory_replies(agent, timeout_ms, inv_error);
    return g_steal_pointer(&agent);
}

/* ---- the processes of an inventory reply (jobs, issue 18) -------------------------------- */

static void agent_peer_free(OrchAgentPeer *peer)
{
    if (!peer)
        return;
    g_free(peer->gid);
    g_free(peer);
}

void orch_agent_process_free(OrchAgentProcess *proc)
{
    if (!proc)
        return;
    g_free(proc->name);
    g_free(proc->state);
    g_free(proc->job);
    if (proc->peers)
        g_ptr_array_unref(proc->peers);
    if (proc->refused)
        g_ptr_array_unref(proc->refused);
    g_free(proc->device);
    g_free(proc);
}

/* Sets @error; returns NULL for the caller to return. */
static gpointer agent_bad(GError **error, const char *what, guint i)
{
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT,
                "The agent's inventory is malformed: %s of process %u", what, i);
    return NULL;
}

/* A 1..ORCH_AGENT_MAX_TOKEN printable bytes string without white space, or NULL. */
static const char *agent_token(JsonNode *node)
{
    const char *s;
    gsize n;

    if (!node || !JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING)
        return NULL;
    s = json_node_get_string(node);
    n = strlen(s);
    if (n == 0 || n > ORCH_AGENT_MAX_TOKEN)
        return NULL;
    for (gsize k = 0; k < n; k++)
        if ((guchar)s[k] <= 0x20 || (guchar)s[k] >= 0x7f)
            return NULL;
    return s;
}

static gboolean agent_int(JsonObject *o, const char *member, gint64 min, gint64 max, gint64 *ret)
{
    JsonNode *n = json_object_get_member(o, member);

    if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64)
        return FALSE;
    *ret = json_node_get_int(n);
    return *ret >= min && *ret <= max;
}

/* @member of @o as an array of at most @max elements; absent reads as NULL (TRUE). */
static gboolean agent_opt_array(JsonObject *o, const char *member, guint max, JsonArray **ret)
{
    JsonNode *n = json_object_get_member(o, member);

    *ret = NULL;
    if (!n)
        return TRUE;
    if (!JSON_NODE_HOLDS_ARRAY(n) || json_array_get_length(json_node_get_array(n)) > max)
        return FALSE;
    *ret = json_node_get_array(n);
    return TRUE;
}

/* ---- what the standby path did: the processes' "standby" records (issue 30) ------------- */

/* Adds the "standby" record @sb (of process @i of @member; NULL: not an object) to @sum. */
static gboolean agent_standby_add(JsonObject *sb, const char *member, guint i,
                                  OrchStandbyFigures *sum, GError **error)
{
    static const char *const names[] = {"switched", "paused", "sends", "receives", "ms"};
    static const gint64 max[] = {ORCH_AGENT_STANDBY_QPS_MAX, ORCH_AGENT_STANDBY_QPS_MAX,
                                 ORCH_AGENT_STANDBY_COUNT_MAX, ORCH_AGENT_STANDBY_COUNT_MAX,
                                 ORCH_AGENT_STANDBY_MS_MAX};
    JsonNode *used = sb ? json_object_get_member(sb, "used") : NULL;
    const char *bad = !sb ? "standby" : NULL;
    gint64 v[G_N_ELEMENTS(names)];

    if (!bad &&
        (!used || !JSON_NODE_HOLDS_VALUE(used) || json_node_get_value_type(used) != G_TYPE_BOOLEAN))
        bad = "used";
    for (guint k = 0; !bad && k < G_N_ELEMENTS(names); k++)
        if (!agent_int(sb, names[k], 0, max[k], &v[k]))
            bad = names[k];
    if (bad) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT,
                    "The agent's standby figures are malformed: '%s' of process %u in '%s'", bad, i,
                    member);
        return FALSE;
    }
    /* at most ORCH_AGENT_MAX_PROCESSES of each: no sum overflows */
    sum->switched += (guint)v[0];
    sum->paused += (guint)v[1];
    sum->sends += (guint64)v[2];
    sum->receives += (guint64)v[3];
    if (json_node_get_boolean(used)) {
        sum->used = TRUE;
        sum->ms = MAX(sum->ms, (guint)v[4]);
    }
    return TRUE;
}

gboolean orch_agent_standby_parse(JsonObject *ret, const char *member,
                                  OrchStandbyFigures *ret_figures, GError **error)
{
    OrchStandbyFigures sum = {0};
    JsonArray *procs;

    if (!agent_array(ret, member, ORCH_AGENT_MAX_PROCESSES, "answer", &procs, error))
        return FALSE;
    for (guint i = 0; procs && i < json_array_get_length(procs); i++) {
        JsonObject *p = agent_object_at(procs, i);
        JsonNode *sb = p ? json_object_get_member(p, "standby") : NULL;

        if (sb && !agent_standby_add(JSON_NODE_HOLDS_OBJECT(sb) ? json_node_get_object(sb) : NULL,
                                     member, i, &sum, error))
            return FALSE;
    }
    *ret_figures = sum;
    return TRUE;
}

char *orch_agent_standby_detail(const OrchStandbyFigures *figures, gboolean back)
{
    /* no connection switched (the peers could not follow): no switch, no pause of one */
    g_autofree char *pause =
        figures->switched
            ? g_strdup_printf(", %s pause %u ms", back ? "switch-back" : "switch", figures->ms)
            : g_strdup("");

    if (!figures->used || (back && !figures->switched)) /* nothing ran there: nothing to say */
        return g_strdup("");
    if (back)
        return g_strdup_printf("; standby: carried %" G_GUINT64_FORMAT " sends and "
                               "%" G_GUINT64_FORMAT " receives%s",
                               figures->sends, figures->receives, pause);
    return g_strdup_printf("; standby: %u connection(s) switched, %u paused until the resume%s",
                           figures->switched, figures->paused, pause);
}

static OrchAgentProcess *agent_process_parse(JsonObject *o, guint i, GError **error)
{
    g_autoptr(OrchAgentProcess) proc = g_new0(OrchAgentProcess, 1);
    JsonArray *peers, *refused;
    gint64 v;
    const char *str;

    proc->peers = g_ptr_array_new_with_free_func((GDestroyNotify)agent_peer_free);
    proc->refused = g_ptr_array_new_with_free_func(g_free);
    if (!agent_int(o, "pid", 1, G_MAXINT, &v))
        return agent_bad(error, "'pid'", i);
    proc->pid = (gint)v;
    if (!(str = agent_token(json_object_get_member(o, "name"))))
        return agent_bad(error, "'name'", i);
    proc->name = g_strdup(str);
    if (json_object_has_member(o, "state")) {
        if (!(str = agent_token(json_object_get_member(o, "state"))))
            return agent_bad(error, "'state'", i);
        proc->state = g_strdup(str);
    }
    if (json_object_has_member(o, "job")) {
        if (!(str = agent_token(json_object_get_member(o, "job"))))
            return agent_bad(error, "'job' (1 to 64 printable bytes)", i);
        proc->job = g_strdup(str);
    }
    if (!agent_opt_array(o, "peers", ORCH_AGENT_MAX_PEERS, &peers))
        return agent_bad(error, "'peers' (an array of at most 256)", i);
    for (guint k = 0; peers && k < json_array_get_length(peers); k++) {
        JsonNode *el = json_array_get_element(peers, k);
        JsonObject *po = JSON_NODE_HOLDS_OBJECT(el) ? json_node_get_object(el) : NULL;
        JsonNode *gn = po ? json_object_get_member(po, "gid") : NULL;
        g_autoptr(GInetAddress) addr = NULL;
        OrchAgentPeer *peer;

        if (gn && JSON_NODE_HOLDS_VALUE(gn) && json_node_get_value_type(gn) == G_TYPE_STRING &&
            strlen(json_node_get_string(gn)) <= 45)
            addr = g_inet_address_new_from_string(json_node_get_string(gn));
        if (!addr || g_inet_address_get_family(addr) != G_SOCKET_FAMILY_IPV6 ||
            !agent_int(po, "qpn", 0, (1 << 24) - 1, &v))
            return agent_bad(error, "a peer (gid: IPv6 text, qpn < 2^24)", i);
        peer = g_new0(OrchAgentPeer, 1);
        peer->gid = g_inet_address_to_string(addr);
        peer->qpn = (guint)v;
        g_ptr_array_add(proc->peers, peer);
    }
    if (json_object_has_member(o, "peers_dropped")) {
        if (!agent_int(o, "peers_dropped", 0, G_MAXINT, &v))
            return agent_bad(error, "'peers_dropped'", i);
        proc->peers_dropped = (guint)v;
    }
    if (!agent_opt_array(o, "refused", ORCH_AGENT_MAX_REFUSED, &refused))
        return agent_bad(error, "'refused' (an array of at most 16)", i);
    for (guint k = 0; refused && k < json_array_get_length(refused); k++) {
        if (!(str = agent_token(json_array_get_element(refused, k))))
            return agent_bad(error, "a refused call (1 to 64 printable bytes)", i);
        g_ptr_array_add(proc->refused, g_strdup(str));
    }
    return g_steal_pointer(&proc);
}

/* One of "unregistered": {"pid","name","device"}. */
static OrchAgentProcess *agent_unregistered_parse(JsonNode *el, guint i, GError **error)
{
    g_autoptr(OrchAgentProcess) proc = g_new0(OrchAgentProcess, 1);
    JsonObject *o = JSON_NODE_HOLDS_OBJECT(el) ? json_node_get_object(el) : NULL;
    gint64 v;
    const char *str;

    proc->peers = g_ptr_array_new_with_free_func((GDestroyNotify)agent_peer_free);
    proc->refused = g_ptr_array_new_with_free_func(g_free);
    proc->unregistered = TRUE;
    if (!o || !agent_int(o, "pid", 1, G_MAXINT, &v))
        return agent_bad(error, "'pid' of unregistered entry", i);
    proc->pid = (gint)v;
    if (!(str = agent_token(json_object_get_member(o, "name"))))
        return agent_bad(error, "'name' of unregistered entry", i);
    proc->name = g_strdup(str);
    if (!(str = agent_token(json_object_get_member(o, "device"))))
        return agent_bad(error, "'device' of unregistered entry", i);
    proc->device = g_strdup(str);
    return g_steal_pointer(&proc);
}

/* "unregistered" and "unregistered_dropped" of @ret appended to @procs. */
static gboolean agent_unregistered_parse_all(JsonObject *ret, GPtrArray *procs, GError **error)
{
    JsonArray *arr;
    gint64 v = 0;

    if (!agent_opt_array(ret, "unregistered", ORCH_AGENT_MAX_UNREGISTERED, &arr)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT,
                    "The agent's inventory is malformed: 'unregistered' is not an array of at "
                    "most %d",
                    ORCH_AGENT_MAX_UNREGISTERED);
        return FALSE;
    }
    if (json_object_has_member(ret, "unregistered_dropped") &&
        (!agent_int(ret, "unregistered_dropped", 0, G_MAXINT, &v) || !arr ||
         json_array_get_length(arr) == 0)) {
        g_set_error_literal(error, ORCH_ERROR, ORCH_ERROR_AGENT,
                            "The agent's inventory is malformed: 'unregistered_dropped'");
        return FALSE;
    }
    for (guint i = 0; arr && i < json_array_get_length(arr); i++) {
        OrchAgentProcess *proc = agent_unregistered_parse(json_array_get_element(arr, i), i, error);

        if (!proc)
            return FALSE;
        if (i + 1 == json_array_get_length(arr))
            proc->more = (guint)v;
        g_ptr_array_add(procs, proc);
    }
    return TRUE;
}

GPtrArray *orch_agent_processes_parse(JsonObject *ret, GError **error)
{
    g_autoptr(GPtrArray) procs =
        g_ptr_array_new_with_free_func((GDestroyNotify)orch_agent_process_free);
    JsonArray *arr;

    g_return_val_if_fail(ret != NULL, NULL);
    if (!agent_opt_array(ret, "processes", ORCH_AGENT_MAX_PROCESSES, &arr) || !arr) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT,
                    "The agent's inventory is malformed: 'processes' is not an array of at "
                    "most %d",
                    ORCH_AGENT_MAX_PROCESSES);
        return NULL;
    }
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        JsonNode *el = json_array_get_element(arr, i);
        OrchAgentProcess *proc;

        if (!JSON_NODE_HOLDS_OBJECT(el)) {
            agent_bad(error, "the entry", i);
            return NULL;
        }
        proc = agent_process_parse(json_node_get_object(el), i, error);
        if (!proc)
            return NULL;
        g_ptr_array_add(procs, proc);
    }
    if (!agent_unregistered_parse_all(ret, procs, error))
        return NULL;
    return g_steal_pointer(&procs);
}

/* The processes of the replies to info and inventory, sent already (owned). */
static GPtrArray *agent_processes_replies(OrchAgent *agent, guint timeout_ms, GError **error)
{
    g_autoptr(OrchAgentInventory) inv = agent_inventory_replies(agent, timeout_ms, error);

    if (!inv)
        return NULL;
    if (!inv->processes) {
        g_propagate_error(error, g_steal_pointer(&inv->processes_error));
        return NULL;
    }
    return g_steal_pointer(&inv->processes);
}

GPtrArray *orch_agent_processes(OrchAgent *agent, guint timeout_ms, GError **error)
{
    g_autoptr(JsonObject) args = agent_info_args(2);
    OrchAgentRequest reqs[] = {{"info", args}, {"inventory", NULL}};

    if (!agent_send_requests(agent, reqs, G_N_ELEMENTS(reqs), hm_deadline_in_ms(timeout_ms),
                             error))
        return NULL;
    return agent_processes_replies(agent, timeout_ms, error);
}

GPtrArray *orch_agent_processes_unforced(OrchVirt *virt, const char *domain, const char *channel,
                                         guint timeout_ms, GError **error)
{
    g_autoptr(JsonObject) args = agent_info_args(2);
    OrchAgentRequest reqs[] = {{"info", args}, {"inventory", NULL}};
    g_autoptr(OrchAgent) agent =
        agent_open(virt, domain, channel, FALSE, reqs, G_N_ELEMENTS(reqs), timeout_ms, error);

    return agent ? agent_processes_replies(agent, timeout_ms, error) : NULL;
}

char *orch_agent_refused_summary(GPtrArray *procs)
{
    g_autoptr(GString) out = g_string_new(NULL);

    for (guint i = 0; procs && i < procs->len; i++) {
        OrchAgentProcess *p = procs->pdata[i];

        if (p->unregistered) {
            g_string_append_printf(out,
                                   "%sprocess '%s' (pid %d) holds the RDMA device %s without the "
                                   "hotmig verbs layer or libhotmig",
                                   out->len ? "; " : "", p->name, p->pid, p->device);
            if (p->more)
                g_string_append_printf(out, "; and %u more such process(es)", p->more);
            continue;
        }
        if (!p->refused->len)
            continue;
        g_string_append_printf(out, "%sprocess '%s' (pid %d) used ", out->len ? "; " : "", p->name,
                               p->pid);
        for (guint k = 0; k < p->refused->len; k++)
            g_string_append_printf(out, "%s%s", k ? ", " : "", (char *)p->refused->pdata[k]);
    }
    return out->len ? g_string_free(g_steal_pointer(&out), FALSE) : NULL;
}

guint orch_agent_registered_count(GPtrArray *procs)
{
    guint n = 0;

    for (guint i = 0; procs && i < procs->len; i++)
        n += !((OrchAgentProcess *)procs->pdata[i])->unregistered;
    return n;
}

char *orch_agent_peers_summary(GPtrArray *procs, guint *ret_count)
{
    g_autoptr(GString) out = g_string_new(NULL);
    guint count = 0;

    for (guint i = 0; procs && i < procs->len; i++) {
        OrchAgentProcess *p = procs->pdata[i];

        if (!p->peers->len && !p->peers_dropped)
            continue;
        count += p->peers->len + p->peers_dropped;
        g_string_append_printf(out, "%s'%s' (pid %d%s%s): ", out->len ? "; " : "", p->name, p->pid,
                               p->job ? ", job " : "", p->job ? p->job : "");
        for (guint k = 0; k < p->peers->len && k < 8; k++) {
            OrchAgentPeer *peer = p->peers->pdata[k];

            g_string_append_printf(out, "%s%s QP %u", k ? ", " : "", peer->gid, peer->qpn);
        }
        if (p->peers->len + p->peers_dropped > 8)
            g_string_append_printf(out, ", and %u more", p->peers->len + p->peers_dropped - 8);
    }
    if (ret_count)
        *ret_count = count;
    return out->len ? g_string_free(g_steal_pointer(&out), FALSE) : NULL;
}

char *orch_agent_standby_report(JsonObject *ret, const char *member, gboolean back,
                                OrchStandbyFigures *ret_figures)
{
    g_autoptr(GError) error = NULL;

    *ret_figures = (OrchStandbyFigures){0};
    if (!orch_agent_standby_parse(ret, member, ret_figures, &error))
        return g_strdup_printf("; standby figures left out: %s", error->message);
    return orch_agent_standby_detail(ret_figures, back);
}
