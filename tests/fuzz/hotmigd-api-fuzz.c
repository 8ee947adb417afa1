/* Fuzz target for hotmigd's API (hotmigd/api.c): a request from another host, as
 * bytes. The input's first line is "METHOD PATH", the rest the body. Whatever it holds, the
 * reply must be a status from 200 to 599 with a JSON object for a body, an "error" member in
 * every 4xx/5xx; never a crash, a leak or a sanitizer report.
 *
 * The pool is the unit tests' fake host (2 PCI VFs of a PF, one single VF, two stand-ins) with
 * a real lease store in a temp dir, kept across inputs so that leases, confirms and releases
 * meet each other. libFuzzer: tests/fuzz/hotmigd-api.cmake (clang, -DHM_FUZZ=ON); without it the
 * corpus in tests/fuzz/corpus/hotmigd-api/ is replayed by hotmigd-api-fuzz-replay (label fuzz). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "pool-fake-host.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static HotmigdPool *pool;
static char *lease_dir;

static void fuzz_cleanup(void)
{
    g_autoptr(GDir) dir = lease_dir ? g_dir_open(lease_dir, 0, NULL) : NULL;
    const char *name;

    g_clear_pointer(&pool, hotmigd_pool_free);
    while (dir && (name = g_dir_read_name(dir))) {
        g_autofree char *path = g_build_filename(lease_dir, name, NULL);

        g_unlink(path);
    }
    if (lease_dir) {
        g_rmdir(lease_dir);
        g_clear_pointer(&lease_dir, g_free);
    }
}

static HotmigdPool *fuzz_pool(void)
{
    static const char *const pfs[] = {"0000:3b:00.0", NULL};
    static const char *const vfs[] = {"0000:5e:00.4", NULL};
    static const char *const standins[] = {"hmlab0vf1", "hmlab0vf2", NULL};
    g_autoptr(GError) error = NULL;
    HotmigdPoolConfig config = {
        .host_name = "fuzz", .lease_ttl_s = 60, .pfs = pfs, .vfs = vfs, .standins = standins};
    FakeHost *host;

    if (pool)
        return pool;
    lease_dir = g_dir_make_tmp("hm-hotmigd-api-fuzz-XXXXXX", NULL);
    g_assert(lease_dir);
    config.lease_dir = lease_dir;
    host = fake_host_new();
    fake_host_add_pf(host, "0000:3b:00.0", 2, 0x15b3, 0x101c);
    g_hash_table_insert(host->vfs, g_strdup("0000:5e:00.4"),
                        fake_vf("0000:5e:00.4", "0000:5e:00.0", 3, 0x15b3, 0x101e, "vfio-pci"));
    g_hash_table_add(host->netdevs, g_strdup("hmlab0vf1"));
    pool = hotmigd_pool_new(&config, &fake_host_ops, host, &error);
    g_assert_no_error(error);
    atexit(fuzz_cleanup);
    return pool;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const char *nl = memchr(text, '\n', size);
    gsize line_len = nl ? (gsize)(nl - text) : size;
    g_autofree char *line = g_strndup(text, line_len);
    g_autofree char *method = NULL;
    g_autofree char *path = NULL;
    const char *sp = strchr(line, ' ');
    const char *body = nl ? nl + 1 : NULL;
    gsize body_len = nl ? size - line_len - 1 : 0;
    g_autoptr(HotmigdApiReply) reply = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonNode *root;

    /* The transport hands over a method and a path without NUL bytes. */
    method = g_strndup(line, sp ? (gsize)(sp - line) : strlen(line));
    path = g_strdup(sp ? sp + 1 : "/");
    reply = hotmigd_api_handle(fuzz_pool(), method, path, body, body_len);
    g_assert(reply != NULL);
    g_assert(reply->status >= 200 && reply->status <= 599);
    g_assert(reply->body != NULL);
    g_assert(json_parser_load_from_data(parser, reply->body, -1, NULL));
    root = json_parser_get_root(parser);
    g_assert(root && JSON_NODE_HOLDS_OBJECT(root));
    if (reply->status >= 400) {
        g_assert(json_object_has_member(json_node_get_object(root), "error"));
        g_assert(reply->log != NULL);
    }
    return 0;
}
