/* A fake netlink adapter for the unit tests (see netlink-fake.h). It answers as the kernel
 * does where the tests look: an unknown device is not found, a VF index out of range is
 * EINVAL, a PF that is not InfiniBand has no VF GUIDs (EOPNOTSUPP). */
#include <net/if_arp.h>

#include "netlink-fake.h"

typedef struct {
    char *name;
    int ifindex;
    guint arphrd_type;
    guint num_vfs;
    guint64 *guids; /* num_vfs * HOTPLUG_GUID_LAST */
} FakeLink;

struct NetlinkFake {
    GPtrArray *links; /* FakeLink */
    GPtrArray *calls; /* char * */
    guint n_calls;
    guint fail_nth;
    char *fail_message;
};

static void fake_link_free(FakeLink *link)
{
    g_free(link->name);
    g_free(link->guids);
    g_free(link);
}

NetlinkFake *netlink_fake_new(void)
{
    NetlinkFake *fake = g_new0(NetlinkFake, 1);

    fake->links = g_ptr_array_new_with_free_func((GDestroyNotify)fake_link_free);
    fake->calls = g_ptr_array_new_with_free_func(g_free);
    return fake;
}

void netlink_fake_free(NetlinkFake *fake)
{
    if (!fake)
        return;
    g_ptr_array_unref(fake->links);
    g_ptr_array_unref(fake->calls);
    g_free(fake->fail_message);
    g_free(fake);
}

void netlink_fake_add_link(NetlinkFake *fake, const char *name, guint arphrd_type, guint num_vfs)
{
    FakeLink *link = g_new0(FakeLink, 1);

    link->name = g_strdup(name);
    link->ifindex = (int)fake->links->len + 2; /* 1 is lo */
    link->arphrd_type = arphrd_type;
    link->num_vfs = num_vfs;
    link->guids = g_new0(guint64, (gsize)num_vfs * HOTPLUG_GUID_LAST + 1);
    g_ptr_array_add(fake->links, link);
}

static FakeLink *fake_link_find(NetlinkFake *fake, const char *name)
{
    for (guint i = 0; i < fake->links->len; i++) {
        FakeLink *link = g_ptr_array_index(fake->links, i);

        if (g_str_equal(link->name, name))
            return link;
    }
    return NULL;
}

void netlink_fake_fail_nth(NetlinkFake *fake, guint nth, const char *message)
{
    fake->n_calls = 0;
    fake->fail_nth = nth;
    g_free(fake->fail_message);
    fake->fail_message = g_strdup(message);
}

/* Records a call; TRUE (with @error set) when it is the one to fail. */
static gboolean fake_call(NetlinkFake *fake, char *call, GError **error)
{
    g_ptr_array_add(fake->calls, call);
    fake->n_calls++;
    if (fake->fail_nth == 0 || fake->n_calls != fake->fail_nth)
        return FALSE;
    g_set_error_literal(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NETLINK, fake->fail_message);
    return TRUE;
}

static gboolean fake_link_info(gpointer ctx, const char *netdev, int *ret_ifindex,
                               guint *ret_arphrd_type, guint *ret_num_vfs, GError **error)
{
    NetlinkFake *fake = ctx;
    FakeLink *link;

    if (fake_call(fake, g_strdup_printf("link_info %s", netdev), error))
        return FALSE;
    link = fake_link_find(fake, netdev);
    if (!link) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND, "No net device '%s'", netdev);
        return FALSE;
    }
    *ret_ifindex = link->ifindex;
    *ret_arphrd_type = link->arphrd_type;
    *ret_num_vfs = link->num_vfs;
    return TRUE;
}

static gboolean fake_vf_set_guid(gpointer ctx, const char *pf_netdev, guint vf_index,
                                 HotplugGuidKind kind, guint64 guid, GError **error)
{
    NetlinkFake *fake = ctx;
    g_autofree char *text = hotplug_guid_format(guid);
    const char *what = hotplug_guid_kind_to_string(kind);
    FakeLink *link;

    if (fake_call(fake, g_strdup_printf("vf_set_guid %s %u %s %s", pf_netdev, vf_index, what, text),
                  error))
        return FALSE;
    link = fake_link_find(fake, pf_netdev);
    if (!link) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND,
                    "Setting the %s GUID of VF %u of '%s' to %s: no net device '%s'", what,
                    vf_index, pf_netdev, text, pf_netdev);
        return FALSE;
    }
    if (link->arphrd_type != ARPHRD_INFINIBAND || vf_index >= link->num_vfs) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NETLINK,
                    "Setting the %s GUID of VF %u of '%s' to %s: %s", what, vf_index, pf_netdev,
                    text,
                    link->arphrd_type != ARPHRD_INFINIBAND
                        ? "Operation not supported (its driver cannot set VF GUIDs)"
                        : "Invalid input data or parameter");
        return FALSE;
    }
    link->guids[vf_index * HOTPLUG_GUID_LAST + kind] = guid;
    return TRUE;
}

/* Like a kernel whose driver has ndo_get_vf_guid: it reports the GUIDs of an InfiniBand PF's
 * VFs once they were set (a VF whose GUIDs are both 0 stands for a driver that reports none). */
static gboolean fake_vf_get_guids(gpointer ctx, const char *pf_netdev, guint vf_index,
                                  guint64 *ret_node_guid, guint64 *ret_port_guid, GError **error)
{
    NetlinkFake *fake = ctx;
    FakeLink *link;
    guint64 node;
    guint64 port;

    if (fake_call(fake, g_strdup_printf("vf_get_guids %s %u", pf_netdev, vf_index), error))
        return FALSE;
    link = fake_link_find(fake, pf_netdev);
    if (!link) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND,
                    "Reading the GUIDs of VF %u of '%s': no net device '%s'", vf_index, pf_netdev,
                    pf_netdev);
        return FALSE;
    }
    node = vf_index < link->num_vfs ? link->guids[vf_index * HOTPLUG_GUID_LAST] : 0;
    port = vf_index < link->num_vfs ? link->guids[vf_index * HOTPLUG_GUID_LAST + 1] : 0;
    if (link->arphrd_type != ARPHRD_INFINIBAND || (node == 0 && port == 0)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_UNKNOWN,
                    "The kernel does not report the GUIDs of VF %u of '%s' (its driver has no ndo_get_vf_guid)",
                    vf_index, pf_netdev);
        return FALSE;
    }
    *ret_node_guid = node;
    *ret_port_guid = port;
    return TRUE;
}

static const HotplugNetlinkOps fake_ops = {
    .link_info = fake_link_info,
    .vf_set_guid = fake_vf_set_guid,
    .vf_get_guids = fake_vf_get_guids,
    .free = NULL, /* the fake belongs to the test */
};

HotplugNetlink *netlink_fake_adapter(NetlinkFake *fake)
{
    return hotplug_netlink_new_with_ops(&fake_ops, fake);
}

GPtrArray *netlink_fake_calls(NetlinkFake *fake)
{
    return fake->calls;
}

char *netlink_fake_calls_joined(NetlinkFake *fake)
{
    g_autoptr(GString) out = g_string_new(NULL);

    for (guint i = 0; i < fake->calls->len; i++)
        g_string_append_printf(out, "%s%s", i ? "; " : "",
                               (const char *)g_ptr_array_index(fake->calls, i));
    return g_string_free(g_steal_pointer(&out), FALSE);
}

guint64 netlink_fake_vf_guid(NetlinkFake *fake, const char *pf_netdev, guint vf_index,
                             HotplugGuidKind kind)
{
    FakeLink *link = fake_link_find(fake, pf_netdev);

    if (!link || vf_index >= link->num_vfs || (guint)kind >= HOTPLUG_GUID_LAST)
        return 0;
    return link->guids[vf_index * HOTPLUG_GUID_LAST + kind];
}
