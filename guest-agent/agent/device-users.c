#include "guest-agent/agent/device-users.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"

#define DEVICE_USERS_COMM_MAX 64

void agent_device_user_free(AgentDeviceUser *user)
{
    if (!user)
        return;
    g_free(user->name);
    g_free(user->device);
    g_free(user);
}

/* @s as a decimal pid, or 0. */
static gint device_users_pid(const char *s)
{
    gint64 v = 0;

    if (!*s)
        return 0;
    for (const char *p = s; *p; p++) {
        if (!g_ascii_isdigit(*p))
            return 0;
        v = v * 10 + (*p - '0');
        if (v > G_MAXINT)
            return 0;
    }
    return (gint)v;
}

/* The node ("uverbs0") of @pid's first descriptor on a verbs device: owned, NULL when none;
 * -1 in *ret_err when its descriptors cannot be read. */
static char *device_users_node(const char *proc_root, gint pid, int *ret_err)
{
    g_autofree char *fd_dir = g_strdup_printf("%s/%d/fd", proc_root, pid);
    g_autoptr(GDir) dir = g_dir_open(fd_dir, 0, NULL);
    const char *name;

    *ret_err = 0;
    if (!dir) {
        *ret_err = -1;
        return NULL;
    }
    while ((name = g_dir_read_name(dir))) {
        g_autofree char *link = g_build_filename(fd_dir, name, NULL);
        char target[256];
        ssize_t n = readlink(link, target, sizeof(target) - 1);

        if (n <= 0)
            continue;
        target[n] = '\0';
        if (g_str_has_prefix(target, AGENT_DEVICE_NODE_PREFIX)) {
            const char *node = target + strlen("/dev/infiniband/");
            gsize len = 0;

            while (len < 32 && (g_ascii_isalnum(node[len]) || strchr("._-", node[len])) &&
                   node[len])
                len++;
            return g_strndup(node, len); /* " (deleted)" and the like left out */
        }
    }
    return NULL;
}

/* @pid's comm as a token: printable, no white space ("_" instead), 1..64 bytes. */
static char *device_users_comm(const char *proc_root, gint pid)
{
    g_autofree char *path = g_strdup_printf("%s/%d/comm", proc_root, pid);
    g_autofree char *data = NULL;
    gsize len = 0;

    if (!hm_file_read_limited(path, DEVICE_USERS_COMM_MAX, &data, &len, NULL))
        return g_strdup("_");
    while (len && (data[len - 1] == '\n' || data[len - 1] == '\0'))
        len--;
    if (!len)
        return g_strdup("_");
    for (gsize i = 0; i < len; i++)
        if ((guchar)data[i] <= 0x20 || (guchar)data[i] >= 0x7f)
            data[i] = '_';
    return g_strndup(data, len);
}

static int device_users_cmp_pid(gconstpointer a, gconstpointer b)
{
    gint x = *(const gint *)a, y = *(const gint *)b;

    return (x > y) - (x < y);
}

GPtrArray *agent_device_users(const char *proc_root, const gint *skip, gsize n_skip,
                              guint *ret_dropped, guint *ret_unreadable)
{
    g_autoptr(GPtrArray) users =
        g_ptr_array_new_with_free_func((GDestroyNotify)agent_device_user_free);
    g_autoptr(GArray) pids = g_array_new(FALSE, FALSE, sizeof(gint));
    g_autoptr(GDir) dir = NULL;
    guint dropped = 0, unreadable = 0;
    const char *name;

    g_return_val_if_fail(proc_root != NULL, NULL);
    dir = g_dir_open(proc_root, 0, NULL);
    while (dir && (name = g_dir_read_name(dir))) {
        gint pid = device_users_pid(name);

        if (pid > 0)
            g_array_append_val(pids, pid);
    }
    g_array_sort(pids, device_users_cmp_pid);
    for (guint i = 0; i < pids->len; i++) {
        gint pid = g_array_index(pids, gint, i);
        g_autofree char *node = NULL;
        gboolean skipped = FALSE;
        int err;

        for (gsize k = 0; k < n_skip && !skipped; k++)
            skipped = skip[k] == pid;
        if (skipped)
            continue;
        node = device_users_node(proc_root, pid, &err);
        if (err) {
            unreadable++;
            continue;
        }
        if (!node)
            continue;
        if (users->len == AGENT_DEVICE_USERS_MAX) {
            dropped++;
            continue;
        }
        {
            AgentDeviceUser *user = g_new0(AgentDeviceUser, 1);

            user->pid = pid;
            user->name = device_users_comm(proc_root, pid);
            user->device = g_steal_pointer(&node);
            g_ptr_array_add(users, user);
        }
    }
    if (ret_dropped)
        *ret_dropped = dropped;
    if (ret_unreadable)
        *ret_unreadable = unreadable;
    return g_steal_pointer(&users);
}
