/* The standby RDMA device: soft-RoCE on the control NIC, made for a move (standby.h). */
#include "guest-agent/agent/standby.h"

#include <errno.h>
#include <string.h>
#include <sys/utsname.h>

HM_ENUM_IMPL(agent_standby_state, AgentStandbyState, AGENT_STANDBY_STATE_LAST, "absent", "ready",
             "down", "unavailable")

struct AgentStandby {
    char *netdev;
    char *device;
    const AgentRdmaLinkOps *ops;
    gpointer ops_data;
    char *sysfs_root;
    char *modules_dir;
    GMutex lock;      /* error, created_ms: agent_standby_down() runs in a thread */
    char *error;      /* why the guest cannot have it (UNAVAILABLE), or the last failure */
    gboolean missing; /* the check failed: UNAVAILABLE */
    gint64 created_ms;
};

/* Names the kernel takes for a net device (IFNAMSIZ) and an RDMA device, without '%' (a
 * pattern) or '/' (a path). */
static gboolean agent_standby_name_ok(const char *name, gsize max)
{
    gsize n = name ? strlen(name) : 0;

    if (n == 0 || n > max)
        return FALSE;
    for (gsize i = 0; i < n; i++)
        if (!g_ascii_isalnum(name[i]) && name[i] != '_' && name[i] != '-' && name[i] != '.')
            return FALSE;
    return TRUE;
}

AgentStandby *agent_standby_new(const char *netdev, const char *device, const AgentRdmaLinkOps *ops,
                                gpointer ops_data, GError **error)
{
    AgentStandby *sb;

    g_return_val_if_fail(ops != NULL && ops->add != NULL && ops->del != NULL, NULL);
    if (!device)
        device = AGENT_STANDBY_DEVICE_DEFAULT;
    if (!agent_standby_name_ok(netdev, 15)) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                    "'%s' is not a network interface name", netdev ? netdev : "");
        return NULL;
    }
    if (!agent_standby_name_ok(device, AGENT_STANDBY_NAME_MAX)) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                    "'%s' is not an RDMA device name", device);
        return NULL;
    }
    sb = g_new0(AgentStandby, 1);
    sb->netdev = g_strdup(netdev);
    sb->device = g_strdup(device);
    sb->ops = ops;
    sb->ops_data = ops_data;
    sb->created_ms = -1;
    g_mutex_init(&sb->lock);
    return sb;
}

void agent_standby_free(AgentStandby *sb)
{
    if (!sb)
        return;
    g_free(sb->netdev);
    g_free(sb->device);
    g_free(sb->sysfs_root);
    g_free(sb->modules_dir);
    g_free(sb->error);
    g_mutex_clear(&sb->lock);
    g_free(sb);
}

void agent_standby_set_roots(AgentStandby *sb, const char *sysfs_root, const char *modules_dir)
{
    g_return_if_fail(sb != NULL);
    g_free(sb->sysfs_root);
    g_free(sb->modules_dir);
    sb->sysfs_root = g_strdup(sysfs_root);
    sb->modules_dir = g_strdup(modules_dir);
}

static const char *agent_standby_sysfs(const AgentStandby *sb)
{
    return sb->sysfs_root ? sb->sysfs_root : "/sys";
}

static char *agent_standby_modules_dir(const AgentStandby *sb)
{
    struct utsname u;

    if (sb->modules_dir)
        return g_strdup(sb->modules_dir);
    if (uname(&u) < 0)
        return g_strdup("/lib/modules");
    return g_strdup_printf("/lib/modules/%s", u.release);
}

static void agent_standby_set_error(AgentStandby *sb, const char *message, gboolean missing)
{
    g_mutex_lock(&sb->lock);
    g_free(sb->error);
    sb->error = g_strdup(message);
    sb->missing = missing;
    g_mutex_unlock(&sb->lock);
}

/* Whether @path's text holds @needle (a file that cannot be read holds nothing). */
static gboolean agent_standby_file_has(const char *path, const char *needle)
{
    g_autofree char *text = NULL;

    return g_file_get_contents(path, &text, NULL, NULL) && strstr(text, needle);
}

/* The kernel has soft-RoCE: rdma_rxe loaded (or built in with a /sys/module entry), built in,
 * or installed where the kernel's request_module() finds it ('rdma link add' loads it). */
static gboolean agent_standby_kernel_has_rxe(const AgentStandby *sb, const char *modules_dir)
{
    g_autofree char *loaded =
        g_build_filename(agent_standby_sysfs(sb), "module", AGENT_STANDBY_MODULE, NULL);
    g_autofree char *builtin = g_build_filename(modules_dir, "modules.builtin", NULL);
    g_autofree char *alias = g_build_filename(modules_dir, "modules.alias", NULL);

    return g_file_test(loaded, G_FILE_TEST_IS_DIR) ||
           agent_standby_file_has(builtin, "/" AGENT_STANDBY_MODULE ".ko") ||
           agent_standby_file_has(alias, "rdma-link-" AGENT_STANDBY_LINK_TYPE " ");
}

gboolean agent_standby_check(AgentStandby *sb, GError **error)
{
    g_autofree char *nic = NULL;
    g_autofree char *modules_dir = NULL;
    g_autofree char *message = NULL;

    g_return_val_if_fail(sb != NULL, FALSE);
    nic = g_build_filename(agent_standby_sysfs(sb), "class", "net", sb->netdev, NULL);
    modules_dir = agent_standby_modules_dir(sb);
    if (!g_file_test(nic, G_FILE_TEST_EXISTS))
        message = g_strdup_printf("No network interface '%s' for the standby RDMA device '%s'",
                                  sb->netdev, sb->device);
    else if (!agent_standby_kernel_has_rxe(sb, modules_dir))
        message = g_strdup_printf(
            "The kernel has no soft-RoCE for the standby RDMA device '%s': the module '%s' is "
            "neither loaded nor built in nor installed under '%s' (CONFIG_RDMA_RXE)",
            sb->device, AGENT_STANDBY_MODULE, modules_dir);
    if (message) {
        agent_standby_set_error(sb, message, TRUE);
        g_set_error_literal(error, HM_COMMON_ERROR, HM_COMMON_ERROR_FAILED, message);
        return FALSE;
    }
    agent_standby_set_error(sb, NULL, FALSE);
    return TRUE;
}

/* The net device an RDMA device of that name is on (its sysfs "parent"), or NULL when there is
 * no such RDMA device; "" when it has none. Owned. */
static char *agent_standby_parent(const AgentStandby *sb)
{
    g_autofree char *dir =
        g_build_filename(agent_standby_sysfs(sb), "class", "infiniband", sb->device, NULL);
    g_autofree char *path = g_build_filename(dir, "parent", NULL);
    char *parent = NULL;

    if (!g_file_test(dir, G_FILE_TEST_IS_DIR))
        return NULL;
    if (!g_file_get_contents(path, &parent, NULL, NULL))
        return g_strdup("");
    return g_strchomp(parent);
}

gboolean agent_standby_up(AgentStandby *sb, GError **error)
{
    g_autofree char *parent = NULL;
    g_autoptr(GError) local = NULL;
    int kernel_errno = 0;
    gint64 t0;

    g_return_val_if_fail(sb != NULL, FALSE);
    if (!agent_standby_check(sb, error))
        return FALSE;
    parent = agent_standby_parent(sb);
    if (parent && g_str_equal(parent, sb->netdev))
        return TRUE;
    if (parent) {
        g_autofree char *message =
            g_strdup_printf("The standby RDMA device '%s' exists already, on '%s', not on '%s'",
                            sb->device, *parent ? parent : "no network interface", sb->netdev);

        agent_standby_set_error(sb, message, FALSE);
        g_set_error_literal(error, HM_COMMON_ERROR, HM_COMMON_ERROR_FAILED, message);
        return FALSE;
    }
    t0 = g_get_monotonic_time();
    if (!sb->ops->add(sb->ops_data, sb->device, AGENT_STANDBY_LINK_TYPE, sb->netdev, &kernel_errno,
                      &local)) {
        /* the kernel answers EINVAL for a link type it has no driver for */
        if (kernel_errno == EINVAL || kernel_errno == EOPNOTSUPP)
            g_prefix_error(
                &local, "The kernel did not load soft-RoCE (module '%s'): ", AGENT_STANDBY_MODULE);
        else if (kernel_errno == EPERM)
            g_prefix_error(&local, "The agent needs CAP_NET_ADMIN: ");
        agent_standby_set_error(sb, local->message, FALSE);
        g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                   "Making the standby RDMA device '%s' on '%s': ", sb->device,
                                   sb->netdev);
        return FALSE;
    }
    g_mutex_lock(&sb->lock);
    sb->created_ms = (g_get_monotonic_time() - t0) / G_TIME_SPAN_MILLISECOND;
    g_clear_pointer(&sb->error, g_free);
    g_mutex_unlock(&sb->lock);
    return TRUE;
}

gboolean agent_standby_down(AgentStandby *sb, GError **error)
{
    g_autofree char *parent = NULL;
    g_autoptr(GError) local = NULL;
    int kernel_errno = 0;

    g_return_val_if_fail(sb != NULL, FALSE);
    parent = agent_standby_parent(sb);
    if (!parent || !g_str_equal(parent, sb->netdev))
        return TRUE; /* not there, or not ours: left alone */
    if (!sb->ops->del(sb->ops_data, sb->device, &kernel_errno, &local)) {
        agent_standby_set_error(sb, local->message, FALSE);
        g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                   "Removing the standby RDMA device '%s': ", sb->device);
        return FALSE;
    }
    return TRUE;
}

AgentStandbyState agent_standby_get_state(AgentStandby *sb)
{
    g_autofree char *parent = NULL;
    g_autofree char *path = NULL;
    g_autofree char *state = NULL;
    gboolean missing;

    g_return_val_if_fail(sb != NULL, AGENT_STANDBY_STATE_UNAVAILABLE);
    g_mutex_lock(&sb->lock);
    missing = sb->missing;
    g_mutex_unlock(&sb->lock);
    if (missing)
        return AGENT_STANDBY_STATE_UNAVAILABLE;
    parent = agent_standby_parent(sb);
    if (!parent || !g_str_equal(parent, sb->netdev))
        return AGENT_STANDBY_STATE_ABSENT;
    path = g_build_filename(agent_standby_sysfs(sb), "class", "infiniband", sb->device, "ports",
                            "1", "state", NULL);
    /* "4: ACTIVE" */
    if (g_file_get_contents(path, &state, NULL, NULL) && strstr(state, "ACTIVE"))
        return AGENT_STANDBY_STATE_READY;
    return AGENT_STANDBY_STATE_DOWN;
}

const char *agent_standby_get_device(const AgentStandby *sb)
{
    return sb->device;
}

const char *agent_standby_get_netdev(const AgentStandby *sb)
{
    return sb->netdev;
}

gint64 agent_standby_get_created_ms(const AgentStandby *sb)
{
    gint64 ms;

    g_mutex_lock((GMutex *)&sb->lock);
    ms = sb->created_ms;
    g_mutex_unlock((GMutex *)&sb->lock);
    return ms;
}

void agent_standby_add_json(AgentStandby *sb, JsonBuilder *b)
{
    AgentStandbyState state = agent_standby_get_state(sb);
    g_autofree char *error = NULL;
    gint64 created_ms = agent_standby_get_created_ms(sb);

    g_mutex_lock(&sb->lock);
    error = g_strdup(sb->error);
    g_mutex_unlock(&sb->lock);
    json_builder_set_member_name(b, "standby");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "netdev");
    json_builder_add_string_value(b, sb->netdev);
    json_builder_set_member_name(b, "device");
    json_builder_add_string_value(b, sb->device);
    json_builder_set_member_name(b, "state");
    json_builder_add_string_value(b, agent_standby_state_to_string(state));
    if (created_ms >= 0) {
        json_builder_set_member_name(b, "created_ms");
        json_builder_add_int_value(b, created_ms);
    }
    if (error) {
        g_autofree char *valid = g_utf8_make_valid(error, -1);

        json_builder_set_member_name(b, "error");
        json_builder_add_string_value(b, valid);
    }
    json_builder_end_object(b);
}
