/* The protocol schema (guest-agent/schema/agent-protocol.json) against what was generated from
 * it, the agent's dispatcher, and docs/protocol.md: every command documented with its
 * arguments and results, every example exchange parsed by the agent's request parser and its
 * reply checked against the declared results and errors.
 * Arguments: SCHEMA_JSON PROTOCOL_MD. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <json-glib/json-glib.h>
#include <string.h>

#include "guest-agent/agent/agent-priv.h"

static const char *schema_path;
static const char *doc_path;

static JsonObject *load_schema(JsonParser **keep)
{
    g_autoptr(GError) error = NULL;

    *keep = json_parser_new();
    if (!json_parser_load_from_file(*keep, schema_path, &error))
        fail_msg("schema '%s': %s", schema_path, error->message);
    return json_node_get_object(json_parser_get_root(*keep));
}

static JsonObject *schema_command(JsonObject *schema, const char *name)
{
    JsonArray *cmds = json_object_get_array_member(schema, "commands");

    for (guint i = 0; i < json_array_get_length(cmds); i++) {
        JsonObject *c = json_array_get_object_element(cmds, i);

        if (g_str_equal(json_object_get_string_member(c, "name"), name))
            return c;
    }
    return NULL;
}

/* The generated tables say what the schema says; the dispatcher has every command. */
static void test_generated_tables(void **state)
{
    g_autoptr(JsonParser) parser = NULL;
    JsonObject *schema = load_schema(&parser);
    JsonArray *cmds = json_object_get_array_member(schema, "commands");
    JsonArray *errors = json_object_get_array_member(schema, "errors");

    assert_int_equal(json_object_get_int_member(schema, "protocol"), AGENT_PROTOCOL_VERSION);
    assert_int_equal(json_object_get_int_member(schema, "protocol_min"), AGENT_PROTOCOL_MIN);
    assert_int_equal(json_object_get_int_member(schema, "line_max"), AGENT_HOST_LINE_MAX);
    assert_int_equal(json_object_get_int_member(schema, "sync_byte"), AGENT_SYNC_BYTE);
    assert_int_equal(json_array_get_length(cmds), AGENT_COMMAND_LAST);
    for (guint i = 0; i < AGENT_COMMAND_LAST; i++) {
        JsonObject *c = json_array_get_object_element(cmds, i);
        JsonArray *args = json_object_get_array_member(c, "arguments");
        const AgentCommandSpec *spec = &agent_command_specs[i];
        guint n = 0;

        assert_string_equal(spec->name, json_object_get_string_member(c, "name"));
        assert_int_equal(spec->since, json_object_get_int_member(c, "since"));
        assert_true(spec->since >= AGENT_PROTOCOL_MIN && spec->since <= AGENT_PROTOCOL_VERSION);
        assert_true(agent_command_has_handler((AgentCommand)i));
        for (const AgentArgSpec *a = spec->args; a && a->name; a++, n++) {
            JsonObject *arg = json_array_get_object_element(args, n);

            assert_string_equal(a->name, json_object_get_string_member(arg, "name"));
            assert_int_equal(a->required, json_object_get_boolean_member(arg, "required"));
            assert_true(a->min == json_object_get_int_member(arg, "min"));
            assert_true(a->max == json_object_get_int_member(arg, "max"));
        }
        assert_int_equal(n, json_array_get_length(args));
    }
    assert_int_equal(json_array_get_length(errors), AGENT_ERROR_LAST);
    for (guint i = 0; i < AGENT_ERROR_LAST; i++)
        assert_string_equal(
            agent_error_class_to_string((AgentError)i),
            json_object_get_string_member(json_array_get_object_element(errors, i), "name"));
}

/* The reply @text of an example for @cmd is valid against the schema. */
static void check_reply(JsonObject *cmd, const char *text)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) node = json_from_string(text, &error);
    const char *name = json_object_get_string_member(cmd, "name");
    JsonObject *obj;

    if (!node || !JSON_NODE_HOLDS_OBJECT(node))
        fail_msg("%s: example reply is not a JSON object: %s", name, text);
    obj = json_node_get_object(node);
    if (json_object_has_member(obj, "error")) {
        JsonObject *err = json_object_get_object_member(obj, "error");
        const char *klass = json_object_get_string_member(err, "class");
        JsonArray *allowed = json_object_get_array_member(cmd, "errors");
        gboolean ok = g_str_equal(klass, "CommandNotFound") || g_str_equal(klass, "InvalidJSON");

        for (guint i = 0; i < json_array_get_length(allowed); i++)
            ok = ok || g_str_equal(json_array_get_string_element(allowed, i), klass);
        if (!ok)
            fail_msg("%s: example error class '%s' is not declared", name, klass);
        assert_true(json_object_has_member(err, "desc"));
        return;
    }
    if (!json_object_has_member(obj, "return"))
        fail_msg("%s: example reply has neither return nor error: %s", name, text);
    {
        JsonNode *ret = json_object_get_member(obj, "return");
        JsonNode *decl = json_object_get_member(cmd, "returns");
        JsonArray *members;

        if (JSON_NODE_HOLDS_VALUE(decl)) { /* sync: a scalar */
            assert_true(JSON_NODE_HOLDS_VALUE(ret));
            return;
        }
        assert_true(JSON_NODE_HOLDS_OBJECT(ret));
        members = json_node_get_array(decl);
        for (guint i = 0; i < json_array_get_length(members); i++) {
            JsonObject *m = json_array_get_object_element(members, i);
            const char *mname = json_object_get_string_member(m, "name");

            if (json_object_get_boolean_member(m, "required") &&
                !json_object_has_member(json_node_get_object(ret), mname))
                fail_msg("%s: example return lacks required '%s'", name, mname);
        }
        {
            g_autoptr(GList) have = json_object_get_members(json_node_get_object(ret));

            for (GList *l = have; l; l = l->next) {
                gboolean declared = FALSE;

                for (guint i = 0; i < json_array_get_length(members); i++)
                    declared = declared ||
                               g_str_equal(json_object_get_string_member(
                                               json_array_get_object_element(members, i), "name"),
                                           l->data);
                if (!declared)
                    fail_msg("%s: example return has undeclared '%s'", name, (char *)l->data);
            }
        }
    }
}

/* docs/protocol.md: a section per command naming its arguments and results, with examples. */
static void test_doc_matches_schema(void **state)
{
    g_autoptr(JsonParser) parser = NULL;
    JsonObject *schema = load_schema(&parser);
    JsonArray *errors = json_object_get_array_member(schema, "errors");
    g_autofree char *doc = NULL;
    g_autoptr(GError) error = NULL;
    g_auto(GStrv) sections = NULL;
    guint documented = 0;

    if (!g_file_get_contents(doc_path, &doc, NULL, &error))
        fail_msg("%s", error->message);
    for (guint i = 0; i < json_array_get_length(errors); i++) {
        g_autofree char *needle = g_strdup_printf(
            "`%s`",
            json_object_get_string_member(json_array_get_object_element(errors, i), "name"));

        if (!strstr(doc, needle))
            fail_msg("docs: error class %s is not described", needle);
    }
    sections = g_strsplit(doc, "\n### ", -1);
    for (guint s = 1; sections[s]; s++) {
        g_autofree char *name = NULL;
        g_auto(GStrv) lines = NULL;
        JsonObject *cmd;
        guint requests = 0, replies = 0;
        const char *end = strchr(sections[s], '\n');
        char *cut = strstr(sections[s], "\n## ");

        if (cut)
            *cut = '\0'; /* the section ends at the next level-2 heading */
        assert_non_null(end);
        name = g_strndup(sections[s], (gsize)(end - sections[s]));
        g_strstrip(name);
        if (name[0] != '`' || name[strlen(name) - 1] != '`')
            fail_msg("docs: command heading '%s' is not `name`", name);
        memmove(name, name + 1, strlen(name));
        name[strlen(name) - 1] = '\0';
        cmd = schema_command(schema, name);
        if (!cmd)
            fail_msg("docs: command '%s' is not in the schema", name);
        documented++;
        {
            JsonArray *args = json_object_get_array_member(cmd, "arguments");
            JsonNode *ret = json_object_get_member(cmd, "returns");

            for (guint i = 0; i < json_array_get_length(args); i++) {
                g_autofree char *needle = g_strdup_printf(
                    "`%s`",
                    json_object_get_string_member(json_array_get_object_element(args, i), "name"));

                if (!strstr(sections[s], needle))
                    fail_msg("docs: %s does not name its argument %s", name, needle);
            }
            if (JSON_NODE_HOLDS_ARRAY(ret)) {
                JsonArray *members = json_node_get_array(ret);

                for (guint i = 0; i < json_array_get_length(members); i++) {
                    g_autofree char *needle = g_strdup_printf(
                        "`%s`", json_object_get_string_member(
                                    json_array_get_object_element(members, i), "name"));

                    if (!strstr(sections[s], needle))
                        fail_msg("docs: %s does not name its result %s", name, needle);
                }
            }
        }
        lines = g_strsplit(sections[s], "\n", -1);
        for (guint i = 0; lines[i]; i++) {
            const char *l = lines[i];

            if (g_str_has_prefix(l, "-> ")) {
                g_autoptr(GError) perr = NULL;
                AgentRequest req;

                l += 3;
                if (g_str_has_prefix(l, "0xFF "))
                    l += 5;
                requests++;
                if (agent_request_parse(l, strlen(l), &req, &perr)) {
                    assert_string_equal(agent_command_to_string(req.command), name);
                } else {
                    /* An example of a rejected request: its reply must be that error. */
                    g_autofree char *want = g_strdup_printf(
                        "\"class\":\"%s\"", agent_error_class_to_string((AgentError)perr->code));

                    if (!lines[i + 1] || !strstr(lines[i + 1], want))
                        fail_msg("docs: %s: '%s' is rejected (%s) but the example says '%s'", name,
                                 l, perr->message, lines[i + 1] ? lines[i + 1] : "");
                }
            } else if (g_str_has_prefix(l, "<- ")) {
                l += 3;
                if (g_str_has_prefix(l, "0xFF "))
                    l += 5;
                replies++;
                check_reply(cmd, l);
            }
        }
        if (requests == 0 || requests != replies)
            fail_msg("docs: %s needs example exchanges (%u requests, %u replies)", name, requests,
                     replies);
    }
    assert_int_equal(documented,
                     json_array_get_length(json_object_get_array_member(schema, "commands")));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generated_tables),
        cmocka_unit_test(test_doc_matches_schema),
    };

    if (argc != 3) {
        g_printerr("usage: agent-schema-test SCHEMA_JSON PROTOCOL_MD\n");
        return 2;
    }
    schema_path = argv[1];
    doc_path = argv[2];
    return cmocka_run_group_tests(tests, NULL, NULL);
}
