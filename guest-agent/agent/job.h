/* hotmig-agent: the batch job a registered process belongs to, as the guest sees it (issue 32
 * item 7): reported in the agent's inventory; the host's own record of the job (the domain's
 * libvirt metadata, docs/hotmigd.md "Jobs") wins where both exist. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The longest job id reported; longer ones are not reported. */
#define AGENT_JOB_MAX 64

/* The job of process @pid, from @proc_root ("/proc"): its environment's HOTMIG_JOB, else its
 * SLURM_JOB_ID (when the agent may read the environment: a process of another user needs
 * CAP_SYS_PTRACE, which the shipped unit keeps), else the Slurm job of its cgroup
 * (".../job_N/..."; readable by anyone). An id is 1 to AGENT_JOB_MAX bytes of
 * [A-Za-z0-9._:-]. Owned; NULL when none is found. */
char *agent_job_of_pid(const char *proc_root, gint pid);

G_END_DECLS
