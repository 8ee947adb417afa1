/* A fake netlink adapter for the unit tests: net devices held in memory, every call recorded,
 * any call can be made to fail. Not thread-safe. */
#pragma once

#include <glib.h>

#include "hotplug/netlink-priv.h"

G_BEGIN_DECLS

typedef struct NetlinkFake NetlinkFake;

NetlinkFake *netlink_fake_new(void);
void netlink_fake_free(NetlinkFake *fake);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NetlinkFake, netlink_fake_free)

/* Adds net device @name with link type @arphrd_type (1 Ethernet, 32 InfiniBand) and @num_vfs
 * VFs enabled. Its VFs start with both GUIDs 0. */
void netlink_fake_add_link(NetlinkFake *fake, const char *name, guint arphrd_type, guint num_vfs);

/* A new adapter over @fake (borrowed: it must outlive the adapter). Owned result. */
HotplugNetlink *netlink_fake_adapter(NetlinkFake *fake);

/* Makes the @nth call (1-based, counting every call to any op from now on) fail with
 * HOTPLUG_ERROR_NETLINK and message @message; 0 disarms. The failed call is recorded too. */
void netlink_fake_fail_nth(NetlinkFake *fake, guint nth, const char *message);

/* The calls so far, one string each, in order: "link_info ib0",
 * "vf_set_guid ib0 3 node 0002:c903:00a1:b2c3". Borrowed. */
GPtrArray *netlink_fake_calls(NetlinkFake *fake);

/* The calls so far joined with "; " (owned), for one assert_string_equal(). */
char *netlink_fake_calls_joined(NetlinkFake *fake);

/* The @kind GUID VF @vf_index of @pf_netdev holds now (0 if never set or no such VF). */
guint64 netlink_fake_vf_guid(NetlinkFake *fake, const char *pf_netdev, guint vf_index,
                             HotplugGuidKind kind);

G_END_DECLS
