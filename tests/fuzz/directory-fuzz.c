/* Fuzzing of the peer directory's announcement parser (guest-agent/agent/dir-msg.c) and the
 * table it feeds (dir-table.c): what anything on the control network sends to an agent's
 * directory port. An input is cut into datagrams at each newline (each keeps its newline); a
 * datagram is refused or parses into a message that formats and parses back to the same
 * message; every parsed one goes into a small table (3 entries: eviction, conflicts, expiry),
 * whose file text must stay well formed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "guest-agent/agent/directory.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_TABLE_MAX 3

static void fuzz_check_file(AgentDirTable *table)
{
    g_autoptr(GString) text = agent_dir_table_format(table);
    g_auto(GStrv) lines = g_strsplit(text->str, "\n", -1);
    guint n = g_strv_length(lines);

    if (!g_str_has_prefix(text->str, AGENT_DIR_FILE_HEADER) || text->str[text->len - 1] != '\n')
        abort();
    if (n - 2 > agent_dir_table_n_claims(table) || agent_dir_table_n_claims(table) > FUZZ_TABLE_MAX)
        abort();
    for (guint i = 1; i + 1 < n; i++) {
        g_auto(GStrv) f = g_strsplit(lines[i], " ", -1);

        if (g_strv_length(f) != 4 || strlen(f[0]) != 32 || strspn(f[0], "0123456789abcdef") != 32)
            abort();
    }
}

static void fuzz_one(AgentDirTable *table, const char *dgram, size_t len, gint64 now)
{
    AgentDirMsg m, back;
    char out[AGENT_DIR_MSG_MAX + 1];
    size_t n;

    if (!agent_dir_msg_parse(dgram, len, &m, NULL))
        return;
    n = agent_dir_msg_format(&m, out, sizeof(out));
    if (n == 0 || !agent_dir_msg_parse(out, n, &back, NULL))
        abort();
    if (memcmp(&m, &back, offsetof(AgentDirMsg, ports)) != 0 ||
        memcmp(m.ports, back.ports, m.n_ports * sizeof(m.ports[0])) != 0)
        abort();
    agent_dir_table_update(table, &m, now, NULL);
    agent_dir_table_expire(table, now);
    fuzz_check_file(table);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(AgentDirTable) table = agent_dir_table_new(FUZZ_TABLE_MAX);
    const char *p = (const char *)data;
    const char *end = p + size;
    gint64 now = 0;

    /* the whole input as one datagram too */
    fuzz_one(table, p, size, now);
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);

        now += 7 * G_USEC_PER_SEC; /* each datagram 7 s later: some expire */
        fuzz_one(table, p, len, now);
        p += len;
    }
    return 0;
}
