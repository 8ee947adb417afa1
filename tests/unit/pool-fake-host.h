/* A fake host for hotmigd's pool (HotmigdHostOps): PFs with VFs, single VFs, network devices
 * and the domains using PCI VFs are set by the test; IB identity and vfio calls are recorded. */
#pragma once

#include "hotmigd/server.h"

typedef struct {
    GHashTable *pfs;       /* PF address -> GPtrArray of HotmigdPoolPciVf (templates, owned) */
    GHashTable *vfs;       /* VF address -> HotmigdPoolPciVf (template, owned) */
    GHashTable *netdevs;   /* names that exist (set) */
    GHashTable *domains;   /* PCI address -> domain */
    gboolean domains_fail; /* domains_using fails with ORCH_ERROR_UNAVAILABLE */
    gboolean ib_fail;      /* ib_identity fails */
    guint64 kernel_node, kernel_port; /* what ib_identity_read reports; 0: "unknown" */
    /* recorded */
    guint ib_calls;
    char *ib_pf_netdev;
    guint ib_vf_index;
    guint64 ib_node, ib_port;
    guint vfio_calls;
    char *vfio_address;
    /* Which threads call the host: every call (atomic), and those from @main_thread (set by
     * the test; NULL: not counted). hotmigd's pool is used by its worker thread only. */
    gint calls;
    GThread *main_thread;
    gint main_thread_calls;
} FakeHost;

FakeHost *fake_host_new(void);
extern const HotmigdHostOps fake_host_ops;

/* A VF template (owned) whose PF has netdev ib0. */
HotmigdPoolPciVf *fake_vf(const char *address, const char *pf, guint index, guint vendor,
                          guint device, const char *driver);
/* Adds PF @pf ("DDDD:BB:SS.F") with @n VFs of model @vendor:@device at DDDD:BB:01.0,
 * DDDD:BB:01.1, ... (8 functions a slot), bound to mlx5_core. */
void fake_host_add_pf(FakeHost *host, const char *pf, guint n, guint vendor, guint device);
