/* hotmigd's VF pool: the VFs this host may hand out ([pool] pfs, vfs, standins), what state
 * each is in, and the operations on them. Leases are hm-hotplug's lease store; everything the
 * pool needs to know about the host comes through HotmigdHostOps (hotmigd/host.c, or a fake). */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/pool.h"

#include <string.h>

struct HotmigdPool {
    char *host_name;
    guint lease_ttl_s;
    guint lease_ttl_max_s;
    GPtrArray *pfs; /* canonical ids (owned strings) */
    GPtrArray *vfs;
    GPtrArray *standins;
    HotplugLeaseStore *store;
    const HotmigdHostOps *ops;
    gpointer host;
};

void hotmigd_pool_pci_vf_free(HotmigdPoolPciVf *vf)
{
    if (!vf)
        return;
    g_free(vf->address);
    g_free(vf->pf_address);
    g_free(vf->driver);
    g_free(vf->pf_netdev);
    g_free(vf);
}

void hotmigd_pool_entry_free(HotmigdPoolEntry *entry)
{
    if (!entry)
        return;
    g_free(entry->id);
    hotmigd_pool_pci_vf_free(entry->pci);
    hotplug_lease_free(entry->lease);
    g_free(entry->assigned_to);
    g_free(entry->note);
    g_free(entry);
}

void hotmigd_pool_free(HotmigdPool *pool)
{
    if (!pool)
        return;
    g_free(pool->host_name);
    g_clear_pointer(&pool->pfs, g_ptr_array_unref);
    g_clear_pointer(&pool->vfs, g_ptr_array_unref);
    g_clear_pointer(&pool->standins, g_ptr_array_unref);
    hotplug_lease_store_free(pool->store);
    if (pool->host && pool->ops->free)
        pool->ops->free(pool->host);
    g_free(pool);
}

/* The canonical ids of @list, checked: PCI addresses for pfs and vfs, net device names for
 * stand-ins, none twice in the whole pool (@seen). */
static GPtrArray *pool_ids(const char *key, const char *const *list, gboolean pci, GHashTable *seen,
                           GError **error)
{
    g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func(g_free);

    for (guint i = 0; list && list[i]; i++) {
        g_autoptr(GError) local = NULL;
        g_autofree char *id = hotplug_lease_vf_canonical(list[i], &local);
        gboolean is_pci = id && hm_pci_address_parse(id, NULL, NULL);

        if (!id) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "[pool] %s: %s", key,
                        local->message);
            return NULL;
        }
        if (is_pci != pci) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "[pool] %s: '%s' is %s", key,
                        list[i], pci ? "not a PCI address" : "a PCI address, not a net device");
            return NULL;
        }
        if (g_hash_table_contains(seen, id)) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                        "[pool] %s: '%s' is in the pool twice", key, list[i]);
            return NULL;
        }
        g_hash_table_add(seen, g_strdup(id));
        g_ptr_array_add(out, g_steal_pointer(&id));
    }
    return g_steal_pointer(&out);
}

HotmigdPool *hotmigd_pool_new(const HotmigdPoolConfig *config, const HotmigdHostOps *ops,
                              gpointer host, GError **error)
{
    g_autoptr(HotmigdPool) pool = g_new0(HotmigdPool, 1);
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(GError) local = NULL;

    g_return_val_if_fail(config && config->lease_dir && ops, NULL);

    pool->ops = ops;
    pool->host = host;
    pool->host_name = g_strdup(config->host_name ? config->host_name : g_get_host_name());
    pool->lease_ttl_s = config->lease_ttl_s ? config->lease_ttl_s : 300;
    pool->lease_ttl_max_s = config->lease_ttl_max_s ? config->lease_ttl_max_s : 1800;
    pool->pfs = pool_ids("pfs", config->pfs, TRUE, seen, error);
    if (!pool->pfs)
        return NULL;
    pool->vfs = pool_ids("vfs", config->vfs, TRUE, seen, error);
    if (!pool->vfs)
        return NULL;
    pool->standins = pool_ids("standins", config->standins, FALSE, seen, error);
    if (!pool->standins)
        return NULL;
    pool->store = hotplug_lease_store_open(config->lease_dir, &local);
    if (!pool->store) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "Cannot open the lease store '%s': %s",
                    config->lease_dir, local->message);
        return NULL;
    }
    return g_steal_pointer(&pool);
}

const char *hotmigd_pool_host_name(const HotmigdPool *pool)
{
    g_return_val_if_fail(pool != NULL, NULL);
    return pool->host_name;
}

/* ---- the pool's state ---------------------------------------------------------------------- */

static HotmigdPoolEntry *entry_new(const char *id, OrchVfKind kind)
{
    HotmigdPoolEntry *entry = g_new0(HotmigdPoolEntry, 1);

    entry->id = g_strdup(id);
    entry->kind = kind;
    entry->state = ORCH_VF_STATE_FREE;
    return entry;
}

/* What the pool holds now, without states: every configured VF, PCI facts read. */
typedef struct {
    GPtrArray *entries;  /* HotmigdPoolEntry */
    GHashTable *by_id;   /* id -> entry (borrowed) */
    GHashTable *domains; /* PCI address -> domain, NULL when unknown */
    char *domains_error; /* why unknown, or NULL (no PCI VF: not asked) */
    GPtrArray *warnings; /* owned strings */
} PoolView;

static void pool_view_clear(PoolView *view)
{
    g_clear_pointer(&view->entries, g_ptr_array_unref);
    g_clear_pointer(&view->by_id, g_hash_table_unref);
    g_clear_pointer(&view->domains, g_hash_table_unref);
    g_clear_pointer(&view->domains_error, g_free);
    g_clear_pointer(&view->warnings, g_ptr_array_unref);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(PoolView, pool_view_clear)

static void view_add(PoolView *view, HotmigdPoolEntry *entry)
{
    if (g_hash_table_contains(view->by_id, entry->id)) {
        hotmigd_pool_entry_free(entry); /* a VF listed alone and under its PF: once */
        return;
    }
    g_hash_table_insert(view->by_id, entry->id, entry);
    g_ptr_array_add(view->entries, entry);
}

static void view_warn(PoolView *view, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void view_warn(PoolView *view, const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_ptr_array_add(view->warnings, g_steal_pointer(&msg));
}

static gboolean pool_lists(GPtrArray *list, const char *id)
{
    return g_ptr_array_find_with_equal_func(list, id, g_str_equal, NULL);
}

/* The VFs of the configured PFs, as the host lists them. */
static void view_read_pfs(HotmigdPool *pool, PoolView *view)
{
    for (guint i = 0; i < pool->pfs->len; i++) {
        const char *pf = g_ptr_array_index(pool->pfs, i);
        g_autoptr(GError) local = NULL;
        g_autoptr(GPtrArray) vfs = pool->ops->pf_vfs(pool->host, pf, &local);

        if (!vfs) {
            view_warn(view, "PF '%s': %s", pf, local->message);
            continue;
        }
        for (guint v = 0; v < vfs->len; v++) {
            HotmigdPoolPciVf *vf = g_ptr_array_index(vfs, v);
            HotmigdPoolEntry *entry = entry_new(vf->address, ORCH_VF_KIND_PCI);

            entry->pci = g_ptr_array_steal_index(vfs, v--);
            view_add(view, entry);
        }
    }
}

/* The VFs configured one by one (@only: that one alone). */
static void view_read_vfs(HotmigdPool *pool, PoolView *view, const char *only)
{
    for (guint i = 0; i < pool->vfs->len; i++) {
        const char *id = g_ptr_array_index(pool->vfs, i);
        g_autoptr(GError) local = NULL;
        HotmigdPoolEntry *entry;

        if (only && !g_str_equal(only, id))
            continue;
        entry = entry_new(id, ORCH_VF_KIND_PCI);

        entry->pci = pool->ops->vf_read(pool->host, id, &local);
        if (!entry->pci) {
            entry->state = ORCH_VF_STATE_MISSING;
            entry->note = g_strdup(local->message);
        }
        view_add(view, entry);
    }
}

/* The stand-ins (@only: that one alone). */
static void view_read_standins(HotmigdPool *pool, PoolView *view, const char *only)
{
    for (guint i = 0; i < pool->standins->len; i++) {
        const char *id = g_ptr_array_index(pool->standins, i);
        HotmigdPoolEntry *entry;

        if (only && !g_str_equal(only, id))
            continue;
        entry = entry_new(id, ORCH_VF_KIND_STANDIN);

        if (!pool->ops->netdev_exists(pool->host, id)) {
            entry->state = ORCH_VF_STATE_MISSING;
            entry->note = g_strdup_printf("no network device '%s'", id);
        }
        view_add(view, entry);
    }
}

/* The states: which domain holds which VF (for PCI VFs in use without a lease, and for every
 * assigned lease: is its domain still here?), and each VF's lease. */
static void view_read_states(HotmigdPool *pool, PoolView *view)
{
    if (view->entries->len > 0) {
        g_autoptr(GError) local = NULL;

        view->domains = pool->ops->domains_using(pool->host, &local);
        if (!view->domains) {
            view->domains_error = g_strdup(local->message);
            view_warn(view, "which domains use which VF is unknown: %s", local->message);
        }
    }
    for (guint i = 0; i < view->entries->len; i++) {
        HotmigdPoolEntry *entry = g_ptr_array_index(view->entries, i);
        g_autoptr(GError) local = NULL;
        g_autoptr(HotplugLease) lease = hotplug_lease_get(pool->store, entry->id, &local);
        const char *domain = view->domains ? g_hash_table_lookup(view->domains, entry->id) : NULL;

        if (!lease) {
            view_warn(view, "VF '%s': cannot read its lease: %s", entry->id, local->message);
        } else if (lease->state != HOTPLUG_LEASE_FREE) {
            entry->lease = g_steal_pointer(&lease);
        }
        if (domain)
            entry->assigned_to = g_strdup(domain);
        else if (entry->lease && entry->lease->state == HOTPLUG_LEASE_ASSIGNED)
            entry->assigned_to = g_strdup(entry->lease->domain);
        if (entry->state == ORCH_VF_STATE_MISSING)
            continue;
        if (entry->lease)
            entry->state = entry->lease->state == HOTPLUG_LEASE_ASSIGNED ? ORCH_VF_STATE_ASSIGNED
                                                                         : ORCH_VF_STATE_LEASED;
        else if (domain)
            entry->state = ORCH_VF_STATE_IN_USE;
        /* what entry_reclaim() would make of it: free */
        entry->reclaimable = entry->state == ORCH_VF_STATE_ASSIGNED && view->domains && !domain;
    }
}

/* Reads the configured VFs; @with_states: also the leases and the domains using them. @only
 * (a canonical id, or NULL for all): the caller needs that VF only, so a stand-in or a single
 * VF is read alone and the PFs (which may hold it) without the other kinds. */
static void pool_view_read(HotmigdPool *pool, PoolView *view, gboolean with_states,
                           const char *only)
{
    gboolean only_standin = only && pool_lists(pool->standins, only);
    gboolean only_vf = only && pool_lists(pool->vfs, only);

    view->entries = g_ptr_array_new_with_free_func((GDestroyNotify)hotmigd_pool_entry_free);
    view->by_id = g_hash_table_new(g_str_hash, g_str_equal);
    view->warnings = g_ptr_array_new_with_free_func(g_free);
    if (!only_standin && !only_vf)
        view_read_pfs(pool, view);
    view_read_vfs(pool, view, only);
    view_read_standins(pool, view, only);
    if (with_states)
        view_read_states(pool, view);
}

GPtrArray *hotmigd_pool_list(HotmigdPool *pool, char ***ret_warnings, GError **error)
{
    g_auto(PoolView) view = {0};

    g_return_val_if_fail(pool != NULL, NULL);

    pool_view_read(pool, &view, TRUE, NULL);
    if (ret_warnings) {
        g_ptr_array_add(view.warnings, NULL);
        *ret_warnings = (char **)g_ptr_array_steal(view.warnings, NULL);
    }
    return g_steal_pointer(&view.entries);
}

guint hotmigd_pool_lease_ttl_max(const HotmigdPool *pool)
{
    g_return_val_if_fail(pool != NULL, 0);
    return pool->lease_ttl_max_s;
}

gboolean hotmigd_pool_check_owner(HotmigdPool *pool, const char *vf, const char *id,
                                  const char *owner, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(HotplugLease) lease = NULL;
    g_autofree char *canon = hotplug_lease_vf_canonical(vf, &local);

    g_return_val_if_fail(pool && vf && owner, FALSE);

    if (!canon)
        return TRUE; /* the call itself refuses the id */
    lease = hotplug_lease_get(pool->store, canon, NULL);
    if (!lease || lease->state == HOTPLUG_LEASE_FREE || !lease->owner ||
        (id && g_strcmp0(lease->id, id) != 0) || g_str_equal(lease->owner, owner))
        return TRUE;
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_FORBIDDEN,
                "VF '%s' is held by '%s' (lease taken by another client): '%s' may not act on it",
                canon, lease->owner, owner);
    return FALSE;
}

/* ---- operations ---------------------------------------------------------------------------- */

/* The canonical spelling of a VF id from a request, or NULL with ORCH_ERROR_INVALID. */
static char *pool_canonical(const char *vf, GError **error)
{
    g_autoptr(GError) local = NULL;
    char *id = hotplug_lease_vf_canonical(vf, &local);

    if (!id)
        g_set_error_literal(error, ORCH_ERROR, ORCH_ERROR_INVALID, local->message);
    return id;
}

/* Reads the pool and finds @vf in it (borrowed from @view), or NULL with ORCH_ERROR_NOT_FOUND. */
static HotmigdPoolEntry *pool_find(HotmigdPool *pool, PoolView *view, const char *vf,
                                   GError **error)
{
    g_autofree char *id = pool_canonical(vf, error);
    HotmigdPoolEntry *entry;

    if (!id)
        return NULL;
    pool_view_read(pool, view, TRUE, id);
    entry = g_hash_table_lookup(view->by_id, id);
    if (!entry) {
        /* A VF of a PF that cannot be read now is not known either: say so. */
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND, "VF '%s' is not in the pool of %s%s%s",
                    id, pool->host_name, view->warnings->len ? "; " : "",
                    view->warnings->len ? (const char *)g_ptr_array_index(view->warnings, 0) : "");
        return NULL;
    }
    return entry;
}

/* "leased by 'HOLDER' (REASON) for domain 'D' until TIME" or "assigned to domain 'D' (holder
 * 'H', reason 'R')" (owned). */
static char *lease_describe(const HotplugLease *lease)
{
    g_autoptr(GDateTime) t = lease->expires ? g_date_time_new_from_unix_utc(lease->expires) : NULL;
    g_autofree char *until = t ? g_date_time_format_iso8601(t) : NULL;
    const char *holder = lease->holder ? lease->holder : "?";
    const char *reason = lease->reason ? lease->reason : "?";
    const char *domain = lease->domain ? lease->domain : "?";

    if (lease->state == HOTPLUG_LEASE_ASSIGNED)
        return g_strdup_printf("assigned to domain '%s' (holder '%s', reason '%s')", domain, holder,
                               reason);
    return g_strdup_printf("leased by '%s' (%s) for domain '%s' until %s", holder, reason, domain,
                           until ? until : "?");
}

/* ---- the identity a VF carries (issue 15, item 5) ------------------------------------------ */

/* The GUIDs a VF gets back when the domain whose identity it carried left it: this host's own,
 * not any domain's. A hash of the host's name and the VF, as an EUI-64 with the locally
 * administered bit set and the multicast bit clear, so it is no vendor's GUID; node and port
 * differ in the last bit. */
static void pool_home_guids(const HotmigdPool *pool, const char *vf, guint64 *ret_node,
                            guint64 *ret_port)
{
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    g_autofree char *seed = g_strdup_printf("hotmig home identity\n%s\n%s", pool->host_name, vf);
    guint8 digest[32];
    gsize len = sizeof digest;
    guint64 guid = 0;

    g_checksum_update(sum, (const guchar *)seed, -1);
    g_checksum_get_digest(sum, digest, &len);
    for (guint i = 0; i < 8; i++)
        guid = guid << 8 | digest[i];
    guid = (guid & ~(G_GUINT64_CONSTANT(0xff) << 56)) | (G_GUINT64_CONSTANT(0x02) << 56);
    *ret_node = guid & ~G_GUINT64_CONSTANT(1);
    *ret_port = guid | 1;
}

/* Does @entry have an IB identity hotmigd keeps: a PCI VF, or a stand-in whose host has a
 * stand-in PF driver (HotmigdHostOps standin_ib_identity)? */
static gboolean entry_has_identity(const HotmigdPool *pool, const HotmigdPoolEntry *entry)
{
    if (entry->pci)
        return TRUE;
    return entry->kind == ORCH_VF_KIND_STANDIN && pool->ops->standin_ib_identity &&
           pool->ops->standin_ib_identity_read;
}

/* Gives @entry (entry_has_identity()) GUIDs @node and @port through the host: the PCI VF's PF,
 * or the stand-in's driver. *ret_note as HotmigdHostOps ib_identity. */
static gboolean entry_identity_set(HotmigdPool *pool, const HotmigdPoolEntry *entry, guint64 node,
                                   guint64 port, char **ret_note, GError **error)
{
    if (entry->pci)
        return pool->ops->ib_identity(pool->host, entry->pci, node, port, ret_note, error);
    return pool->ops->standin_ib_identity(pool->host, entry->id, node, port, ret_note, error);
}

/* May the IB identity of @entry change: does the hypervisor say no domain uses it?
 * ORCH_ERROR_UNAVAILABLE (it cannot say) or _CONFLICT (one does) otherwise. */
static gboolean entry_identity_changeable(const PoolView *view, const HotmigdPoolEntry *entry,
                                          GError **error)
{
    const char *user;

    if (!view->domains) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE,
                    "Cannot tell whether a domain uses VF '%s': %s", entry->id,
                    view->domains_error ? view->domains_error : "not asked");
        return FALSE;
    }
    user = g_hash_table_lookup(view->domains, entry->id);
    if (user) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_CONFLICT,
                    "VF '%s' is in use by domain '%s': its IB identity cannot change under it",
                    entry->id, user);
        return FALSE;
    }
    return TRUE;
}

/* Gives PCI VF @entry its home GUIDs (pool_home_guids()) and forgets the identity recorded for
 * it: the domain whose GUIDs it carried has left, and no other domain may come up under them.
 * Only when the hypervisor says no domain uses the VF (ORCH_ERROR_UNAVAILABLE / _CONFLICT
 * otherwise). A stand-in without a stand-in PF driver has no identity: nothing to do. */
static gboolean entry_identity_reset(HotmigdPool *pool, const PoolView *view,
                                     const HotmigdPoolEntry *entry, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autofree char *note = NULL;
    guint64 node = 0;
    guint64 port = 0;

    if (!entry_has_identity(pool, entry))
        return TRUE;
    if (!entry_identity_changeable(view, entry, error))
        return FALSE;
    pool_home_guids(pool, entry->id, &node, &port);
    if (!entry_identity_set(pool, entry, node, port, &note, &local)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "Resetting the IB identity of VF '%s': %s", entry->id, local->message);
        return FALSE;
    }
    if (!hotplug_lease_clear_identity(pool->store, entry->id, &local)) {
        g_set_error_literal(error, ORCH_ERROR, ORCH_ERROR_FAILED, local->message);
        return FALSE;
    }
    g_debug("VF '%s': IB identity reset (%s)", entry->id, note ? note : "home GUIDs set");
    return TRUE;
}

/* Domain @domain no longer holds @entry, which may still carry its GUIDs: recorded as such
 * first (so that a reset that fails now is done, or the VF refused, before its next lease),
 * then reset. Best effort: what fails is logged, the record stays. */
static void entry_identity_left(HotmigdPool *pool, const PoolView *view,
                                const HotmigdPoolEntry *entry, const char *domain)
{
    g_autoptr(GError) local = NULL;

    if (!entry_has_identity(pool, entry))
        return;
    if (domain && !hotplug_lease_mark_identity(pool->store, entry->id, domain, &local)) {
        g_warning("VF '%s' may carry the IB identity of domain '%s' and that was not recorded: %s",
                  entry->id, domain, local->message);
        g_clear_error(&local);
    }
    if (!entry_identity_reset(pool, view, entry, &local))
        g_message("VF '%s' keeps the IB identity of domain '%s' for now (reset before its next "
                  "lease): %s",
                  entry->id, domain ? domain : "?", local->message);
}

/* Before @entry is leased for @domain: a VF that still carries another domain's identity is
 * reset, or refused (ORCH_ERROR_CONFLICT naming that domain) when that fails. */
static gboolean entry_identity_settle(HotmigdPool *pool, const PoolView *view,
                                      const HotmigdPoolEntry *entry, const char *domain,
                                      GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(HotplugLease) record = NULL;

    if (!entry_has_identity(pool, entry))
        return TRUE;
    record = hotplug_lease_get(pool->store, entry->id, &local);
    if (!record) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "VF '%s': cannot read its lease: %s",
                    entry->id, local->message);
        return FALSE;
    }
    if (!record->identity_of || g_strcmp0(record->identity_of, domain) == 0)
        return TRUE;
    if (!entry_identity_reset(pool, view, entry, &local)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_CONFLICT,
                    "VF '%s' still carries the IB identity of domain '%s' and it could not be "
                    "reset: %s",
                    entry->id, record->identity_of, local->message);
        return FALSE;
    }
    g_message("VF '%s': the IB identity of domain '%s' it still carried was reset", entry->id,
              record->identity_of);
    return TRUE;
}

/* An ASSIGNED lease whose domain does not hold the VF on this host (it was destroyed, or it
 * migrated away and the source was not told) ends when someone asks for the VF: the lease was
 * confirmed because the domain held the VF here, and it no longer does. Only when libvirt
 * answered; a lease not yet confirmed (a migration in flight) is never touched. */
static void entry_reclaim(HotmigdPool *pool, const PoolView *view, HotmigdPoolEntry *entry)
{
    g_autoptr(GError) local = NULL;
    const char *holder;

    if (entry->state != ORCH_VF_STATE_ASSIGNED || !entry->lease || !view->domains)
        return;
    holder = g_hash_table_lookup(view->domains, entry->id);
    if (holder && g_strcmp0(holder, entry->lease->domain) == 0)
        return;
    if (!hotplug_lease_forget(pool->store, entry->id, &local)) {
        g_debug("VF '%s': cannot end the stale lease of '%s': %s", entry->id,
                entry->lease->domain, local->message);
        return;
    }
    g_message("VF '%s': lease of domain '%s' ended: the domain does not hold it on %s any more",
              entry->id, entry->lease->domain ? entry->lease->domain : "?", pool->host_name);
    if (!holder)
        entry_identity_left(pool, view, entry, entry->lease->domain);
    g_clear_pointer(&entry->lease, hotplug_lease_free);
    g_clear_pointer(&entry->assigned_to, g_free);
    entry->state = holder ? ORCH_VF_STATE_IN_USE : ORCH_VF_STATE_FREE;
    if (holder)
        entry->assigned_to = g_strdup(holder);
}

/* Can @entry be leased? FALSE with ORCH_ERROR_CONFLICT / _UNAVAILABLE saying why not. */
static gboolean entry_leasable(const PoolView *view, const HotmigdPoolEntry *entry, GError **error)
{
    switch (entry->state) {
    case ORCH_VF_STATE_FREE:
        if (entry->pci && view->domains_error) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE,
                        "Cannot tell whether a domain uses VF '%s': %s", entry->id,
                        view->domains_error);
            return FALSE;
        }
        return TRUE;
    case ORCH_VF_STATE_LEASED:
    case ORCH_VF_STATE_ASSIGNED: {
        g_autofree char *what = lease_describe(entry->lease);

        g_set_error(error, ORCH_ERROR, ORCH_ERROR_CONFLICT, "VF '%s' is %s", entry->id, what);
        return FALSE;
    }
    case ORCH_VF_STATE_IN_USE:
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_CONFLICT,
                    "VF '%s' is used by domain '%s' (plugged without a lease)", entry->id,
                    entry->assigned_to);
        return FALSE;
    case ORCH_VF_STATE_MISSING:
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_CONFLICT, "VF '%s' is missing: %s", entry->id,
                    entry->note);
        return FALSE;
    default:
        g_assert_not_reached();
    }
}

/* hotplug_lease_acquire() with the error in ORCH_ERROR (BUSY: CONFLICT, INVALID stays). */
static HotplugLease *pool_acquire(HotmigdPool *pool, const char *id,
                                  const HotmigdPoolLeaseSpec *spec, GError **error)
{
    g_autoptr(GError) local = NULL;
    HotplugLease *lease =
        hotplug_lease_acquire_owned(pool->store, id, spec->owner, spec->holder, spec->reason,
                                    spec->domain, spec->ttl_s ? spec->ttl_s : pool->lease_ttl_s,
                                    &local);

    if (lease) {
        g_debug("VF '%s' leased to '%s' for domain '%s' (%s), lease %s", id, spec->holder,
                spec->domain, spec->reason, lease->id);
        return lease;
    }
    g_set_error_literal(
        error, ORCH_ERROR,
        g_error_matches(local, HOTPLUG_ERROR, HOTPLUG_ERROR_BUSY)      ? ORCH_ERROR_CONFLICT
        : g_error_matches(local, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID) ? ORCH_ERROR_INVALID
                                                                       : ORCH_ERROR_FAILED,
        local->message);
    return NULL;
}

/* Per state, how many VFs of the pool are of model @vendor:@device. */
static char *pool_model_summary(const PoolView *view, guint vendor, guint device, guint *ret_n)
{
    guint counts[ORCH_VF_STATE_LAST] = {0};
    guint n = 0;
    g_autoptr(GString) s = g_string_new(NULL);

    for (guint i = 0; i < view->entries->len; i++) {
        const HotmigdPoolEntry *entry = g_ptr_array_index(view->entries, i);

        if (!entry->pci || entry->pci->vendor_id != vendor || entry->pci->device_id != device)
            continue;
        counts[entry->state]++;
        n++;
    }
    for (int st = 0; st < ORCH_VF_STATE_LAST; st++) {
        if (counts[st])
            g_string_append_printf(s, "%s%u %s", s->len ? ", " : "", counts[st],
                                   orch_vf_state_to_string(st));
    }
    *ret_n = n;
    return g_string_free(g_steal_pointer(&s), FALSE);
}

HotplugLease *hotmigd_pool_lease(HotmigdPool *pool, const HotmigdPoolLeaseSpec *spec,
                                 GError **error)
{
    g_auto(PoolView) view = {0};
    g_autofree char *summary = NULL;
    guint n_model = 0;

    g_return_val_if_fail(pool && spec, NULL);

    if (spec->vf) {
        HotmigdPoolEntry *entry = pool_find(pool, &view, spec->vf, error);

        if (entry)
            entry_reclaim(pool, &view, entry);
        if (!entry || !entry_leasable(&view, entry, error) ||
            !entry_identity_settle(pool, &view, entry, spec->domain, error))
            return NULL;
        return pool_acquire(pool, entry->id, spec, error);
    }

    pool_view_read(pool, &view, TRUE, NULL);
    for (guint i = 0; i < view.entries->len; i++) {
        HotmigdPoolEntry *entry = g_ptr_array_index(view.entries, i);
        g_autoptr(GError) local = NULL;
        HotplugLease *lease;

        if (!entry->pci || entry->pci->vendor_id != spec->vendor_id ||
            entry->pci->device_id != spec->device_id)
            continue;
        entry_reclaim(pool, &view, entry);
        if (!entry_leasable(&view, entry, &local)) {
            if (g_error_matches(local, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE)) {
                g_propagate_error(error, g_steal_pointer(&local));
                return NULL;
            }
            continue;
        }
        if (!entry_identity_settle(pool, &view, entry, spec->domain, &local)) {
            g_debug("%s", local->message);
            continue;
        }
        lease = pool_acquire(pool, entry->id, spec, &local);
        if (lease)
            return lease;
        if (!g_error_matches(local, ORCH_ERROR, ORCH_ERROR_CONFLICT)) {
            g_propagate_error(error, g_steal_pointer(&local));
            return NULL;
        }
        /* Taken by another process between the look and the lease: the next one. */
    }
    summary = pool_model_summary(&view, spec->vendor_id, spec->device_id, &n_model);
    if (n_model)
        g_set_error(
            error, ORCH_ERROR, ORCH_ERROR_CONFLICT,
            "no free VF %04x:%04x on %s: the pool has %u of that model (%s) and %u VFs in all",
            spec->vendor_id, spec->device_id, pool->host_name, n_model, summary, view.entries->len);
    else
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_CONFLICT,
                    "no free VF %04x:%04x on %s: the pool has none of that model (%u VFs in all)",
                    spec->vendor_id, spec->device_id, pool->host_name, view.entries->len);
    return NULL;
}

/* The lease of @id now (owned), errors in ORCH_ERROR. */
static HotplugLease *pool_lease_get(HotmigdPool *pool, const char *id, GError **error)
{
    g_autoptr(GError) local = NULL;
    HotplugLease *lease = hotplug_lease_get(pool->store, id, &local);

    if (!lease)
        g_set_error_literal(error, ORCH_ERROR, ORCH_ERROR_FAILED, local->message);
    return lease;
}

/* The lease-changing calls: @vf must be a configured VF (present or not). */
static char *pool_configured(HotmigdPool *pool, const char *vf, GError **error)
{
    g_autofree char *id = pool_canonical(vf, error);

    if (!id)
        return NULL;
    if (!pool_lists(pool->vfs, id) && !pool_lists(pool->standins, id)) {
        g_auto(PoolView) view = {0};

        pool_view_read(pool, &view, FALSE, id);
        if (!g_hash_table_contains(view.by_id, id)) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND, "VF '%s' is not in the pool of %s",
                        id, pool->host_name);
            return NULL;
        }
    }
    return g_steal_pointer(&id);
}

/* A lease store's error in ORCH_ERROR: STALE is CONFLICT, INVALID stays, the rest FAILED. */
static void pool_set_lease_error(GError **error, const GError *local)
{
    g_set_error_literal(
        error, ORCH_ERROR,
        g_error_matches(local, HOTPLUG_ERROR, HOTPLUG_ERROR_STALE)     ? ORCH_ERROR_CONFLICT
        : g_error_matches(local, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID) ? ORCH_ERROR_INVALID
                                                                       : ORCH_ERROR_FAILED,
        local->message);
}

HotplugLease *hotmigd_pool_confirm(HotmigdPool *pool, const char *vf, const char *id,
                                   GError **error)
{
    g_autofree char *canonical = NULL;
    g_autoptr(GError) local = NULL;

    g_return_val_if_fail(pool && vf && id, NULL);

    canonical = pool_configured(pool, vf, error);
    if (!canonical)
        return NULL;
    if (!hotplug_lease_confirm(pool->store, canonical, id, &local)) {
        pool_set_lease_error(error, local);
        return NULL;
    }
    g_debug("VF '%s': lease %s confirmed", canonical, id);
    return pool_lease_get(pool, canonical, error);
}

gboolean hotmigd_pool_renew(HotmigdPool *pool, const char *vf, const char *id, guint ttl_s,
                            GError **error)
{
    g_autofree char *canonical = NULL;
    g_autoptr(GError) local = NULL;

    g_return_val_if_fail(pool && vf && id, FALSE);

    canonical = pool_configured(pool, vf, error);
    if (!canonical)
        return FALSE;
    if (ttl_s > pool->lease_ttl_max_s) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "the time to live %u s is more than [hotmigd] lease-ttl-max (%u s)", ttl_s,
                    pool->lease_ttl_max_s);
        return FALSE;
    }
    if (!hotplug_lease_renew(pool->store, canonical, id, ttl_s ? ttl_s : pool->lease_ttl_s,
                             &local)) {
        pool_set_lease_error(error, local);
        return FALSE;
    }
    return TRUE;
}

/* After a lease of @id ended: a VF that carries the identity recorded for it has it reset
 * (best effort, entry_identity_left()). */
static void pool_identity_after_release(HotmigdPool *pool, const char *id)
{
    g_autoptr(HotplugLease) record = hotplug_lease_get(pool->store, id, NULL);
    g_auto(PoolView) view = {0};
    HotmigdPoolEntry *entry;

    if (!record || !record->identity_of)
        return;
    pool_view_read(pool, &view, TRUE, id);
    entry = g_hash_table_lookup(view.by_id, id);
    if (entry)
        entry_identity_left(pool, &view, entry, record->identity_of);
}

gboolean hotmigd_pool_release(HotmigdPool *pool, const char *vf, const char *id, GError **error)
{
    g_autofree char *canonical = NULL;
    g_autoptr(GError) local = NULL;

    g_return_val_if_fail(pool && vf && id, FALSE);

    canonical = pool_configured(pool, vf, error);
    if (!canonical)
        return FALSE;
    if (!hotplug_lease_release(pool->store, canonical, id, &local)) {
        pool_set_lease_error(error, local);
        return FALSE;
    }
    g_debug("VF '%s': lease %s released", canonical, id);
    pool_identity_after_release(pool, canonical);
    return TRUE;
}

gboolean hotmigd_pool_left(HotmigdPool *pool, const char *vf, const char *domain, GError **error)
{
    g_autofree char *canonical = NULL;
    g_autoptr(GError) local = NULL;
    g_autoptr(HotplugLease) lease = NULL;
    g_auto(PoolView) view = {0};
    HotmigdPoolEntry *entry;

    g_return_val_if_fail(pool && vf && domain, FALSE);

    canonical = pool_configured(pool, vf, error);
    if (!canonical)
        return FALSE;
    lease = hotplug_lease_get(pool->store, canonical, &local);
    if (!lease) {
        g_set_error_literal(error, ORCH_ERROR, ORCH_ERROR_FAILED, local->message);
        return FALSE;
    }
    if (lease->state != HOTPLUG_LEASE_FREE &&
        (lease->state != HOTPLUG_LEASE_ASSIGNED || g_strcmp0(lease->domain, domain) != 0)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_CONFLICT,
                    "VF '%s' is %s for domain '%s', not assigned to '%s': left alone", canonical,
                    hotplug_lease_state_to_string(lease->state),
                    lease->domain ? lease->domain : "?", domain);
        return FALSE;
    }
    if (lease->state != HOTPLUG_LEASE_FREE) {
        if (!hotplug_lease_forget(pool->store, canonical, &local)) {
            g_set_error_literal(error, ORCH_ERROR, ORCH_ERROR_FAILED, local->message);
            return FALSE;
        }
        g_debug("VF '%s': domain '%s' left, its lease ended", canonical, domain);
    }
    /* The VF carried the domain's GUIDs (given by hotmigd or its own): reset, unless a domain
     * of this host uses it. */
    pool_view_read(pool, &view, TRUE, canonical);
    entry = g_hash_table_lookup(view.by_id, canonical);
    if (entry && !(view.domains && g_hash_table_contains(view.domains, canonical)))
        entry_identity_left(pool, &view, entry, domain);
    return TRUE;
}

/* @vf must be leased (LEASED or ASSIGNED) for the calls that change the device. */
static HotmigdPoolEntry *pool_find_held(HotmigdPool *pool, PoolView *view, const char *vf,
                                        const char *what, GError **error)
{
    HotmigdPoolEntry *entry = pool_find(pool, view, vf, error);

    if (!entry)
        return NULL;
    if (!entry->lease) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_CONFLICT,
                    "VF '%s' is %s, not leased: lease it (POST /v1/leases) before %s", entry->id,
                    orch_vf_state_to_string(entry->state), what);
        return NULL;
    }
    if (entry->state == ORCH_VF_STATE_MISSING) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_CONFLICT, "VF '%s' is missing: %s", entry->id,
                    entry->note);
        return NULL;
    }
    return entry;
}

gboolean hotmigd_pool_ib_identity(HotmigdPool *pool, const char *vf, guint64 node_guid,
                                  guint64 port_guid, gboolean *ret_applied, char **ret_note,
                                  GError **error)
{
    g_auto(PoolView) view = {0};
    g_autoptr(GError) local = NULL;
    g_autofree char *note = NULL;
    g_autofree char *node = hotplug_guid_format(node_guid);
    g_autofree char *port = hotplug_guid_format(port_guid);
    HotmigdPoolEntry *entry;

    g_return_val_if_fail(pool && vf, FALSE);

    entry = pool_find_held(pool, &view, vf, "setting its IB identity", error);
    if (!entry)
        return FALSE;
    if (!entry_has_identity(pool, entry)) {
        if (ret_applied)
            *ret_applied = FALSE;
        if (ret_note)
            *ret_note = g_strdup_printf(
                "'%s' is a stand-in network device: it has no IB identity, nothing set", entry->id);
        return TRUE;
    }
    if (!entry_identity_changeable(&view, entry, error))
        return FALSE;
    if (!entry_identity_set(pool, entry, node_guid, port_guid, &note, &local)) {
        g_set_error(error, ORCH_ERROR,
                    g_error_matches(local, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID)
                        ? ORCH_ERROR_INVALID
                        : ORCH_ERROR_FAILED,
                    "Setting node GUID %s, port GUID %s on VF '%s': %s", node, port, entry->id,
                    local->message);
        return FALSE;
    }
    /* A stand-in's note says so: a skipped RoCE stand-in reads "PF 'hmlab0vf3' is not ...". */
    if (note && !entry->pci && !strstr(note, "stand-in")) {
        char *standin_note = g_strdup_printf("stand-in '%s': %s", entry->id, note);

        g_free(note);
        note = standin_note;
    }
    /* What the VF carries now, and for whom: the source of a later migration asks for it. */
    if (!note && !hotplug_lease_set_identity(pool->store, entry->id, entry->lease->id, node_guid,
                                             port_guid, &local))
        g_warning("VF '%s' has node GUID %s, port GUID %s but they were not recorded: %s",
                  entry->id, node, port, local->message);
    g_debug("VF '%s': node GUID %s, port GUID %s %s", entry->id, node, port, note ? note : "set");
    if (ret_applied)
        *ret_applied = note == NULL;
    if (ret_note)
        *ret_note = note ? g_steal_pointer(&note)
                         : g_strdup_printf("node GUID %s, port GUID %s set", node, port);
    return TRUE;
}

gboolean hotmigd_pool_identity(HotmigdPool *pool, const char *vf, const char *domain,
                               guint64 *ret_node_guid, guint64 *ret_port_guid, char **ret_source,
                               GError **error)
{
    g_auto(PoolView) view = {0};
    g_autoptr(GError) local = NULL;
    g_autoptr(HotplugLease) record = NULL;
    HotmigdPoolEntry *entry;
    guint64 node = 0;
    guint64 port = 0;

    g_return_val_if_fail(pool && vf && domain && ret_node_guid && ret_port_guid, FALSE);

    entry = pool_find(pool, &view, vf, error);
    if (!entry)
        return FALSE;
    record = hotplug_lease_get(pool->store, entry->id, NULL);
    if (record && record->identity_of && g_str_equal(record->identity_of, domain) &&
        record->node_guid && record->port_guid) {
        *ret_node_guid = record->node_guid;
        *ret_port_guid = record->port_guid;
        if (ret_source)
            *ret_source = g_strdup("recorded by hotmigd when it gave the VF these GUIDs");
        return TRUE;
    }
    if (!entry_has_identity(pool, entry)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND,
                    "%s '%s' has no InfiniBand identity this host knows of for domain '%s'",
                    entry->kind == ORCH_VF_KIND_STANDIN ? "stand-in" : "VF", entry->id, domain);
        return FALSE;
    }
    if (!(entry->pci
              ? pool->ops->ib_identity_read(pool->host, entry->pci, &node, &port, &local)
              : pool->ops->standin_ib_identity_read(pool->host, entry->id, &node, &port, &local))) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND,
                    "The GUIDs of %s '%s' are unknown to this host: %s",
                    entry->pci ? "VF" : "stand-in", entry->id, local->message);
        return FALSE;
    }
    *ret_node_guid = node;
    *ret_port_guid = port;
    if (ret_source)
        *ret_source =
            g_strdup(entry->pci ? "reported by the host's kernel"
                                : "reported by the stand-in's PF driver ([pool] standin-guids)");
    return TRUE;
}

gboolean hotmigd_pool_vfio(HotmigdPool *pool, const char *vf, gboolean *ret_changed,
                           char **ret_driver, char **ret_note, GError **error)
{
    g_auto(PoolView) view = {0};
    g_autoptr(GError) local = NULL;
    g_autofree char *previous = NULL;
    gboolean changed = FALSE;
    HotmigdPoolEntry *entry;

    g_return_val_if_fail(pool && vf, FALSE);

    entry = pool_find_held(pool, &view, vf, "binding it to vfio-pci", error);
    if (!entry)
        return FALSE;
    if (entry->kind == ORCH_VF_KIND_STANDIN) {
        if (ret_changed)
            *ret_changed = FALSE;
        if (ret_driver)
            *ret_driver = NULL;
        if (ret_note)
            *ret_note = g_strdup_printf(
                "'%s' is a stand-in network device: no PCI driver to bind, nothing done",
                entry->id);
        return TRUE;
    }
    if (!pool->ops->vfio_bind(pool->host, entry->id, &changed, &previous, &local)) {
        g_set_error_literal(error, ORCH_ERROR,
                            g_error_matches(local, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND)
                                ? ORCH_ERROR_CONFLICT
                                : ORCH_ERROR_FAILED,
                            local->message);
        return FALSE;
    }
    if (changed)
        g_debug("VF '%s' bound to vfio-pci (was %s)", entry->id, previous ? previous : "unbound");
    if (ret_changed)
        *ret_changed = changed;
    if (ret_driver)
        *ret_driver = g_strdup("vfio-pci");
    if (ret_note)
        *ret_note = changed ? g_strdup_printf("bound to vfio-pci (was %s)",
                                              previous ? previous : "bound to no driver")
                            : g_strdup("bound to vfio-pci already");
    return TRUE;
}
