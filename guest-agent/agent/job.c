#include "guest-agent/agent/job.h"

#include <string.h>

#include "common/common.h"

/* Bounds on what is read of a process's files. */
#define JOB_ENVIRON_MAX (128 * 1024)
#define JOB_CGROUP_MAX (16 * 1024)

/* @len bytes at @s as a job id (owned), NULL when they are not one. */
static char *job_id(const char *s, gsize len)
{
    if (len == 0 || len > AGENT_JOB_MAX)
        return NULL;
    for (gsize i = 0; i < len; i++) {
        if (!g_ascii_isalnum(s[i]) && !strchr("._:-", s[i]))
            return NULL;
    }
    return g_strndup(s, len);
}

/* The value of @name in a NUL-separated environment block (owned), NULL when absent or not a
 * job id. */
static char *job_from_environ(const char *env, gsize len, const char *name)
{
    gsize n = strlen(name);

    for (gsize pos = 0; pos < len;) {
        const char *entry = env + pos;
        const char *end = memchr(entry, '\0', len - pos);
        gsize elen = end ? (gsize)(end - entry) : len - pos;

        if (elen > n && !memcmp(entry, name, n) && entry[n] == '=')
            return job_id(entry + n + 1, elen - n - 1);
        pos += elen + 1;
    }
    return NULL;
}

/* Slurm's cgroup (v1 ".../slurm/uid_U/job_N/step_S", v2 ".../job_N/step_S/..."): N. */
static char *job_from_cgroup(const char *text, gsize len)
{
    for (const char *p = text; (p = g_strstr_len(p, len - (p - text), "/job_")); p++) {
        const char *start = p + 5;
        const char *q = start;

        while (q < text + len && g_ascii_isdigit(*q))
            q++;
        if (q > start && (q == text + len || *q == '/' || *q == '\n'))
            return job_id(start, q - start);
    }
    return NULL;
}

char *agent_job_of_pid(const char *proc_root, gint pid)
{
    g_autofree char *environ_path = NULL;
    g_autofree char *cgroup_path = NULL;
    g_autofree char *data = NULL;
    gsize len = 0;
    char *job = NULL;

    g_return_val_if_fail(proc_root != NULL, NULL);
    if (pid <= 0)
        return NULL;
    environ_path = g_strdup_printf("%s/%d/environ", proc_root, pid);
    if (hm_file_read_limited(environ_path, JOB_ENVIRON_MAX, &data, &len, NULL)) {
        job = job_from_environ(data, len, "HOTMIG_JOB");
        if (!job)
            job = job_from_environ(data, len, "SLURM_JOB_ID");
        if (job)
            return job;
        g_clear_pointer(&data, g_free);
    }
    cgroup_path = g_strdup_printf("%s/%d/cgroup", proc_root, pid);
    if (hm_file_read_limited(cgroup_path, JOB_CGROUP_MAX, &data, &len, NULL))
        job = job_from_cgroup(data, len);
    return job;
}
