/* The libnl netlink adapter against the running kernel, in a private network namespace of its
 * own (unshare(CLONE_NEWNET)): only devices this test creates are visible, the host's are never
 * touched. Without InfiniBand hardware this covers the lookup, the skip of a non-InfiniBand PF
 * and what the kernel answers a VF GUID request for a driver without VF GUID support. Every
 * test skips when the process may not create a network namespace (not root, no
 * CAP_SYS_ADMIN). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <stdio.h>

#include "hotplug/hotplug.h"
#include "hotplug/netlink-priv.h"
#include "test-error.h"

static const guint64 node_guid = 0x0002c90300a1b2c3ULL;
static const guint64 port_guid = 0x0002c90300a1b2c4ULL;

/* Set by the group setup: NULL when the test runs in its own network namespace. */
static char *skip_reason;

static char *netns_id(void)
{
    return g_file_read_link("/proc/self/ns/net", NULL);
}

static int group_setup(void **state)
{
    g_autofree char *before = netns_id();
    g_autofree char *after = NULL;

    if (geteuid() != 0) {
        skip_reason = g_strdup("not root: cannot create a network namespace");
        return 0;
    }
    if (unshare(CLONE_NEWNET) < 0) {
        skip_reason = g_strdup_printf("unshare(CLONE_NEWNET): %s", g_strerror(errno));
        return 0;
    }
    after = netns_id();
    /* Never go on in the host's namespace. */
    if (!before || !after || g_str_equal(before, after)) {
        print_error("unshare(CLONE_NEWNET) succeeded but the namespace is still '%s'\n",
                    after ? after : "?");
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    return 0;
}

#define SKIP_UNLESS_PRIVATE_NETNS()                                                                \
    do {                                                                                           \
        if (skip_reason) {                                                                         \
            print_message("skipped: %s\n", skip_reason);                                           \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

static HotplugNetlink *open_adapter(void)
{
    g_autoptr(GError) error = NULL;
    HotplugNetlink *nl = hotplug_netlink_new(&error);

    if (!nl)
        fail_msg("hotplug_netlink_new: %s", error->message);
    return nl;
}

/* Runs `ip ARGS` (in this namespace). FALSE when ip is missing or fails. */
static gboolean run_ip(const char *args)
{
    g_autofree char *ip = g_find_program_in_path("ip");
    g_autofree char *cmd = NULL;
    g_autofree char *err_out = NULL;
    g_autoptr(GError) error = NULL;
    int status = 0;

    if (!ip)
        return FALSE;
    cmd = g_strdup_printf("%s %s", ip, args);
    if (!g_spawn_command_line_sync(cmd, NULL, &err_out, &status, &error) ||
        !g_spawn_check_wait_status(status, NULL)) {
        print_message("'%s' failed: %s\n", cmd, error ? error->message : err_out);
        return FALSE;
    }
    return TRUE;
}

/* ---- tests --------------------------------------------------------------------------------- */

#define FD_SCAN_MAX 4096

/* The adapter's socket is close-on-exec (STYLE.md: every fd O_CLOEXEC). */
static void test_socket_cloexec(void **state)
{
    g_autofree gboolean *open_before = g_new0(gboolean, FD_SCAN_MAX);
    g_autoptr(HotplugNetlink) nl = NULL;
    guint n_new = 0;

    SKIP_UNLESS_PRIVATE_NETNS();
    for (int fd = 0; fd < FD_SCAN_MAX; fd++)
        open_before[fd] = fcntl(fd, F_GETFD) >= 0;
    nl = open_adapter();
    for (int fd = 0; fd < FD_SCAN_MAX; fd++) {
        int flags = fcntl(fd, F_GETFD);

        if (flags < 0 || open_before[fd])
            continue;
        n_new++;
        assert_true(flags & FD_CLOEXEC);
    }
    assert_int_equal(n_new, 1);
}

static void test_loopback_link_info(void **state)
{
    g_autoptr(HotplugNetlink) nl = NULL;
    g_autoptr(GError) error = NULL;
    int ifindex = -1;
    guint type = 0;
    guint num_vfs = 99;

    SKIP_UNLESS_PRIVATE_NETNS();
    nl = open_adapter();
    assert_true(nl->ops->link_info(nl->ctx, "lo", &ifindex, &type, &num_vfs, &error));
    assert_null(error);
    assert_int_equal(ifindex, 1); /* lo is first in a new namespace */
    assert_int_equal(type, 772);  /* ARPHRD_LOOPBACK */
    assert_int_equal(num_vfs, 0); /* no PCI device, no IFLA_NUM_VF */
}

static void test_loopback_skipped(void **state)
{
    g_autoptr(HotplugNetlink) nl = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *note = NULL;

    SKIP_UNLESS_PRIVATE_NETNS();
    nl = open_adapter();
    assert_true(hotplug_ib_identity_apply(nl, "lo", 0, node_guid, port_guid, &note, &error));
    assert_null(error);
    assert_non_null(note);
    assert_string_equal(note, "PF 'lo' is not InfiniBand (link type 772, loopback): the GUIDs "
                              "of VF 0 were left as they are");
}

static void test_unknown_device(void **state)
{
    g_autoptr(HotplugNetlink) nl = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(GError) set_error = NULL;
    char *note = (char *)"untouched";

    SKIP_UNLESS_PRIVATE_NETNS();
    nl = open_adapter();
    assert_false(hotplug_ib_identity_apply(nl, "hmnone0", 2, node_guid, port_guid, &note, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND);
    assert_string_equal(error->message, "Giving VF 2 of 'hmnone0' node GUID 0002:c903:00a1:b2c3 "
                                        "and port GUID 0002:c903:00a1:b2c4: No net device "
                                        "'hmnone0'");
    assert_string_equal(note, "untouched");

    assert_false(
        nl->ops->vf_set_guid(nl->ctx, "hmnone0", 2, HOTPLUG_GUID_NODE, node_guid, &set_error));
    assert_error(set_error, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND);
    assert_string_equal(set_error->message, "No net device 'hmnone0'");
}

/* The request goes out as `ip link set lo vf 0 node_guid ...` would send it; the kernel
 * answers EOPNOTSUPP for every driver without ndo_set_vf_guid (all but IPoIB). */
static void test_set_guid_unsupported(void **state)
{
    g_autoptr(HotplugNetlink) nl = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(GError) port_error = NULL;

    SKIP_UNLESS_PRIVATE_NETNS();
    nl = open_adapter();
    assert_false(nl->ops->vf_set_guid(nl->ctx, "lo", 0, HOTPLUG_GUID_NODE, node_guid, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NETLINK);
    assert_string_equal(error->message, "Setting the node GUID of VF 0 of 'lo' to "
                                        "0002:c903:00a1:b2c3: Operation not supported (its "
                                        "driver cannot set VF GUIDs)");

    assert_false(nl->ops->vf_set_guid(nl->ctx, "lo", 3, HOTPLUG_GUID_PORT, port_guid, &port_error));
    assert_error(port_error, HOTPLUG_ERROR, HOTPLUG_ERROR_NETLINK);
    assert_string_equal(port_error->message, "Setting the port GUID of VF 3 of 'lo' to "
                                             "0002:c903:00a1:b2c4: Operation not supported (its "
                                             "driver cannot set VF GUIDs)");
}

/* The raw RTM_GETLINK (RTEXT_FILTER_VF) read: a device without VF GUIDs parses and reports
 * UNKNOWN; a missing one NOT_FOUND. The adapter's own socket keeps working afterwards. */
static void test_get_guids_unreported(void **state)
{
    g_autoptr(HotplugNetlink) nl = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(GError) missing = NULL;
    guint64 node = 42;
    guint64 port = 42;
    int ifindex = 0;
    guint type = 0;
    guint num_vfs = 0;

    SKIP_UNLESS_PRIVATE_NETNS();
    nl = open_adapter();
    assert_false(nl->ops->vf_get_guids(nl->ctx, "lo", 0, &node, &port, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_UNKNOWN);
    assert_string_equal(error->message, "The kernel does not report the GUIDs of VF 0 of 'lo' "
                                        "(its driver has no ndo_get_vf_guid)");
    assert_true(node == 42 && port == 42);
    assert_false(nl->ops->vf_get_guids(nl->ctx, "hmnone0", 0, &node, &port, &missing));
    assert_error(missing, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND);
    assert_true(nl->ops->link_info(nl->ctx, "lo", &ifindex, &type, &num_vfs, NULL));
    assert_int_equal(type, 772);
}

/* An Ethernet device (a veth pair, created with ip in this namespace) is skipped as well. */
static void test_ethernet_skipped(void **state)
{
    g_autoptr(HotplugNetlink) nl = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(GError) set_error = NULL;
    g_autofree char *note = NULL;

    SKIP_UNLESS_PRIVATE_NETNS();
    if (!run_ip("link add hmeth0 type veth peer name hmeth1")) {
        print_message("skipped: no veth pair (ip or the veth driver missing)\n");
        skip();
    }
    nl = open_adapter();
    assert_true(hotplug_ib_identity_apply(nl, "hmeth0", 0, node_guid, port_guid, &note, &error));
    assert_null(error);
    assert_string_equal(note, "PF 'hmeth0' is not InfiniBand (link type 1, Ethernet): the GUIDs "
                              "of VF 0 were left as they are");
    assert_false(
        nl->ops->vf_set_guid(nl->ctx, "hmeth0", 0, HOTPLUG_GUID_NODE, node_guid, &set_error));
    assert_error(set_error, HOTPLUG_ERROR, HOTPLUG_ERROR_NETLINK);
    assert_true(strstr(set_error->message, "Operation not supported") != NULL);
    assert_true(run_ip("link del hmeth0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_socket_cloexec),       cmocka_unit_test(test_loopback_link_info),
        cmocka_unit_test(test_loopback_skipped),     cmocka_unit_test(test_unknown_device),
        cmocka_unit_test(test_set_guid_unsupported), cmocka_unit_test(test_ethernet_skipped),
        cmocka_unit_test(test_get_guids_unreported),
    };

    int failed = cmocka_run_group_tests_name("hotplug-netlink-live", tests, group_setup,
                                             group_teardown);

    /* Every case skipped: say so to CTest (SKIP_RETURN_CODE 77), not "Passed". */
    if (failed == 0 && skip_reason) {
        fprintf(stderr, "skipped: %s\n", skip_reason);
        g_free(skip_reason);
        return 77;
    }
    g_free(skip_reason);
    return failed;
}
