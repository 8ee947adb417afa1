/* The agent's end of a fake agent channel (OrchVirtOps.channel_*) for tests over fake hypervisor
 * adapters: what the fake agent answers waits in @out until the host receives it. A test's
 * channel starts with a FakeAgentChannel; its open and send (the fake agent) are its own, its
 * recv is fake_agent_channel_recv(). */
#pragma once

#include "engine/virt.h"

typedef struct {
    OrchVirtChannel parent;
    GString *out; /* bytes the agent sent, not yet received */
} FakeAgentChannel;

/* Starts @c (zeroed, borrowed) as a channel of @virt with nothing sent. */
void fake_agent_channel_init(FakeAgentChannel *c, OrchVirt *virt);

/* OrchVirtOps.channel_recv: up to @len of the bytes the agent sent, or, when there are none,
 * -1 with HM_COMMON_ERROR_TIMEOUT at once (the fake agent answers as it is written to). */
gssize fake_agent_channel_recv(OrchVirtChannel *chan, void *buf, gsize len, HmDeadline deadline,
                               GError **e);

/* Frees what fake_agent_channel_init() made (not @c itself). */
void fake_agent_channel_clear(FakeAgentChannel *c);
