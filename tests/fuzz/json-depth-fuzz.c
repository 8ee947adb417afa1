/* Fuzz target: the JSON nesting guard and the parser that every caller runs after it
 * (hm_json_check_depth() or hm_json_check_one(), then json_parser_load_from_data(): a peer
 * hotmigd's reply, an API or webhook body, an alert line, an agent's request or reply). The
 * guard must count what json-glib reads: whatever it lets through, json-glib must build no tree
 * deeper than the guard's limit (issue 28, finding 6: json-glib also reads single-quoted
 * strings, comments and escapes strict JSON does not have, and the guard counted brackets
 * inside what it took for a string). The first byte chooses the limit (1 to 8) and the guard
 * (bit 3: hm_json_check_one(), which refuses data after the value), the rest is the text.
 * libFuzzer entry point; tests/fuzz/fuzz-replay.c replays the corpus as a test. */
#include <stdint.h>

#include <json-glib/json-glib.h>

#include "common/common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Arrays and objects open at once at @node's deepest: the guard's count. */
static guint fuzz_node_depth(JsonNode *node)
{
    guint deepest = 0;

    if (JSON_NODE_HOLDS_ARRAY(node)) {
        JsonArray *array = json_node_get_array(node);

        for (guint i = 0; i < json_array_get_length(array); i++)
            deepest = MAX(deepest, fuzz_node_depth(json_array_get_element(array, i)));
        return deepest + 1;
    }
    if (JSON_NODE_HOLDS_OBJECT(node)) {
        g_autoptr(GList) members = json_object_get_values(json_node_get_object(node));

        for (GList *l = members; l; l = l->next)
            deepest = MAX(deepest, fuzz_node_depth(l->data));
        return deepest + 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(GError) error = NULL;
    const char *text = (const char *)data + 1;
    guint max_depth;
    gboolean ok;
    JsonNode *root;

    if (size < 1 || size > 256 * 1024)
        return 0;
    max_depth = (data[0] & 7) + 1;
    if (data[0] & 8)
        ok = hm_json_check_one(text, (gssize)size - 1, max_depth, &error);
    else
        ok = hm_json_check_depth(text, (gssize)size - 1, max_depth, &error);
    g_assert(ok == (error == NULL));
    if (!ok) {
        g_assert(error->domain == HM_COMMON_ERROR && error->code == HM_COMMON_ERROR_INVALID);
        return 0;
    }
    if (!json_parser_load_from_data(parser, text, (gssize)size - 1, NULL))
        return 0;
    root = json_parser_get_root(parser);
    if (root && fuzz_node_depth(root) > max_depth)
        g_error("the guard let through a text json-glib reads %u levels deep (limit %u)",
                fuzz_node_depth(root), max_depth);
    return 0;
}
