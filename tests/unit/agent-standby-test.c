/* The standby RDMA device (guest-agent/agent/standby.c, issue 30): the kernel check and its
 * messages, made and removed through the RDMA netlink adapter (faked here: it makes the sysfs
 * entries the kernel would, in a fixture tree), and in the agent: made at prepare, named in the
 * inventory, removed at resume. */
#include "guest-agent/agent/agent-priv.h"
#include "guest-agent/agent/standby.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

typedef struct {
    char *root; /* fixture: root/sys, root/modules */
    char *sysfs;
    char *modules;
    int adds, dels;
    int add_errno; /* the kernel's answer to the next add: 0 makes the device */
    guint del_ms;  /* how long a removal takes (the kernel waits for the device's users) */
    char last_type[16], last_netdev[32];
} Fixture;

static void write_file(const char *path, const char *text)
{
    g_autofree char *dir = g_path_get_dirname(path);

    assert_int_equal(g_mkdir_with_parents(dir, 0755), 0);
    assert_true(g_file_set_contents(path, text, -1, NULL));
}

static gboolean fake_add(gpointer data, const char *name, const char *type, const char *netdev,
                         int *ret_errno, GError **error)
{
    Fixture *f = data;
    g_autofree char *dev = g_build_filename(f->sysfs, "class", "infiniband", name, NULL);
    g_autofree char *parent = g_build_filename(dev, "parent", NULL);
    g_autofree char *state = g_build_filename(dev, "ports", "1", "state", NULL);

    f->adds++;
    g_strlcpy(f->last_type, type, sizeof(f->last_type));
    g_strlcpy(f->last_netdev, netdev, sizeof(f->last_netdev));
    if (f->add_errno) {
        *ret_errno = f->add_errno;
        hm_set_error_errno(error, f->add_errno, "rdma link add '%s' type %s netdev '%s'", name,
                           type, netdev);
        return FALSE;
    }
    write_file(parent, netdev);
    write_file(state, "4: ACTIVE\n");
    return TRUE;
}

static gboolean fake_del(gpointer data, const char *name, int *ret_errno, GError **error)
{
    Fixture *f = data;
    g_autofree char *dev = g_build_filename(f->sysfs, "class", "infiniband", name, NULL);
    g_autofree char *parent = g_build_filename(dev, "parent", NULL);
    g_autofree char *state = g_build_filename(dev, "ports", "1", "state", NULL);
    g_autofree char *ports1 = g_build_filename(dev, "ports", "1", NULL);
    g_autofree char *ports = g_build_filename(dev, "ports", NULL);

    (void)ret_errno;
    (void)error;
    f->dels++;
    g_usleep(f->del_ms * G_TIME_SPAN_MILLISECOND);
    g_unlink(parent);
    g_unlink(state);
    g_rmdir(ports1);
    g_rmdir(ports);
    g_rmdir(dev);
    return TRUE;
}

static const AgentRdmaLinkOps fake_ops = {.add = fake_add, .del = fake_del};

/* A guest with the control NIC eth1 and, when @rxe, rdma_rxe loaded. */
static int setup_with(void **state, gboolean rxe)
{
    Fixture *f = g_new0(Fixture, 1);
    g_autofree char *nic = NULL;

    f->root = g_dir_make_tmp("agent-standby-XXXXXX", NULL);
    assert_non_null(f->root);
    f->sysfs = g_build_filename(f->root, "sys", NULL);
    f->modules = g_build_filename(f->root, "modules", NULL);
    nic = g_build_filename(f->sysfs, "class", "net", "eth1", "operstate", NULL);
    write_file(nic, "up\n");
    assert_int_equal(g_mkdir_with_parents(f->modules, 0755), 0);
    if (rxe) {
        g_autofree char *mod = g_build_filename(f->sysfs, "module", "rdma_rxe", NULL);

        assert_int_equal(g_mkdir_with_parents(mod, 0755), 0);
    }
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_with(state, TRUE);
}

static int setup_no_rxe(void **state)
{
    return setup_with(state, FALSE);
}

static int teardown(void **state)
{
    Fixture *f = *state;
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", f->root);

    assert_int_equal(system(cmd), 0);
    g_free(f->root);
    g_free(f->sysfs);
    g_free(f->modules);
    g_free(f);
    return 0;
}

static AgentStandby *standby_new(Fixture *f, const char *netdev)
{
    g_autoptr(GError) error = NULL;
    AgentStandby *sb = agent_standby_new(netdev, NULL, &fake_ops, f, &error);

    assert_non_null(sb);
    agent_standby_set_roots(sb, f->sysfs, f->modules);
    return sb;
}

/* The inventory's "standby" member of @sb, as text. */
static char *standby_json(AgentStandby *sb)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) root = NULL;

    json_builder_begin_object(b);
    agent_standby_add_json(sb, b);
    json_builder_end_object(b);
    root = json_builder_get_root(b);
    return json_to_string(root, FALSE);
}

/* Made on the NIC as 'rdma link add hmsb0 type rxe netdev eth1'; ready; then removed. */
static void test_up_down(void **state)
{
    Fixture *f = *state;
    g_autoptr(AgentStandby) sb = standby_new(f, "eth1");
    g_autoptr(GError) error = NULL;
    g_autofree char *json = NULL;

    assert_int_equal(agent_standby_get_state(sb), AGENT_STANDBY_STATE_ABSENT);
    assert_int_equal(agent_standby_get_created_ms(sb), -1);
    assert_true(agent_standby_up(sb, &error));
    assert_int_equal(f->adds, 1);
    assert_string_equal(f->last_type, "rxe");
    assert_string_equal(f->last_netdev, "eth1");
    assert_int_equal(agent_standby_get_state(sb), AGENT_STANDBY_STATE_READY);
    assert_true(agent_standby_get_created_ms(sb) >= 0);
    json = standby_json(sb);
    assert_non_null(strstr(json, "\"standby\":{\"netdev\":\"eth1\",\"device\":\"hmsb0\","
                                 "\"state\":\"ready\",\"created_ms\":"));
    /* made already (the agent restarted): taken as it is */
    assert_true(agent_standby_up(sb, &error));
    assert_int_equal(f->adds, 1);
    assert_true(agent_standby_down(sb, &error));
    assert_int_equal(f->dels, 1);
    assert_int_equal(agent_standby_get_state(sb), AGENT_STANDBY_STATE_ABSENT);
    /* not there: nothing to do */
    assert_true(agent_standby_down(sb, &error));
    assert_int_equal(f->dels, 1);
}

/* A kernel without rdma_rxe: refused before any netlink request, naming the module and the
 * kernel option; the inventory says unavailable, with that message. */
static void test_kernel_without_rxe(void **state)
{
    Fixture *f = *state;
    g_autoptr(AgentStandby) sb = standby_new(f, "eth1");
    g_autoptr(GError) error = NULL;
    g_autofree char *json = NULL;

    assert_false(agent_standby_check(sb, &error));
    assert_non_null(strstr(error->message, "no soft-RoCE"));
    assert_non_null(strstr(error->message, "'rdma_rxe'"));
    assert_non_null(strstr(error->message, "CONFIG_RDMA_RXE"));
    assert_non_null(strstr(error->message, f->modules));
    g_clear_error(&error);
    assert_false(agent_standby_up(sb, &error));
    assert_non_null(strstr(error->message, "'rdma_rxe'"));
    assert_int_equal(f->adds, 0);
    assert_int_equal(agent_standby_get_state(sb), AGENT_STANDBY_STATE_UNAVAILABLE);
    json = standby_json(sb);
    assert_non_null(strstr(json, "\"state\":\"unavailable\""));
    assert_non_null(strstr(json, "\"error\":\"The kernel has no soft-RoCE"));
}

/* rdma_rxe not loaded but installed (modules.alias: the kernel loads it on 'rdma link add'),
 * or built in: available. */
static void test_kernel_rxe_loadable(void **state)
{
    Fixture *f = *state;
    g_autoptr(AgentStandby) sb = standby_new(f, "eth1");
    g_autofree char *alias = g_build_filename(f->modules, "modules.alias", NULL);
    g_autofree char *builtin = g_build_filename(f->modules, "modules.builtin", NULL);
    g_autoptr(GError) error = NULL;

    write_file(alias, "alias rdma-link-siw siw\nalias rdma-link-rxe rdma_rxe\n");
    assert_true(agent_standby_check(sb, &error));
    g_unlink(alias);
    assert_false(agent_standby_check(sb, NULL));
    write_file(builtin, "kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko\n");
    assert_true(agent_standby_check(sb, &error));
}

/* The kernel refuses the link type after all (the module would not load): said so. */
static void test_kernel_refuses_link_type(void **state)
{
    Fixture *f = *state;
    g_autoptr(AgentStandby) sb = standby_new(f, "eth1");
    g_autoptr(GError) error = NULL;

    f->add_errno = EINVAL;
    assert_false(agent_standby_up(sb, &error));
    assert_non_null(strstr(error->message, "Making the standby RDMA device 'hmsb0' on 'eth1'"));
    assert_non_null(strstr(error->message, "did not load soft-RoCE (module 'rdma_rxe')"));
    g_clear_error(&error);
    f->add_errno = EPERM;
    assert_false(agent_standby_up(sb, &error));
    assert_non_null(strstr(error->message, "CAP_NET_ADMIN"));
    assert_int_equal(agent_standby_get_state(sb), AGENT_STANDBY_STATE_ABSENT);
}

/* No such NIC; a device of that name on another NIC is not taken; names checked. */
static void test_refusals(void **state)
{
    Fixture *f = *state;
    g_autoptr(AgentStandby) sb = standby_new(f, "eth9");
    g_autoptr(AgentStandby) other = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *parent =
        g_build_filename(f->sysfs, "class", "infiniband", "hmsb0", "parent", NULL);
    g_autofree char *nic = g_build_filename(f->sysfs, "class", "net", "eth0", "operstate", NULL);

    assert_false(agent_standby_up(sb, &error));
    assert_non_null(strstr(error->message, "No network interface 'eth9'"));
    g_clear_error(&error);
    write_file(nic, "up\n");
    write_file(parent, "eth0");
    other = standby_new(f, "eth1");
    assert_false(agent_standby_up(other, &error));
    assert_non_null(strstr(error->message, "exists already, on 'eth0', not on 'eth1'"));
    assert_true(agent_standby_down(other, NULL)); /* not ours: left alone */
    assert_int_equal(f->dels, 0);
    g_clear_error(&error);
    assert_null(agent_standby_new("eth1", "rxe%d", &fake_ops, f, &error));
    assert_true(g_error_matches(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID));
    g_clear_error(&error);
    assert_null(agent_standby_new("a/b", NULL, &fake_ops, f, &error));
}

/* ---- in the agent: made at prepare, in the inventory, removed at resume -------------------- */

/* As libibverbs lists them on the lab: the standby first while it exists, then the VF's rxe0;
 * the first active one that is not @except. */
static char *fake_find_active(gpointer data, const char *prefer, const char *except, GError **error)
{
    Fixture *f = data;
    g_autofree char *standby = g_build_filename(f->sysfs, "class", "infiniband", "hmsb0", NULL);

    (void)prefer;
    (void)error;
    if (g_file_test(standby, G_FILE_TEST_IS_DIR) && g_strcmp0(except, "hmsb0") != 0)
        return g_strdup("hmsb0");
    return g_strdup("rxe0");
}

static GPtrArray *fake_list(gpointer data, GError **error)
{
    (void)data;
    (void)error;
    return g_ptr_array_new_with_free_func((GDestroyNotify)agent_rdma_device_free);
}

static const AgentVerbsOps fake_verbs = {.find_active_device = fake_find_active,
                                         .list_devices = fake_list};

static void on_reply(const char *data, gsize len, gpointer user_data)
{
    g_string_append_len(user_data, data, (gssize)len);
}

/* Feeds @line to the agent and runs its main context until a reply line came: the reply. */
static char *agent_ask(Agent *agent, GString *out, const char *line)
{
    gint64 until = g_get_monotonic_time() + 5 * G_TIME_SPAN_SECOND;

    g_string_truncate(out, 0);
    agent_host_feed(agent, (const guint8 *)line, strlen(line));
    while (!strchr(out->str, '\n') && g_get_monotonic_time() < until)
        g_main_context_iteration(NULL, FALSE);
    assert_non_null(strchr(out->str, '\n'));
    return g_strdup(out->str);
}

static void test_agent_prepare_inventory_resume(void **state)
{
    Fixture *f = *state;
    g_autoptr(Agent) agent = agent_new(&fake_verbs, f);
    g_autoptr(GString) out = g_string_new(NULL);
    g_autofree char *r1 = NULL, *r2 = NULL, *r3 = NULL, *r4 = NULL, *r5 = NULL, *r6 = NULL;
    g_autofree char *r7 = NULL;

    agent_set_reply_func(agent, on_reply, out);
    agent_set_standby(agent, standby_new(f, "eth1"));
    f->del_ms = 300; /* still there when resume looks for the new device (seen on the lab) */
    r1 = agent_ask(agent, out, "{\"execute\":\"info\",\"arguments\":{\"protocol\":2}}\n");
    r2 = agent_ask(agent, out, "{\"execute\":\"inventory\"}\n");
    assert_non_null(strstr(r2, "\"standby\":{\"netdev\":\"eth1\",\"device\":\"hmsb0\","
                               "\"state\":\"absent\"}"));
    r3 = agent_ask(agent, out, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":1000}}\n");
    assert_non_null(strstr(r3, "\"device\":\"rxe0\"")); /* the device to come back to */
    assert_int_equal(f->adds, 1);
    r4 = agent_ask(agent, out, "{\"execute\":\"inventory\"}\n");
    assert_non_null(strstr(r4, "\"state\":\"ready\",\"created_ms\":"));
    r5 = agent_ask(agent, out, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":1000}}\n");
    assert_non_null(strstr(r5, "\"device\":\"rxe0\"")); /* never the standby */
    /* a second move while the last standby is still being removed: none for it, and the
     * device to come back to is never the standby */
    r6 = agent_ask(agent, out, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":1000}}\n");
    assert_non_null(strstr(r6, "\"device\":\"rxe0\""));
    assert_int_equal(f->adds, 1);
    r7 = agent_ask(agent, out, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":1000}}\n");
    assert_non_null(strstr(r7, "\"device\":\"rxe0\""));
    agent_standby_wait(agent);
    assert_int_equal(f->dels, 1);
}

/* ---- the lease (STANDBY on the agent's socket): a peer's process, a mover's ---------------- */

static int lease_connect(const char *sock)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    g_strlcpy(addr.sun_path, sock, sizeof(addr.sun_path));
    assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(write(fd, "STANDBY\n", 8), 8);
    return fd;
}

/* The agent's answer on @fd (running its main context meanwhile), without the newline. */
static char *lease_answer(int fd)
{
    g_autoptr(GString) line = g_string_new(NULL);
    gint64 end = g_get_monotonic_time() + 5 * G_TIME_SPAN_SECOND;

    while (g_get_monotonic_time() < end) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        char c;

        g_main_context_iteration(NULL, FALSE);
        if (poll(&pfd, 1, 1) == 1) {
            if (read(fd, &c, 1) != 1)
                break;
            if (c == '\n')
                return g_string_free(g_steal_pointer(&line), FALSE);
            g_string_append_c(line, c);
        }
    }
    fail_msg("no STANDBY answer");
    return NULL;
}

static void run_for(guint ms)
{
    gint64 end = g_get_monotonic_time() + (gint64)ms * 1000;

    while (g_get_monotonic_time() < end)
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(1000);
}

/* A peer guest moves: the first lease makes the device, a second shares it, the device goes
 * after the last is closed. This guest moves with "standby":0: its processes are refused the
 * device. Without --standby every lease is refused, the agent says why. */
static void test_agent_lease(void **state)
{
    Fixture *f = *state;
    g_autoptr(Agent) agent = agent_new(&fake_verbs, f);
    g_autoptr(Agent) plain = agent_new(&fake_verbs, f);
    g_autoptr(GString) out = g_string_new(NULL);
    g_autofree char *sock = g_build_filename(f->root, "agent.sock", NULL);
    g_autofree char *sock2 = g_build_filename(f->root, "plain.sock", NULL);
    g_autofree char *a1 = NULL, *a2 = NULL, *a3 = NULL, *a4 = NULL, *r1 = NULL, *r2 = NULL;
    g_autoptr(GError) error = NULL;
    int l1, l2, l3, l4;

    agent_set_reply_func(agent, on_reply, out);
    agent_set_standby(agent, standby_new(f, "eth1"));
    assert_true(agent_listen(agent, sock, NULL, &error));
    l1 = lease_connect(sock);
    a1 = lease_answer(l1);
    assert_string_equal(a1, "STANDBY 0 hmsb0");
    assert_int_equal(f->adds, 1);
    l2 = lease_connect(sock);
    a2 = lease_answer(l2);
    assert_string_equal(a2, "STANDBY 0 hmsb0");
    assert_int_equal(f->adds, 1); /* shared */
    close(l1);
    run_for(50);
    assert_int_equal(f->dels, 0); /* one lease left */
    close(l2);
    run_for(50);
    agent_standby_wait(agent);
    assert_int_equal(f->dels, 1);
    /* this guest moves without a standby device: none for its processes, none made */
    r1 = agent_ask(agent, out, "{\"execute\":\"info\",\"arguments\":{\"protocol\":2}}\n");
    r2 = agent_ask(agent, out,
                   "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":1000,\"standby\":0}}\n");
    assert_non_null(strstr(r2, "\"device\":\"rxe0\""));
    assert_null(strstr(r2, "\"standby\""));
    l3 = lease_connect(sock);
    a3 = lease_answer(l3);
    assert_string_equal(a3, "STANDBY 95 this move uses no standby device");
    assert_int_equal(f->adds, 1);
    close(l3);
    /* an agent without --standby */
    assert_true(agent_listen(plain, sock2, NULL, &error));
    l4 = lease_connect(sock2);
    a4 = lease_answer(l4);
    assert_string_equal(a4, "STANDBY 95 this guest's agent has no standby device (--standby)");
    close(l4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_up_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kernel_without_rxe, setup_no_rxe, teardown),
        cmocka_unit_test_setup_teardown(test_kernel_rxe_loadable, setup_no_rxe, teardown),
        cmocka_unit_test_setup_teardown(test_kernel_refuses_link_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_prepare_inventory_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_lease, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
