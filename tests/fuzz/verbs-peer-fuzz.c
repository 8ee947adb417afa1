/* Fuzzing of the verbs layer's peer protocol parser (guest-agent/verbs/hv-proto.c): what
 * another guest's layer (or anything on the control network) sends. Every input must either be
 * refused or parse into a message that formats and parses back to the same message. */
#include "hv-proto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int msg_equal(const HvMsg *a, const HvMsg *b)
{
    if (memcmp(a, b, offsetof(HvMsg, keys)) != 0)
        return 0;
    return memcmp(a->keys, b->keys, a->nkeys * sizeof(a->keys[0])) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    HvMsg *m = malloc(sizeof(*m)), *back = malloc(sizeof(*back));
    char *out = malloc(HV_PROTO_LINE_MAX + 2);
    int n;

    if (!m || !back || !out)
        abort();
    /* the wire is lines: the fuzzer's input is one line, with or without its newline */
    if (size && data[size - 1] == '\n')
        size--;
    if (hv_proto_parse((const char *)data, size, m) == 0) {
        n = hv_proto_format(m, out, HV_PROTO_LINE_MAX + 2);
        if (n <= 0 || out[n - 1] != '\n')
            abort();
        if (hv_proto_parse(out, (size_t)n - 1, back) != 0 || !msg_equal(m, back))
            abort();
    }
    free(m);
    free(back);
    free(out);
    return 0;
}
