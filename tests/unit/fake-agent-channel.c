/* The agent's end of a fake agent channel; see fake-agent-channel.h. */
#include "fake-agent-channel.h"

#include <string.h>

#include "common/common.h"

void fake_agent_channel_init(FakeAgentChannel *c, OrchVirt *virt)
{
    c->parent.virt = virt;
    c->out = g_string_new(NULL);
}

gssize fake_agent_channel_recv(OrchVirtChannel *chan, void *buf, gsize len, HmDeadline deadline,
                               GError **e)
{
    FakeAgentChannel *c = (FakeAgentChannel *)chan;
    gsize n = MIN(len, c->out->len);

    if (n == 0) {
        g_set_error(e, HM_COMMON_ERROR, HM_COMMON_ERROR_TIMEOUT, "Timed out (fake)");
        return -1;
    }
    memcpy(buf, c->out->str, n);
    g_string_erase(c->out, 0, n);
    return n;
}

void fake_agent_channel_clear(FakeAgentChannel *c)
{
    if (c->out)
        g_string_free(c->out, TRUE);
    c->out = NULL;
}
