/* The migration state machine against a fake two-host world: the fake adapter keeps the
 * domain's devices and location, refuses to migrate a domain holding a PCI VF (as libvirt does)
 * and runs a fake guest agent on the channel. The fault walk fails each adapter call in turn
 * and checks that the domain always ends on exactly one host, with its VFs or with a report
 * that says which it lacks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <glib/gstdio.h>

#include "engine/agent-client.h"
#include "engine/engine.h"
#include "engine/hotmigd-client.h"
#include "engine/journal.h"
#include "engine/virt.h"
#include "fake-agent-channel.h"
#include "xml/xml.h"

#define DOMAIN "vm1"

typedef enum {
    AGENT_OK,
    AGENT_SILENT,
    AGENT_REFUSES_QUIESCE,
    AGENT_STOPS_IN_PREPARE, /* answers the handshake, takes the prepare, then goes silent */
    AGENT_RESUME_BUSY,      /* a resume is under way (asked by a killed migrate-vm): the next
                             * two resumes are refused as Busy, then it has ended */
    AGENT_DEEP_INVENTORY,   /* answers inventory with 60 000 nested brackets (issue 15) */
    AGENT_INFO_FAILS,       /* info answered with an error (the session stays at protocol 1,
                             * so the inventory is refused too) */
    AGENT_INFO_SILENT,      /* neither info nor inventory answered (the rest is) */
    AGENT_INFO_GARBLED,     /* info answered with a line that is not JSON */
    AGENT_STALE_SYNC,       /* the first handshake's reply comes after an earlier sync's */
    AGENT_RESUME_FAILS,     /* the first resume answers a process that failed; later ones
                             * find everything running and resume none */
} FakeAgentMode;

typedef struct {
    char *where;          /* label of the host running the domain */
    GPtrArray *devices;   /* device XML strings attached now */
    gboolean agent_prepared;
    FakeAgentMode agent_mode;
    guint agent_busy_left; /* AGENT_RESUME_BUSY: resumes still refused */
    guint resumes;         /* AGENT_RESUME_FAILS: resumes answered */
    /* Device removals libvirt has queued by alias (a killed migrate-vm's detach outlived
     * libvirt's wait; the guest's DEVICE_DELETED is handled later, issue 19): each removes the
     * device that has that alias when it is handled, here right after the next attach. */
    GPtrArray *queued_removals;
    guint migrations;
    char *last_plugged;   /* the last device XML attached on the destination */
    GHashTable *leases;   /* the destination hotmigd's pool: VF id -> lease id (leased) */
    GHashTable *assigned; /* VF id -> lease id (confirmed) */
    GString *vfd_log;     /* "op vf;" for every hotmigd call */
    guint release_unreachable; /* so many releases fail before reaching hotmigd */
    GString *agent_writes; /* "host: command,command;" for every write to an agent channel */
    /* What the source's hotmigd knows its VF carries (GET /v1/vfs/VF/identity); 0: unknown. */
    guint64 src_node_guid, src_port_guid;
    /* Leases that expire (issue 15, item 4): lease_ttl_s > 0 makes the destination's leases
     * end that long after they were taken or renewed; migrate_sleep_ms makes the copy last,
     * and half-way through another client tries to lease the VF (mid_copy_taken says whether
     * it got it). The keeper renews from a thread of its own: lease_lock. */
    GMutex log_lock; /* vfd_log, agent_writes: the main thread, side work and the lease keeper
                      * write them */
    guint lease_ttl_s;
    GHashTable *lease_until; /* VF -> gint64 monotonic deadline */
    GMutex lease_lock;
    guint migrate_sleep_ms;
    gboolean mid_copy_tried, mid_copy_taken;
    guint renewals;
    const char *cpu_model; /* the domain's <cpu><model>, or NULL */
    gboolean nova;         /* the domain carries Nova's <metadata> */
    const char *kernel;    /* the domain's <os><kernel>, or NULL */
    guint vfd_lease_seq;
    /* The domain is defined (persistent) on the source, on the destination; as libvirt, a
     * plug or unplug that asks to change the definition fails where there is none. */
    gboolean defined_source, defined_destination;
    gboolean last_plug_config; /* the last attach on the destination changed the definition */
    const char *processes;     /* the inventory's "processes" (JSON text), NULL: [] */
    /* the prepare's "quiesced" and the resume's "resumed" (JSON text), NULL: mpi[7] alone */
    const char *quiesced, *resumed;
    /* The destination's switch-over watch (watch_migrated_in): the fake migration calls it
     * once the domain is on the destination, then takes confirm_ms more to return, as
     * libvirt's Confirm on the source. */
    OrchVirtMigratedInFunc in_fn;
    gpointer in_opaque;
    GDestroyNotify in_destroy;
    gboolean no_watch; /* the destination's adapter has no such watch */
    guint confirm_ms;
    gboolean confirm_fails; /* the call fails after the switch-over (the domain moved) */
    gint64 migrate_returned_us; /* monotonic: the fake migration returned */
    gint64 dest_attach_us;      /* the first attach on the destination */
} FakeWorld;

typedef struct {
    OrchVirt parent;
    FakeWorld *world;
} FakeVirt;

typedef struct {
    FakeAgentChannel base;
    GString *in; /* bytes the host sent, not yet processed */
} FakeChannel;

static const char *SRC_NODEDEVS[] = {
    "<device><name>pci_0000_3b_02_1</name><parent>pci_0000_3a_00_0</parent>"
    "<driver><name>vfio-pci</name></driver><capability type='pci'><class>0x020700</class>"
    "<domain>0</domain><bus>59</bus><slot>2</slot><function>1</function>"
    "<product id='0x101e'>ConnectX Family mlx5Gen Virtual Function</product>"
    "<vendor id='0x15b3'>Mellanox Technologies</vendor>"
    "<capability type='phys_function'><address domain='0x0000' bus='0x3b' slot='0x00' "
    "function='0x0'/></capability></capability></device>",
};

static const char *DST_NODEDEVS[] = {
    "<device><name>pci_0000_5e_02_1</name><parent>pci_0000_5d_00_0</parent>"
    "<driver><name>vfio-pci</name></driver><capability type='pci'><class>0x020700</class>"
    "<domain>0</domain><bus>94</bus><slot>2</slot><function>1</function>"
    "<product id='0x101e'>ConnectX Family mlx5Gen Virtual Function</product>"
    "<vendor id='0x15b3'>Mellanox Technologies</vendor>"
    "<capability type='phys_function'><address domain='0x0000' bus='0x5e' slot='0x00' "
    "function='0x0'/></capability></capability></device>",
    "<device><name>pci_0000_5e_02_2</name><parent>pci_0000_5d_00_0</parent>"
    "<driver><name>vfio-pci</name></driver><capability type='pci'><class>0x020700</class>"
    "<domain>0</domain><bus>94</bus><slot>2</slot><function>2</function>"
    "<product id='0x101e'>ConnectX Family mlx5Gen Virtual Function</product>"
    "<vendor id='0x15b3'>Mellanox Technologies</vendor>"
    "<capability type='phys_function'><address domain='0x0000' bus='0x5e' slot='0x00' "
    "function='0x0'/></capability></capability></device>",
    "<device><name>pci_0000_5e_02_3</name><parent>pci_0000_5d_00_0</parent>"
    "<driver><name>vfio-pci</name></driver><capability type='pci'><class>0x020700</class>"
    "<domain>0</domain><bus>94</bus><slot>2</slot><function>3</function>"
    "<product id='0x101e'>ConnectX Family mlx5Gen Virtual Function</product>"
    "<vendor id='0x15b3'>Mellanox Technologies</vendor>"
    "<capability type='phys_function'><address domain='0x0000' bus='0x5e' slot='0x00' "
    "function='0x0'/></capability></capability></device>",
};

/* Another domain on the destination already holds 0000:5e:02.1. */
static const char *DST_OTHER_DOMAIN =
    "<domain type='kvm'><name>other</name><devices>"
    "<hostdev mode='subsystem' type='pci' managed='yes'><source><address domain='0x0000' "
    "bus='0x5e' slot='0x02' function='0x1'/></source><alias name='hostdev0'/></hostdev>"
    "</devices></domain>";

static const char *HOSTDEV_XML =
    "<hostdev mode='subsystem' type='pci' managed='yes'><source><address domain='0x0000' "
    "bus='0x3b' slot='0x02' function='0x1'/></source><alias name='hostdev0'/>"
    "<address type='pci' domain='0x0000' bus='0x05' slot='0x00' function='0x0'/></hostdev>";

static const char *STANDIN_XML =
    "<interface type='ethernet'><mac address='52:54:00:48:01:01'/>"
    "<target dev='hmtap1' managed='no'/><model type='virtio'/>"
    "<alias name='ua-hmvf0'/></interface>";

static const char *NIC_XML =
    "<interface type='udp'><mac address='52:54:00:48:02:01'/><source address='127.0.0.1' "
    "port='42002'><local address='127.0.0.1' port='42001'/></source><model type='virtio'/>"
    "<alias name='ua-net0'/></interface>";

/* ---- the fake world ---------------------------------------------------------------------- */

static char *device_alias(const char *xml)
{
    const char *p = strstr(xml, "<alias name='");
    const char *end;

    if (!p)
        return NULL;
    p += strlen("<alias name='");
    end = strchr(p, '\'');
    return g_strndup(p, end - p);
}

static FakeWorld *world_new(gboolean hostdev, gboolean standin)
{
    FakeWorld *w = g_new0(FakeWorld, 1);

    w->where = g_strdup("source");
    w->devices = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(w->devices, g_strdup(NIC_XML));
    if (hostdev)
        g_ptr_array_add(w->devices, g_strdup(HOSTDEV_XML));
    if (standin)
        g_ptr_array_add(w->devices, g_strdup(STANDIN_XML));
    w->queued_removals = g_ptr_array_new_with_free_func(g_free);
    w->leases = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    w->lease_until = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_mutex_init(&w->lease_lock);
    g_mutex_init(&w->log_lock);
    w->assigned = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    w->vfd_log = g_string_new(NULL);
    w->agent_writes = g_string_new(NULL);
    return w;
}

static void world_free(FakeWorld *w)
{
    if (w->in_destroy)
        w->in_destroy(w->in_opaque);
    g_free(w->where);
    g_ptr_array_unref(w->devices);
    g_ptr_array_unref(w->queued_removals);
    g_free(w->last_plugged);
    g_hash_table_unref(w->leases);
    g_hash_table_unref(w->lease_until);
    g_mutex_clear(&w->lease_lock);
    g_mutex_clear(&w->log_lock);
    g_hash_table_unref(w->assigned);
    g_string_free(w->vfd_log, TRUE);
    g_string_free(w->agent_writes, TRUE);
    g_free(w);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FakeWorld, world_free)

static guint world_count_vfs(FakeWorld *w)
{
    guint n = 0;

    for (guint i = 0; i < w->devices->len; i++) {
        const char *xml = g_ptr_array_index(w->devices, i);
        n += g_str_has_prefix(xml, "<hostdev") || strstr(xml, "ua-hmvf") != NULL;
    }
    return n;
}

static gboolean here(OrchVirt *v)
{
    return g_str_equal(((FakeVirt *)v)->world->where, v->label);
}

static gboolean *defined_here(OrchVirt *v)
{
    FakeWorld *w = ((FakeVirt *)v)->world;

    return g_str_equal(v->label, "source") ? &w->defined_source : &w->defined_destination;
}

static gboolean fake_domain_state(OrchVirt *v, const char *d, OrchVirtDomainState *s, GError **e)
{
    if (!g_str_equal(d, DOMAIN)) {
        *s = ORCH_VIRT_DOMAIN_MISSING;
        return TRUE;
    }
    *s = here(v)            ? ORCH_VIRT_DOMAIN_RUNNING
         : *defined_here(v) ? ORCH_VIRT_DOMAIN_INACTIVE
                            : ORCH_VIRT_DOMAIN_MISSING;
    return TRUE;
}

static gboolean no_domain(OrchVirt *v, const char *d, GError **e)
{
    g_set_error(e, ORCH_ERROR, ORCH_ERROR_NO_DOMAIN, "Domain not found: '%s' on %s", d, v->label);
    return FALSE;
}

static gboolean fake_domain_is_persistent(OrchVirt *v, const char *d, gboolean *p, GError **e)
{
    if (!g_str_equal(d, DOMAIN) || (!here(v) && !*defined_here(v)))
        return no_domain(v, d, e);
    *p = *defined_here(v);
    return TRUE;
}

/* libvirt refuses VIR_DOMAIN_AFFECT_CONFIG for a transient domain. */
static gboolean check_config(OrchVirt *v, gboolean config, GError **e)
{
    if (config && !*defined_here(v)) {
        g_set_error(e, ORCH_ERROR, ORCH_ERROR_HYPERVISOR,
                    "Requested operation is not valid: transient domains do not have any "
                    "persistent config (on %s)",
                    v->label);
        return FALSE;
    }
    return TRUE;
}

static gboolean check_here(OrchVirt *v, const char *d, GError **e)
{
    return (g_str_equal(d, DOMAIN) && here(v)) || no_domain(v, d, e);
}

static char *fake_domain_get_xml(OrchVirt *v, const char *d, GError **e)
{
    FakeWorld *w = ((FakeVirt *)v)->world;
    g_autoptr(GString) xml = g_string_new("<domain type='kvm'><name>" DOMAIN "</name>");

    if (!check_here(v, d, e))
        return NULL;
    if (w->kernel)
        g_string_append_printf(xml, "<os><type>hvm</type><kernel>%s</kernel></os>", w->kernel);
    if (w->cpu_model)
        g_string_append_printf(xml, "<cpu mode='custom'><model>%s</model></cpu>", w->cpu_model);
    if (w->nova)
        g_string_append(xml, "<metadata><nova:instance "
                             "xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'>"
                             "<nova:name>vm7</nova:name></nova:instance></metadata>");
    g_string_append(xml, "<devices>");
    for (guint i = 0; i < w->devices->len; i++)
        g_string_append(xml, g_ptr_array_index(w->devices, i));
    g_string_append(xml, "<channel type='unix'><target type='virtio' name='org.hotmig.agent.0'/>"
                         "</channel></devices></domain>");
    return g_string_free(g_steal_pointer(&xml), FALSE);
}

static gboolean fake_device_detach(OrchVirt *v, const char *d, const char *alias,
                                   gboolean config, guint timeout_ms, GError **e)
{
    FakeWorld *w = ((FakeVirt *)v)->world;

    if (!check_here(v, d, e) || !check_config(v, config, e))
        return FALSE;
    for (guint i = 0; i < w->devices->len; i++) {
        g_autofree char *a = device_alias(g_ptr_array_index(w->devices, i));

        if (a && g_str_equal(a, alias)) {
            g_ptr_array_remove_index(w->devices, i);
            return TRUE;
        }
    }
    g_set_error(e, ORCH_ERROR, ORCH_ERROR_HYPERVISOR, "no device with alias '%s'", alias);
    return FALSE;
}

/* The index of the device with alias @alias among @w's devices, or -1. */
static gint device_index(FakeWorld *w, const char *alias)
{
    for (guint i = 0; i < w->devices->len; i++) {
        g_autofree char *a = device_alias(g_ptr_array_index(w->devices, i));

        if (a && g_str_equal(a, alias))
            return (gint)i;
    }
    return -1;
}

/* As libvirt names a hostdev plugged without an alias: "hostdevN", N one more than the highest
 * of the hostdevs it has now (so the name of one just removed comes back). */
static char *hostdev_name(FakeWorld *w)
{
    guint next = 0;

    for (guint i = 0; i < w->devices->len; i++) {
        g_autofree char *a = device_alias(g_ptr_array_index(w->devices, i));
        guint64 n;

        if (a && g_str_has_prefix(a, "hostdev") &&
            g_ascii_string_to_unsigned(a + 7, 10, 0, 1000, &n, NULL))
            next = MAX(next, (guint)n + 1);
    }
    return g_strdup_printf("hostdev%u", next);
}

/* libvirt handles the removals it queued: each takes the device with its alias, if any. */
static void handle_queued_removals(FakeWorld *w)
{
    for (guint i = 0; i < w->queued_removals->len; i++) {
        gint at = device_index(w, g_ptr_array_index(w->queued_removals, i));

        if (at >= 0)
            g_ptr_array_remove_index(w->devices, (guint)at);
    }
    g_ptr_array_set_size(w->queued_removals, 0);
}

static gboolean fake_device_attach(OrchVirt *v, const char *d, const char *xml, gboolean config,
                                   GError **e)
{
    FakeWorld *w = ((FakeVirt *)v)->world;
    g_autofree char *alias = NULL;
    char *dev;

    if (!check_here(v, d, e) || !check_config(v, config, e))
        return FALSE;
    assert_non_null(strstr(xml, "<"));
    /* libxml2 writes attributes in double quotes; the fake compares with single ones. */
    g_autofree char *norm = g_strdelimit(g_strdup(xml), "\"", '\'');
    xml = norm;
    alias = device_alias(xml);
    if (alias && device_index(w, alias) >= 0) {
        g_set_error(e, ORCH_ERROR, ORCH_ERROR_HYPERVISOR, "non unique alias detected: %s",
                    alias);
        return FALSE;
    }
    if (alias) {
        dev = g_strdup(xml);
    } else {
        /* libvirt names a hot-plugged hostdev itself. */
        g_autofree char *name = hostdev_name(w);
        g_autofree char *named = g_strdup_printf("<alias name='%s'/></hostdev>", name);
        g_auto(GStrv) parts = g_strsplit(xml, "</hostdev>", 2);
        assert_non_null(parts[1]);
        dev = g_strconcat(parts[0], named, parts[1], NULL);
    }
    g_ptr_array_add(w->devices, dev);
    handle_queued_removals(w);
    if (g_str_equal(v->label, "destination")) {
        if (!w->dest_attach_us)
            w->dest_attach_us = g_get_monotonic_time();
        g_free(w->last_plugged);
        w->last_plugged = g_strdup(xml);
        w->last_plug_config = config;
    }
    return TRUE;
}

static OrchVfState pool_state(FakeWorld *w, const char *vf);

static gboolean fake_migrate(OrchVirt *v, const char *d, const char *dest_uri,
                             const OrchMigrateParams *p, OrchMigrateStats *s, GError **e)
{
    FakeWorld *w = ((FakeVirt *)v)->world;

    if (!check_here(v, d, e))
        return FALSE;
    for (guint i = 0; i < w->devices->len; i++) {
        if (g_str_has_prefix(g_ptr_array_index(w->devices, i), "<hostdev")) {
            g_set_error(e, ORCH_ERROR, ORCH_ERROR_HYPERVISOR,
                        "cannot migrate a domain with <hostdev mode='subsystem' type='pci'>");
            return FALSE;
        }
    }
    if (w->migrate_sleep_ms) {
        GHashTableIter it;
        gpointer vf;

        /* Half-way through the copy another client tries to lease the VF leased for it. */
        g_usleep(w->migrate_sleep_ms * 1000 / 2);
        g_mutex_lock(&w->lease_lock);
        g_hash_table_iter_init(&it, w->leases);
        if (g_hash_table_iter_next(&it, &vf, NULL)) {
            g_autofree char *key = g_strdup(vf);

            w->mid_copy_tried = TRUE;
            if (pool_state(w, key) == ORCH_VF_STATE_FREE) {
                w->mid_copy_taken = TRUE;
                g_hash_table_insert(w->leases, g_strdup(key), g_strdup("another-client"));
            }
        }
        g_mutex_unlock(&w->lease_lock);
        g_usleep(w->migrate_sleep_ms * 1000 / 2);
    }
    /* VIR_MIGRATE_PERSIST_DEST defines it there; else a definition there stays as it was. */
    if (p->persistent)
        *(g_str_equal(v->label, "source") ? &w->defined_destination : &w->defined_source) = TRUE;
    if (p->undefine_source)
        *defined_here(v) = FALSE;
    g_free(w->where);
    w->where = g_strdup(g_str_equal(v->label, "source") ? "destination" : "source");
    w->migrations++;
    s->have_stats = TRUE;
    s->data_bytes = 89 * 1048576;
    s->downtime_ms = 150;
    /* The switch-over; then the source's side ends (the world is the caller's from here). */
    if (w->in_fn && g_str_equal(v->label, "source"))
        w->in_fn(w->in_opaque);
    if (w->confirm_ms)
        g_usleep(w->confirm_ms * 1000);
    w->migrate_returned_us = g_get_monotonic_time();
    if (w->confirm_fails && g_str_equal(v->label, "source")) {
        g_set_error(e, ORCH_ERROR, ORCH_ERROR_HYPERVISOR, "confirm failed on the source");
        return FALSE;
    }
    return TRUE;
}

static guint fake_watch_migrated_in(OrchVirt *v, const char *d, OrchVirtMigratedInFunc fn,
                                    gpointer opaque, GDestroyNotify destroy, GError **e)
{
    FakeWorld *w = ((FakeVirt *)v)->world;

    if (w->no_watch) {
        g_set_error(e, ORCH_ERROR, ORCH_ERROR_HYPERVISOR, "no lifecycle events here");
        return 0;
    }
    assert_string_equal(v->label, "destination");
    assert_null(w->in_fn); /* one watch at a time */
    w->in_fn = fn;
    w->in_opaque = opaque;
    w->in_destroy = destroy;
    return 1;
}

static void fake_unwatch(OrchVirt *v, guint watch)
{
    FakeWorld *w = ((FakeVirt *)v)->world;

    assert_int_equal(watch, 1);
    if (w->in_destroy)
        w->in_destroy(w->in_opaque);
    w->in_fn = NULL;
    w->in_opaque = NULL;
    w->in_destroy = NULL;
}

/* The one process the fake agent quiesces and resumes unless a test says otherwise */
#define FAKE_AGENT_MPI "[{\"pid\":7,\"name\":\"mpi\",\"mode\":\"lazy\"}]"

/* The fake agent: sync, prepare, resume, per docs/design.md. */
static void fake_agent_line(FakeWorld *w, FakeChannel *c, const char *line)
{
    if (w->agent_mode == AGENT_SILENT)
        return;
    if (strstr(line, "\"sync\"")) {
        const char *id = strstr(line, "\"id\":");
        g_autofree char *num = NULL;

        assert_non_null(id);
        num = g_strndup(id + 5, strspn(id + 5, "0123456789"));
        if (w->agent_mode == AGENT_STALE_SYNC) { /* once */
            g_string_append(c->base.out, "\xff{\"return\":1}\n");
            w->agent_mode = AGENT_OK;
        }
        g_string_append_printf(c->base.out, "\xff{\"return\":%s}\n", num);
    } else if (strstr(line, "\"prepare\"")) {
        if (w->agent_mode == AGENT_STOPS_IN_PREPARE) {
            w->agent_prepared = TRUE;
            w->agent_mode = AGENT_SILENT;
        } else if (w->agent_mode == AGENT_REFUSES_QUIESCE) {
            w->agent_prepared = TRUE;
            g_string_append(c->base.out, "{\"return\":{\"state\":\"prepared\",\"quiesced\":[],"
                                    "\"failed\":[{\"pid\":7,\"name\":\"mpi\",\"mode\":\"lazy\","
                                    "\"error\":\"timeout\"},{\"pid\":8,\"name\":"
                                    "\"x\\u001b]0;owned\\u0007\",\"error\":\"a\\nb\"}]}}\n");
        } else if (w->agent_prepared) {
            g_string_append(c->base.out, "{\"error\":{\"class\":\"Busy\",\"desc\":\"prepared\"}}\n");
        } else {
            w->agent_prepared = TRUE;
            g_string_append_printf(c->base.out,
                                   "{\"return\":{\"state\":\"prepared\",\"quiesced\":%s,"
                                   "\"failed\":[]}}\n",
                                   w->quiesced ? w->quiesced : FAKE_AGENT_MPI);
        }
    } else if ((strstr(line, "\"info\"") || strstr(line, "\"inventory\"")) &&
               w->agent_mode == AGENT_INFO_SILENT) {
        return;
    } else if (strstr(line, "\"info\"") && w->agent_mode == AGENT_INFO_GARBLED) {
        g_string_append(c->base.out, "{\"return\": not json\n");
    } else if (strstr(line, "\"info\"") && w->agent_mode == AGENT_INFO_FAILS) {
        g_string_append(c->base.out, "{\"error\":{\"class\":\"Unsupported\",\"desc\":\"no protocol 2 "
                                "today\"}}\n");
    } else if (strstr(line, "\"inventory\"") && w->agent_mode == AGENT_INFO_FAILS) {
        g_string_append(c->base.out, "{\"error\":{\"class\":\"CommandNotFound\",\"desc\":\"The "
                                "command 'inventory' needs protocol 2\"}}\n");
    } else if (strstr(line, "\"info\"")) {
        g_string_append(c->base.out, "{\"return\":{\"version\":\"test\",\"protocol\":2}}\n");
    } else if (strstr(line, "\"inventory\"") && w->agent_mode == AGENT_DEEP_INVENTORY) {
        g_autofree char *deep = g_strnfill(60000, '[');

        g_string_append_printf(c->base.out, "%s\n", deep);
    } else if (strstr(line, "\"inventory\"")) {
        g_string_append_printf(
            c->base.out,
            "{\"return\":{\"state\":\"running\",\"processes\":%s,\"devices\":[{"
            "\"name\":\"mlx5_0\",\"node_guid\":\"0002:c903:00a1:b2c3\",\"ports\":[{"
            "\"port\":1,\"state\":\"ACTIVE\",\"link_layer\":\"InfiniBand\",\"lid\":7,"
            "\"gids\":[\"fe80::2:c903:a1:b2c4\"]}]}]}}\n",
            w->processes ? w->processes : "[]");
    } else if (strstr(line, "\"resume\"") && w->agent_mode == AGENT_RESUME_BUSY &&
               w->agent_busy_left) {
        w->agent_busy_left--;
        g_string_append(c->base.out,
                        "{\"error\":{\"class\":\"Busy\",\"desc\":\"A resume is under way\"}}\n");
    } else if (strstr(line, "\"resume\"") && w->agent_mode == AGENT_RESUME_FAILS) {
        w->agent_prepared = FALSE;
        g_string_append(c->base.out, w->resumes++ == 0
                                    ? "{\"return\":{\"state\":\"running\",\"resumed\":[],"
                                      "\"failed\":[{\"pid\":7,\"name\":\"mpi\",\"mode\":\"lazy\","
                                      "\"error\":\"Connection timed out\"}],\"device\":\"mlx5_0\"}}\n"
                                    : "{\"return\":{\"state\":\"running\",\"resumed\":[],"
                                      "\"failed\":[],\"device\":\"\"}}\n");
    } else if (strstr(line, "\"resume\"")) {
        w->agent_prepared = FALSE;
        g_string_append_printf(c->base.out,
                               "{\"return\":{\"state\":\"running\",\"resumed\":%s,"
                               "\"failed\":[],\"device\":\"mlx5_0\"}}\n",
                               w->resumed ? w->resumed : FAKE_AGENT_MPI);
    } else {
        g_string_append(c->base.out, "{\"error\":{\"class\":\"CommandNotFound\",\"desc\":\"?\"}}\n");
    }
}

static gboolean fake_domain_abort_job(OrchVirt *v, const char *d, GError **e)
{
    return check_here(v, d, e);
}

static OrchVirtChannel *fake_channel_open(OrchVirt *v, const char *d, const char *name,
                                          gboolean force, GError **e)
{
    FakeChannel *c;

    if (!check_here(v, d, e))
        return NULL;
    assert_string_equal(name, "org.hotmig.agent.0");
    assert_true(force); /* a migration takes the channel from whoever holds it */
    c = g_new0(FakeChannel, 1);
    fake_agent_channel_init(&c->base, v);
    c->in = g_string_new(NULL);
    return &c->base.parent;
}

static gboolean fake_channel_send(OrchVirtChannel *chan, const void *buf, gsize len,
                                  HmDeadline deadline, GError **e)
{
    FakeChannel *c = (FakeChannel *)chan;
    FakeWorld *w = ((FakeVirt *)chan->virt)->world;
    char *nl;

    g_autoptr(GString) cmds = g_string_new(NULL);

    g_string_append_len(c->in, buf, len);
    while ((nl = memchr(c->in->str, '\n', c->in->len))) {
        g_autofree char *line = g_strndup(c->in->str, nl - c->in->str);
        const char *cmd = strstr(line, "\"execute\":\"");

        g_string_erase(c->in, 0, nl - c->in->str + 1);
        if (cmd)
            g_string_append_printf(cmds, "%s%.*s", cmds->len ? "," : "",
                                   (int)strcspn(cmd + 11, "\""), cmd + 11);
        fake_agent_line(w, c, line[0] == '\xff' ? line + 1 : line);
    }
    /* What the agent got in this one write (it reads a write at once). */
    g_mutex_lock(&w->log_lock);
    g_string_append_printf(w->agent_writes, "%s: %s;", chan->virt->label, cmds->str);
    g_mutex_unlock(&w->log_lock);
    return TRUE;
}

static void fake_channel_close(OrchVirtChannel *chan)
{
    FakeChannel *c = (FakeChannel *)chan;

    fake_agent_channel_clear(&c->base);
    g_string_free(c->in, TRUE);
    g_free(c);
}

static GPtrArray *fake_nodedev_list_pci_xml(OrchVirt *v, GError **e)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    gboolean src = g_str_equal(v->label, "source");
    const char **list = src ? SRC_NODEDEVS : DST_NODEDEVS;
    gsize n = src ? G_N_ELEMENTS(SRC_NODEDEVS) : G_N_ELEMENTS(DST_NODEDEVS);

    for (gsize i = 0; i < n; i++)
        g_ptr_array_add(out, g_strdup(list[i]));
    return out;
}

static GPtrArray *fake_domain_list_xml(OrchVirt *v, GError **e)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);

    if (g_str_equal(v->label, "destination"))
        g_ptr_array_add(out, g_strdup(DST_OTHER_DOMAIN));
    if (here(v))
        g_ptr_array_add(out, fake_domain_get_xml(v, DOMAIN, NULL));
    return out;
}

/* The destination cannot provide a CPU model named "NoSuchCPU"; anything else runs. */
static gboolean fake_domain_capable(OrchVirt *v, const XmlDomainNeeds *needs, gboolean *ret_capable,
                                    char **ret_detail, GError **e)
{
    *ret_capable = !needs->cpu_xml || !strstr(needs->cpu_xml, "NoSuchCPU");
    *ret_detail = g_strdup(*ret_capable ? "runs it" : "cannot provide the domain's CPU");
    return TRUE;
}

static void fake_free(OrchVirt *v)
{
    orch_virt_clear(v);
    g_free(v);
}

static const OrchVirtOps fake_ops = {
    .domain_state = fake_domain_state,
    .domain_is_persistent = fake_domain_is_persistent,
    .domain_get_xml = fake_domain_get_xml,
    .device_detach = fake_device_detach,
    .device_attach = fake_device_attach,
    .migrate = fake_migrate,
    .domain_abort_job = fake_domain_abort_job,
    .watch_migrated_in = fake_watch_migrated_in,
    .unwatch = fake_unwatch,
    .channel_open = fake_channel_open,
    .channel_send = fake_channel_send,
    .channel_recv = fake_agent_channel_recv,
    .channel_close = fake_channel_close,
    .nodedev_list_pci_xml = fake_nodedev_list_pci_xml,
    .domain_list_xml = fake_domain_list_xml,
    .domain_capable = fake_domain_capable,
    .free = fake_free,
};

typedef struct {
    FakeWorld *world;
    const char *fault; /* fault spec or NULL */
} FakeOpen;

/* The fake world and fault spec of the last fake_open(): its hotmigd serves that world. */
static FakeOpen *last_open;

static OrchVirt *fake_open(const char *uri, const char *label, gpointer opaque, GError **error)
{
    FakeOpen *fo = opaque;
    FakeVirt *v;

    last_open = fo;
    if (g_str_has_prefix(uri, "bad://")) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_HYPERVISOR, "Cannot connect to '%s'", uri);
        return NULL;
    }
    v = g_new0(FakeVirt, 1);
    v->world = fo->world;
    orch_virt_init(&v->parent, &fake_ops, uri, label);
    if (fo->fault)
        return orch_virt_fault_wrap(&v->parent, fo->fault, error);
    return &v->parent;
}


/* ---- the destination's hotmigd --------------------------------------------------------------
 * Its pool: three ConnectX VFs (02.1 used by another domain) and the stand-in's tap. Calls
 * fail as the test's fault spec says ("vfd_OP[#N]"). */

static const char *const POOL_PCI[] = {"0000:5e:02.1", "0000:5e:02.2", "0000:5e:02.3"};
#define POOL_STANDIN "hmtap1"

typedef struct {
    OrchHotmigdClient parent;
    FakeWorld *world;
    char *fault;
    GHashTable *calls; /* op -> count */
} FakeVfd;

static void vfd_log_add(FakeWorld *w, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void vfd_log_add(FakeWorld *w, const char *fmt, ...)
{
    va_list ap;

    g_mutex_lock(&w->log_lock);
    va_start(ap, fmt);
    g_string_append_vprintf(w->vfd_log, fmt, ap);
    va_end(ap);
    g_mutex_unlock(&w->log_lock);
}

static gboolean vfd_fault(FakeVfd *f, const char *op, GError **error)
{
    g_auto(GStrv) rules = f->fault ? g_strsplit(f->fault, ",", -1) : NULL;
    guint n = GPOINTER_TO_UINT(g_hash_table_lookup(f->calls, op)) + 1;
    g_autofree char *name = g_strconcat("vfd_", op, NULL);

    g_hash_table_insert(f->calls, (gpointer)op, GUINT_TO_POINTER(n));
    vfd_log_add(f->world, "%s;", op);
    for (char **r = rules; r && *r; r++) {
        char *hash = strchr(*r, '#');
        char *at = strchr(*r, '@');
        gsize len = at ? (gsize)(at - *r) : hash ? (gsize)(hash - *r) : strlen(*r);

        /* The destination's hotmigd is the only one asked. */
        if (at && strncmp(at, "@destination", strlen("@destination")) != 0)
            continue;
        if (len == strlen(name) && !strncmp(*r, name, len) &&
            (!hash || g_ascii_strtoull(hash + 1, NULL, 10) == n)) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE,
                        "hotmigd at %s: injected fault (%s call %u)", f->parent.url, op, n);
            return TRUE;
        }
    }
    return FALSE;
}

/* An unconfirmed lease whose time ran out is gone (lease_ttl_s). Called with lease_lock. */
static void lease_expire(FakeWorld *w, const char *vf)
{
    gint64 *until = g_hash_table_lookup(w->lease_until, vf);

    if (until && g_get_monotonic_time() >= *until && !g_hash_table_contains(w->assigned, vf)) {
        g_hash_table_remove(w->leases, vf);
        g_hash_table_remove(w->lease_until, vf);
    }
}

static void lease_set_until(FakeWorld *w, const char *vf)
{
    gint64 *until = g_new(gint64, 1);

    *until = g_get_monotonic_time() + (gint64)w->lease_ttl_s * G_TIME_SPAN_SECOND;
    g_hash_table_insert(w->lease_until, g_strdup(vf), until);
}

static OrchVfState pool_state(FakeWorld *w, const char *vf)
{
    lease_expire(w, vf);
    if (g_str_equal(vf, POOL_PCI[0]))
        return ORCH_VF_STATE_IN_USE;
    if (g_hash_table_contains(w->assigned, vf))
        return ORCH_VF_STATE_ASSIGNED;
    if (g_hash_table_contains(w->leases, vf))
        return ORCH_VF_STATE_LEASED;
    return ORCH_VF_STATE_FREE;
}

static OrchHotmigdHostInfo *fvfd_host(OrchHotmigdClient *v, GError **e)
{
    FakeVfd *f = (FakeVfd *)v;
    OrchHotmigdHostInfo *info;

    if (vfd_fault(f, "host", e))
        return NULL;
    info = g_new0(OrchHotmigdHostInfo, 1);
    info->name = g_strdup("b");
    info->version = g_strdup("test");
    info->pool_size = G_N_ELEMENTS(POOL_PCI) + 1;
    for (gsize i = 0; i < G_N_ELEMENTS(POOL_PCI); i++)
        info->counts[pool_state(f->world, POOL_PCI[i])]++;
    info->counts[pool_state(f->world, POOL_STANDIN)]++;
    return info;
}

static OrchHotmigdVfInfo *pool_info(FakeWorld *w, const char *id, gboolean pci)
{
    OrchHotmigdVfInfo *info = g_new0(OrchHotmigdVfInfo, 1);

    info->id = g_strdup(id);
    info->kind = pci ? ORCH_VF_KIND_PCI : ORCH_VF_KIND_STANDIN;
    info->state = pool_state(w, id);
    info->vendor_id = pci ? 0x15b3 : 0;
    info->device_id = pci ? 0x101e : 0;
    info->vf_index = -1;
    if (info->state == ORCH_VF_STATE_IN_USE)
        info->assigned_to = g_strdup("other");
    if (info->state == ORCH_VF_STATE_LEASED || info->state == ORCH_VF_STATE_ASSIGNED) {
        info->lease = g_new0(HotplugLease, 1);
        info->lease->vf = g_strdup(id);
        info->lease->holder = g_strdup("someone");
        info->lease->reason = g_strdup("a test");
    }
    return info;
}

static GPtrArray *fvfd_list(OrchHotmigdClient *v, GError **e)
{
    FakeVfd *f = (FakeVfd *)v;
    GPtrArray *out;

    if (vfd_fault(f, "list", e))
        return NULL;
    out = g_ptr_array_new_with_free_func((GDestroyNotify)orch_hotmigd_vf_info_free);
    for (gsize i = 0; i < G_N_ELEMENTS(POOL_PCI); i++)
        g_ptr_array_add(out, pool_info(f->world, POOL_PCI[i], TRUE));
    g_ptr_array_add(out, pool_info(f->world, POOL_STANDIN, FALSE));
    return out;
}

static HotplugLease *lease_new(const char *vf, const char *id, HotplugLeaseState state)
{
    HotplugLease *lease = g_new0(HotplugLease, 1);

    lease->vf = g_strdup(vf);
    lease->id = g_strdup(id);
    lease->state = state;
    return lease;
}

static HotplugLease *fvfd_lease(OrchHotmigdClient *v, const OrchHotmigdLeaseRequest *req,
                                GError **e)
{
    FakeVfd *f = (FakeVfd *)v;
    const char *got = NULL;
    g_autofree char *id = NULL;

    if (vfd_fault(f, "lease", e))
        return NULL;
    g_mutex_lock(&f->world->lease_lock);
    if (req->vf) {
        gboolean known = g_str_equal(req->vf, POOL_STANDIN);

        for (gsize i = 0; i < G_N_ELEMENTS(POOL_PCI); i++)
            known = known || g_str_equal(req->vf, POOL_PCI[i]);
        if (!known) {
            g_set_error(e, ORCH_ERROR, ORCH_ERROR_NOT_FOUND, "VF '%s' is not in the pool",
                        req->vf);
            return NULL;
        }
        if (pool_state(f->world, req->vf) == ORCH_VF_STATE_FREE)
            got = req->vf;
    } else {
        for (gsize i = 0; i < G_N_ELEMENTS(POOL_PCI) && !got; i++)
            if (req->vendor_id == 0x15b3 && req->device_id == 0x101e &&
                pool_state(f->world, POOL_PCI[i]) == ORCH_VF_STATE_FREE)
                got = POOL_PCI[i];
    }
    if (!got) {
        g_mutex_unlock(&f->world->lease_lock);
        g_set_error(e, ORCH_ERROR, ORCH_ERROR_CONFLICT, "no free VF for '%s'",
                    req->vf ? req->vf : "15b3:101e");
        return NULL;
    }
    id = g_strdup_printf("lease%u", ++f->world->vfd_lease_seq);
    g_hash_table_insert(f->world->leases, g_strdup(got), g_strdup(id));
    if (f->world->lease_ttl_s)
        lease_set_until(f->world, got);
    g_mutex_unlock(&f->world->lease_lock);
    {
        HotplugLease *lease = lease_new(got, id, HOTPLUG_LEASE_LEASED);

        if (f->world->lease_ttl_s) {
            lease->created = g_get_real_time() / G_USEC_PER_SEC;
            lease->expires = lease->created + f->world->lease_ttl_s;
        }
        return lease;
    }
}

static gboolean fvfd_renew(OrchHotmigdClient *v, const char *vf, const char *id, guint ttl_s,
                           GError **e)
{
    FakeVfd *f = (FakeVfd *)v;
    gboolean ok;

    if (vfd_fault(f, "renew", e))
        return FALSE;
    g_mutex_lock(&f->world->lease_lock);
    lease_expire(f->world, vf);
    ok = g_strcmp0(g_hash_table_lookup(f->world->leases, vf), id) == 0;
    if (ok && f->world->lease_ttl_s && !g_hash_table_contains(f->world->assigned, vf))
        lease_set_until(f->world, vf);
    if (ok)
        f->world->renewals++;
    g_mutex_unlock(&f->world->lease_lock);
    if (!ok)
        g_set_error(e, ORCH_ERROR, ORCH_ERROR_CONFLICT, "lease %s of VF '%s' is not current", id,
                    vf);
    return ok;
}

static HotplugLease *fvfd_confirm(OrchHotmigdClient *v, const char *vf, const char *id, GError **e)
{
    FakeVfd *f = (FakeVfd *)v;
    const char *cur;

    if (vfd_fault(f, "confirm", e))
        return NULL;
    if (g_strcmp0(g_hash_table_lookup(f->world->assigned, vf), id) == 0)
        return lease_new(vf, id, HOTPLUG_LEASE_ASSIGNED);
    cur = g_hash_table_lookup(f->world->leases, vf);
    if (g_strcmp0(cur, id) != 0) {
        g_set_error(e, ORCH_ERROR, ORCH_ERROR_CONFLICT, "lease '%s' of VF '%s' is not current",
                    id, vf);
        return NULL;
    }
    g_hash_table_remove(f->world->leases, vf);
    g_hash_table_insert(f->world->assigned, g_strdup(vf), g_strdup(id));
    return lease_new(vf, id, HOTPLUG_LEASE_ASSIGNED);
}

static gboolean fvfd_release(OrchHotmigdClient *v, const char *vf, const char *id, GError **e)
{
    FakeVfd *f = (FakeVfd *)v;

    if (vfd_fault(f, "release", e))
        return FALSE;
    if (f->world->release_unreachable > 0) { /* the connection itself fails */
        f->world->release_unreachable--;
        g_set_error(e, ORCH_ERROR, ORCH_ERROR_UNREACHABLE, "Cannot reach hotmigd at %s (release)",
                    f->parent.url);
        return FALSE;
    }
    if (g_strcmp0(g_hash_table_lookup(f->world->leases, vf), id) == 0)
        g_hash_table_remove(f->world->leases, vf);
    if (g_strcmp0(g_hash_table_lookup(f->world->assigned, vf), id) == 0)
        g_hash_table_remove(f->world->assigned, vf);
    return TRUE;
}

static gboolean fvfd_ib_identity(OrchHotmigdClient *v, const char *vf, guint64 node, guint64 port,
                                 char **ret_note, GError **e)
{
    FakeVfd *f = (FakeVfd *)v;

    if (vfd_fault(f, "ib_identity", e))
        return FALSE;
    vfd_log_add(f->world, "identity %s %016" G_GINT64_MODIFIER "x;", vf,
                           node);
    *ret_note = g_str_equal(vf, POOL_STANDIN) ? g_strdup("skipped: a stand-in") : NULL;
    return TRUE;
}

static gboolean fvfd_identity(OrchHotmigdClient *v, const char *vf, const char *domain,
                              guint64 *ret_node, guint64 *ret_port, char **ret_source, GError **e)
{
    FakeVfd *f = (FakeVfd *)v;

    if (vfd_fault(f, "identity", e))
        return FALSE;
    vfd_log_add(f->world, "host-identity %s@%s;", vf, v->url);
    if (!f->world->src_node_guid) {
        g_set_error(e, ORCH_ERROR, ORCH_ERROR_NOT_FOUND, "The GUIDs of VF '%s' are unknown", vf);
        return FALSE;
    }
    *ret_node = f->world->src_node_guid;
    *ret_port = f->world->src_port_guid;
    *ret_source = g_strdup("reported by the host's kernel");
    return TRUE;
}

static gboolean fvfd_vfio(OrchHotmigdClient *v, const char *vf, char **ret_note, GError **e)
{
    return !vfd_fault((FakeVfd *)v, "vfio", e);
}

/* The source's hotmigd is told which VFs the domain left (its pool is not modelled). */
static gboolean fvfd_left(OrchHotmigdClient *v, const char *vf, const char *domain, GError **e)
{
    FakeVfd *f = (FakeVfd *)v;

    if (vfd_fault(f, "left", e))
        return FALSE;
    vfd_log_add(f->world, "left %s@%s;", vf, v->url);
    return TRUE;
}

/* The destination has every file but those whose name says "missing". */
static GPtrArray *fvfd_files_missing(OrchHotmigdClient *v, const char *const *paths, GError **e)
{
    GPtrArray *out;

    if (vfd_fault((FakeVfd *)v, "files_missing", e))
        return NULL;
    out = g_ptr_array_new_with_free_func(g_free);
    for (const char *const *p = paths; *p; p++)
        if (strstr(*p, "missing"))
            g_ptr_array_add(out, g_strdup(*p));
    return out;
}

static void fvfd_free(OrchHotmigdClient *v)
{
    FakeVfd *f = (FakeVfd *)v;

    g_free(f->fault);
    g_hash_table_unref(f->calls);
    orch_hotmigd_client_clear(v);
    g_free(f);
}

static const OrchHotmigdClientOps fake_vfd_ops = {
    .host = fvfd_host,
    .list = fvfd_list,
    .lease = fvfd_lease,
    .confirm = fvfd_confirm,
    .release = fvfd_release,
    .renew = fvfd_renew,
    .ib_identity = fvfd_ib_identity,
    .identity = fvfd_identity,
    .vfio = fvfd_vfio,
    .left = fvfd_left,
    .files_missing = fvfd_files_missing,
    .free = fvfd_free,
};

static OrchHotmigdClient *fake_vfd_open(const char *url, gpointer opaque, GError **error)
{
    FakeVfd *f;

    if (g_str_has_prefix(url, "https://down")) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE, "hotmigd at %s: refused", url);
        return NULL;
    }
    f = g_new0(FakeVfd, 1);
    f->world = last_open->world;
    f->fault = g_strdup(last_open->fault);
    f->calls = g_hash_table_new(g_str_hash, g_str_equal);
    orch_hotmigd_client_init(&f->parent, &fake_vfd_ops, url);
    return &f->parent;
}

static char *state_dir;

static void options_for_test(OrchOptions *opts)
{
    orch_options_init(opts);
    opts->hotmigd_url = g_strdup("https://127.0.0.1:16680");
    opts->source_hotmigd_url = g_strdup("https://a:16680");
    opts->state_dir = g_strdup(state_dir);
    opts->domain = g_strdup(DOMAIN);
    opts->source_uri = g_strdup("fake://a");
    opts->dest_uri = g_strdup("fake://b");
}

/* Runs orch_migrate(), orch_preflight() or orch_recover() with @opts reaching @fo's fake
 * world (libvirt and hotmigd through a connector of fakes). */
static gboolean migrate_on(OrchOptions *opts, FakeOpen *fo, OrchReport **ret_report,
                           GError **error)
{
    const OrchConnector conn = {.open_virt = fake_open, .open_hotmigd = fake_vfd_open, .data = fo};
    gboolean ok;

    opts->connector = &conn;
    ok = orch_migrate(opts, ret_report, error);
    opts->connector = NULL;
    return ok;
}

static gboolean preflight_on(OrchOptions *opts, FakeOpen *fo, GPtrArray **ret_checks,
                             GError **error)
{
    const OrchConnector conn = {.open_virt = fake_open, .open_hotmigd = fake_vfd_open, .data = fo};
    gboolean ok;

    opts->connector = &conn;
    ok = orch_preflight(opts, ret_checks, error);
    opts->connector = NULL;
    return ok;
}

static gboolean recover_on(OrchOptions *opts, FakeOpen *fo, GPtrArray **ret_results,
                           GError **error)
{
    const OrchConnector conn = {.open_virt = fake_open, .open_hotmigd = fake_vfd_open, .data = fo};
    gboolean ok;

    opts->connector = &conn;
    ok = orch_recover(opts, ret_results, error);
    opts->connector = NULL;
    return ok;
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_happy_path(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *table = NULL;
    g_autofree char *json = NULL;

    options_for_test(&opts);
    assert_true(migrate_on(&opts, &fo, &report, &error));
    assert_null(error);
    assert_true(report->ok);
    assert_string_equal(w->where, "destination");
    assert_int_equal(world_count_vfs(w), 2);
    assert_false(w->agent_prepared);
    /* The hostdev got the destination's free VF, not the one another domain holds. */
    {
        gboolean found = FALSE;
        for (guint i = 0; i < w->devices->len; i++) {
            const char *dev = g_ptr_array_index(w->devices, i);
            if (g_str_has_prefix(dev, "<hostdev")) {
                assert_non_null(strstr(dev, "bus='0x5e'"));
                assert_non_null(strstr(dev, "function='0x2'"));
                found = TRUE;
            }
        }
        assert_true(found);
    }
    for (guint i = 0; i < ORCH_PHASE_LAST; i++)
        assert_int_equal(report->phases[i].status, ORCH_STATUS_OK);
    assert_int_equal(report->vfs_total, 2);
    assert_int_equal(report->vfs_attached, 2);
    assert_int_equal(report->rollback->len, 0);
    /* Both destination VFs were leased through hotmigd and confirmed. */
    assert_int_equal(g_hash_table_size(w->leases), 0);
    assert_true(g_hash_table_contains(w->assigned, "0000:5e:02.2"));
    assert_true(g_hash_table_contains(w->assigned, "hmtap1"));
    /* The source's hotmigd was told the domain left both VFs there. */
    assert_non_null(strstr(w->vfd_log->str, "left 0000:3b:02.1@https://a:16680;"));
    assert_non_null(strstr(w->vfd_log->str, "left hmtap1@https://a:16680;"));
    /* Two VFs, one RDMA device in the guest: no identity is carried over, and it says why. */
    assert_null(strstr(w->vfd_log->str, "identity"));
    assert_non_null(strstr(report->phases[ORCH_PHASE_UNPLUG].detail, "cannot tell which"));
    table = orch_report_format_table(report);
    assert_non_null(strstr(table, "migrate"));
    assert_non_null(strstr(table, "downtime 150 ms"));
    json = orch_report_format_json(report, FALSE);
    assert_non_null(strstr(json, "\"ok\":true"));
    assert_non_null(strstr(json, "\"final_host\":\"destination\""));
}

static gboolean journal_exists(void);

/* The plug starts at the switch-over, while the source's libvirtd still ends the migration
 * call (its Confirm: 150 ms here); the call's figures still reach the report. Without the
 * destination's watch, or with post-copy allowed, the plug waits for the call. */
static void test_plug_at_switchover(void **state)
{
    for (guint variant = 0; variant < 3; variant++) {
        g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
        FakeOpen fo = {w, NULL};
        g_auto(OrchOptions) opts;
        g_autoptr(OrchReport) report = NULL;
        g_autoptr(GError) error = NULL;
        const char *detail;

        options_for_test(&opts);
        w->confirm_ms = 150;
        w->no_watch = variant == 1;
        opts.postcopy = variant == 2;
        assert_true(migrate_on(&opts, &fo, &report, &error));
        assert_true(report->ok);
        assert_string_equal(w->where, "destination");
        assert_int_equal(world_count_vfs(w), 2);
        assert_false(w->agent_prepared);
        assert_null(w->in_fn); /* the watch is gone */
        assert_true(w->dest_attach_us > 0 && w->migrate_returned_us > 0);
        if (variant == 0)
            assert_true(w->dest_attach_us < w->migrate_returned_us);
        else
            assert_true(w->dest_attach_us > w->migrate_returned_us);
        detail = report->phases[ORCH_PHASE_MIGRATE].detail;
        assert_non_null(detail);
        assert_non_null(strstr(detail, "89.0 MiB moved, downtime 150 ms"));
    }
    /* libvirt fails after the switch-over, the domain on the destination only: the move
     * stands, the detail says what libvirt said. */
    {
        g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
        FakeOpen fo = {w, NULL};
        g_auto(OrchOptions) opts;
        g_autoptr(OrchReport) report = NULL;
        g_autoptr(GError) error = NULL;

        options_for_test(&opts);
        w->confirm_ms = 50;
        w->confirm_fails = TRUE;
        assert_true(migrate_on(&opts, &fo, &report, &error));
        assert_true(report->ok);
        assert_string_equal(w->where, "destination");
        assert_int_equal(world_count_vfs(w), 2);
        assert_false(journal_exists());
        assert_non_null(strstr(report->phases[ORCH_PHASE_MIGRATE].detail,
                               "moved; libvirt then failed on the source's side: "));
    }
}

static void test_no_vf(void **state)
{
    g_autoptr(FakeWorld) w = world_new(FALSE, FALSE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    options_for_test(&opts);
    w->agent_mode = AGENT_SILENT; /* not asked: no VF, nothing to quiesce */
    assert_true(migrate_on(&opts, &fo, &report, &error));
    assert_string_equal(w->where, "destination");
    assert_int_equal(report->phases[ORCH_PHASE_UNPLUG].status, ORCH_STATUS_SKIPPED);
    assert_int_equal(report->phases[ORCH_PHASE_PLUG].status, ORCH_STATUS_SKIPPED);
    assert_int_equal(report->phases[ORCH_PHASE_PREPARE].status, ORCH_STATUS_SKIPPED);
    assert_non_null(strstr(report->phases[ORCH_PHASE_INSPECT].detail, "no VF"));
}

/* The resume finds one under way (the agent says Busy): it asks again until that one ended. */
static void test_resume_waits_for_one_under_way(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, FALSE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    options_for_test(&opts);
    w->agent_mode = AGENT_RESUME_BUSY;
    w->agent_busy_left = 2;
    if (!migrate_on(&opts, &fo, &report, &error))
        fail_msg("%s", error->message);
    assert_int_equal(w->agent_busy_left, 0);
    assert_false(w->agent_prepared);
    assert_string_equal(w->where, "destination");
}

/* A process the agent says failed to resume fails the resume phase: the migration does not
 * ask again on a new connection, where the agent would find everything running and report
 * none (what a move on the lab's IB fabric printed as 'resume ok, 0 process(es) resumed'). */
static void test_resume_failure_not_retried(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, FALSE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    options_for_test(&opts);
    w->agent_mode = AGENT_RESUME_FAILS;
    assert_false(migrate_on(&opts, &fo, &report, &error));
    assert_non_null(error);
    if (!strstr(error->message, "1 process(es) failed to resume: mpi[7]"))
        fail_msg("%s", error->message);
    assert_int_equal(w->resumes, 1);
    assert_int_equal(report->failed_phase, ORCH_PHASE_RESUME);
    assert_string_equal(w->where, "destination");
    /* the journal stays for --recover, which finds the processes running */
    assert_true(journal_exists());
    {
        FakeOpen rfo = {w, NULL};
        g_autoptr(GPtrArray) results = NULL;
        g_autoptr(GError) rerror = NULL;

        if (!recover_on(&opts, &rfo, &results, &rerror))
            fail_msg("recovery failed: %s", rerror->message);
        assert_false(journal_exists());
        assert_false(w->agent_prepared);
        assert_string_equal(w->where, "destination");
    }
}

static void test_agent_silent_refuses(void **state)
{
    g_autoptr(FakeWorld) w = world_new(FALSE, TRUE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    options_for_test(&opts);
    w->agent_mode = AGENT_SILENT;
    assert_false(migrate_on(&opts, &fo, &report, &error));
    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_AGENT));
    assert_non_null(strstr(error->message, "--no-agent"));
    assert_int_equal(report->failed_phase, ORCH_PHASE_PREPARE);
    assert_string_equal(w->where, "source");
    assert_int_equal(world_count_vfs(w), 1);
    assert_int_equal(w->migrations, 0);
}

/* Jobs (issue 18): the peers of the verbs layer's processes and the calls it refused. */
#define JOB_PEERS                                                                                  \
    "[{\"pid\":1802,\"name\":\"verbs:xdlu\",\"mode\":\"threaded\",\"state\":\"running\","          \
    "\"peers\":[{\"gid\":\"::ffff:198.51.100.2\",\"qpn\":18}],\"refused\":[]}]"
#define JOB_REFUSED                                                                                \
    "[{\"pid\":1802,\"name\":\"verbs:xdlu\",\"mode\":\"threaded\",\"state\":\"running\","          \
    "\"peers\":[{\"gid\":\"::ffff:198.51.100.2\",\"qpn\":18}],\"refused\":[\"ibv_alloc_mw\"]}]"

/* A process that holds the VF's device without the layer or libhotmig (issue 29 item 5): the
 * agent's inventory lists it apart, after the registered ones. */
#define JOB_UNREGISTERED                                                                           \
    "[" JOB_PEERS_ONE "],\"unregistered\":[{\"pid\":812,\"name\":\"ibv_rc_pingpong\","        \
    "\"device\":\"uverbs0\"}]"
#define JOB_PEERS_ONE                                                                              \
    "{\"pid\":1802,\"name\":\"verbs:xdlu\",\"mode\":\"threaded\",\"state\":\"running\","          \
    "\"peers\":[{\"gid\":\"::ffff:198.51.100.2\",\"qpn\":18}],\"refused\":[]}"

/* The inventory's "unregistered": parsed after the processes, flagged, bounded, named in the
 * refused summary with the count the agent left out; out of shape is refused naming the field. */
static void test_jobs_unregistered_parse(void **state)
{
    g_autoptr(JsonNode) node = json_from_string(
        "{\"processes\":[],\"unregistered\":[{\"pid\":812,\"name\":\"ibv_rc_pingpong\","
        "\"device\":\"uverbs0\"},{\"pid\":813,\"name\":\"ib_write_bw\",\"device\":\"uverbs0\"}],"
        "\"unregistered_dropped\":3}",
        NULL);
    static const char *const bad[] = {
        "{\"processes\":[],\"unregistered\":[{\"pid\":0,\"name\":\"a\",\"device\":\"uverbs0\"}]}",
        "{\"processes\":[],\"unregistered\":[{\"pid\":1,\"name\":\"a b\",\"device\":\"u\"}]}",
        "{\"processes\":[],\"unregistered\":[{\"pid\":1,\"name\":\"a\"}]}",
        "{\"processes\":[],\"unregistered\":{}}",
        "{\"processes\":[],\"unregistered\":[],\"unregistered_dropped\":2}",
        "{\"processes\":[],\"unregistered\":[7]}",
    };
    g_autoptr(GPtrArray) procs = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *refused = NULL;
    OrchAgentProcess *p;

    (void)state;
    procs = orch_agent_processes_parse(json_node_get_object(node), &error);
    assert_non_null(procs);
    assert_int_equal(procs->len, 2);
    assert_int_equal(orch_agent_registered_count(procs), 0);
    p = procs->pdata[0];
    assert_true(p->unregistered);
    assert_int_equal(p->pid, 812);
    assert_string_equal(p->device, "uverbs0");
    refused = orch_agent_refused_summary(procs);
    assert_string_equal(refused,
                        "process 'ibv_rc_pingpong' (pid 812) holds the RDMA device uverbs0 without "
                        "the hotmig verbs layer or libhotmig; process 'ib_write_bw' (pid 813) holds "
                        "the RDMA device uverbs0 without the hotmig verbs layer or libhotmig; and 3 "
                        "more such process(es)");
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(JsonNode) b = json_from_string(bad[i], NULL);
        g_autoptr(GPtrArray) none = NULL;
        g_autoptr(GError) e = NULL;

        assert_non_null(b);
        none = orch_agent_processes_parse(json_node_get_object(b), &e);
        if (none || !g_error_matches(e, ORCH_ERROR, ORCH_ERROR_AGENT) ||
            !strstr(e->message, "unregistered"))
            fail_msg("case %zu accepted or unnamed: %s", i, e ? e->message : "(no error)");
    }
}

/* A process without the layer holding the device: the move is refused before anything changed
 * (it used to go on, and the program died with the VF); --force moves anyway and says so. */
static void test_jobs_unregistered_refused(void **state)
{
    g_autoptr(FakeWorld) w = world_new(FALSE, TRUE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    (void)state;
    options_for_test(&opts);
    w->processes = JOB_UNREGISTERED;
    assert_false(migrate_on(&opts, &fo, &report, &error));
    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_REFUSED));
    if (!strstr(error->message, "process 'ibv_rc_pingpong' (pid 812) holds the RDMA device "
                                "uverbs0 without the hotmig verbs layer or libhotmig") ||
        !strstr(error->message, "nothing was done"))
        fail_msg("message: %s", error->message);
    assert_int_equal(report->failed_phase, ORCH_PHASE_TARGET_VF);
    assert_false(w->agent_prepared);
    assert_string_equal(w->where, "source");
    assert_int_equal(w->migrations, 0);
    assert_int_equal(g_hash_table_size(w->leases), 0);
    {
        g_autoptr(OrchReport) r2 = NULL;
        g_autoptr(GError) e2 = NULL;

        opts.force = TRUE;
        if (!migrate_on(&opts, &fo, &r2, &e2))
            fail_msg("%s", e2->message);
        assert_int_equal(w->migrations, 1);
        assert_non_null(strstr(r2->phases[ORCH_PHASE_TARGET_VF].detail,
                               "--force: moving although process 'ibv_rc_pingpong' (pid 812)"));
    }
}

/* A process's job as the guest sees it (issue 32 item 7): read, bounded, named in the jobs
 * summary; not printable is refused like any malformed field. */
static void test_jobs_guest_job(void **state)
{
    g_autoptr(JsonNode) node = json_from_string(
        "{\"processes\":[{\"pid\":1802,\"name\":\"verbs:xdlu\",\"job\":\"4711\","
        "\"peers\":[{\"gid\":\"::ffff:198.51.100.2\",\"qpn\":18}],\"refused\":[]},"
        "{\"pid\":1803,\"name\":\"rank1\",\"peers\":[{\"gid\":\"::ffff:198.51.100.3\","
        "\"qpn\":19}]}]}",
        NULL);
    g_autoptr(JsonNode) bad =
        json_from_string("{\"processes\":[{\"pid\":1,\"name\":\"a\",\"job\":\"a b\"}]}", NULL);
    g_autoptr(GPtrArray) procs = NULL;
    g_autoptr(GPtrArray) none = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *summary = NULL;
    guint n = 0;

    procs = orch_agent_processes_parse(json_node_get_object(node), &error);
    assert_non_null(procs);
    assert_string_equal(((OrchAgentProcess *)procs->pdata[0])->job, "4711");
    assert_null(((OrchAgentProcess *)procs->pdata[1])->job);
    summary = orch_agent_peers_summary(procs, &n);
    assert_string_equal(summary, "'verbs:xdlu' (pid 1802, job 4711): ::ffff:198.51.100.2 QP 18; "
                                 "'rank1' (pid 1803): ::ffff:198.51.100.3 QP 19");
    none = orch_agent_processes_parse(json_node_get_object(bad), &error);
    assert_null(none);
    assert_non_null(strstr(error->message, "'job'"));
}

/* A process that used a refused call: the move is refused before anything changed (the lease
 * taken meanwhile released, nothing quiesced, nothing migrated), naming process and call. */
static void test_jobs_refused(void **state)
{
    g_autoptr(FakeWorld) w = world_new(FALSE, TRUE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    options_for_test(&opts);
    w->processes = JOB_REFUSED;
    assert_false(migrate_on(&opts, &fo, &report, &error));
    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_REFUSED));
    if (!strstr(error->message, "process 'verbs:xdlu' (pid 1802) used ibv_alloc_mw") ||
        !strstr(error->message, "--force") || !strstr(error->message, "nothing was done"))
        fail_msg("message: %s", error->message);
    assert_int_equal(report->failed_phase, ORCH_PHASE_TARGET_VF);
    assert_int_equal(report->phases[ORCH_PHASE_PREPARE].status, ORCH_STATUS_PENDING);
    assert_false(w->agent_prepared);
    assert_string_equal(w->where, "source");
    assert_int_equal(world_count_vfs(w), 1);
    assert_int_equal(w->migrations, 0);
    assert_int_equal(g_hash_table_size(w->leases), 0); /* the lease was released */

    /* A malformed process list: cannot tell, refused the same way. */
    {
        g_autoptr(OrchReport) r2 = NULL;
        g_autoptr(GError) e2 = NULL;

        w->processes = "[{\"pid\":1802,\"name\":\"x\",\"refused\":[\"a b\"]}]";
        assert_false(migrate_on(&opts, &fo, &r2, &e2));
        assert_true(g_error_matches(e2, ORCH_ERROR, ORCH_ERROR_REFUSED));
        assert_non_null(strstr(e2->message, "a refused call"));
        assert_int_equal(w->migrations, 0);
    }
}

/* --force: paused and moved all the same; the report says so, and which peers it paused. */
static void test_jobs_force(void **state)
{
    g_autoptr(FakeWorld) w = world_new(FALSE, TRUE);
    FakeOpen fo = {w, NULL};
    const char *detail;
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    options_for_test(&opts);
    opts.force = TRUE;
    w->processes = JOB_REFUSED;
    if (!migrate_on(&opts, &fo, &report, &error))
        fail_msg("%s", error->message);
    assert_string_equal(w->where, "destination");
    assert_int_equal(w->migrations, 1);
    detail = report->phases[ORCH_PHASE_TARGET_VF].detail;
    if (!strstr(detail, "; the move pauses 1 peer connection(s): 'verbs:xdlu' (pid 1802): "
                        "::ffff:198.51.100.2 QP 18") ||
        !strstr(detail, "; --force: moving although process 'verbs:xdlu' (pid 1802) used "
                        "ibv_alloc_mw"))
        fail_msg("target-vf detail: %s", detail);
}

/* A Nova instance is refused at inspect before anything changed, unless forced (issue 32
 * item 7): Nova's database would go on placing it on the source. */
static void test_nova_refused(void **state)
{
    g_autoptr(FakeWorld) w = world_new(FALSE, TRUE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    options_for_test(&opts);
    w->nova = TRUE;
    assert_false(migrate_on(&opts, &fo, &report, &error));
    if (!strstr(error->message, "is an OpenStack Nova instance"))
        fail_msg("%s", error->message);
    assert_int_equal(report->failed_phase, ORCH_PHASE_INSPECT);
    assert_string_equal(w->where, "source");
    assert_int_equal(world_count_vfs(w), 1);
    assert_int_equal(w->migrations, 0);

    g_clear_pointer(&report, orch_report_free);
    g_clear_error(&error);
    opts.force = TRUE;
    if (!migrate_on(&opts, &fo, &report, &error))
        fail_msg("%s", error->message);
    assert_string_equal(w->where, "destination");
    if (!strstr(report->phases[ORCH_PHASE_INSPECT].detail, "--force: moving a Nova instance"))
        fail_msg("inspect detail: %s", report->phases[ORCH_PHASE_INSPECT].detail);
}

static void test_no_agent_option(void **state)
{
    g_autoptr(FakeWorld) w = world_new(FALSE, TRUE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    options_for_test(&opts);
    opts.no_agent = TRUE;
    w->agent_mode = AGENT_SILENT;
    assert_true(migrate_on(&opts, &fo, &report, &error));
    assert_string_equal(w->where, "destination");
    assert_int_equal(world_count_vfs(w), 1);
    assert_int_equal(report->phases[ORCH_PHASE_PREPARE].status, ORCH_STATUS_SKIPPED);
    assert_int_equal(report->phases[ORCH_PHASE_RESUME].status, ORCH_STATUS_SKIPPED);
}

static void test_quiesce_refused_resumes(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, FALSE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    options_for_test(&opts);
    w->agent_mode = AGENT_REFUSES_QUIESCE;
    assert_false(migrate_on(&opts, &fo, &report, &error));
    assert_non_null(strstr(error->message, "did not quiesce"));
    assert_non_null(strstr(error->message, "mpi[7] (timeout)"));
    /* The guest's text reaches the message without its control characters (issue 15). */
    assert_non_null(strstr(error->message, "x?]0;owned?[8] (a?b)"));
    for (const char *p = error->message; *p; p++)
        assert_false(g_ascii_iscntrl(*p));
    assert_false(w->agent_prepared); /* undone */
    assert_string_equal(w->where, "source");
    assert_int_equal(world_count_vfs(w), 1);
}

static void test_plug_fails_migrates_back(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
    FakeOpen fo = {w, "device_attach@destination"};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    options_for_test(&opts);
    assert_false(migrate_on(&opts, &fo, &report, &error));
    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_HYPERVISOR));
    assert_non_null(strstr(error->message, "Phase 'plug' failed"));
    assert_int_equal(report->failed_phase, ORCH_PHASE_PLUG);
    assert_string_equal(w->where, "source");
    assert_int_equal(w->migrations, 2);
    assert_int_equal(world_count_vfs(w), 2);
    assert_false(w->agent_prepared);
    assert_string_equal(report->final_host, "source");
    assert_int_equal(report->vfs_attached, 2);
    assert_int_equal(report->phases[ORCH_PHASE_MIGRATE].status, ORCH_STATUS_UNDONE);
}

/* Where the domain is defined after a migration, and so whether a plug there may change its
 * definition: --persistent or a definition the destination already had, not the source's.
 * A failed plug migrates back and leaves the definitions as they were. */
static void test_persistence(void **state)
{
    static const struct {
        const char *name;
        gboolean defined_source, defined_destination; /* before */
        gboolean persistent, undefine_source;         /* asked */
        const char *fault;
        gboolean ok;
        gboolean want_source, want_destination; /* after */
        gboolean want_plug_config;              /* when it migrated */
    } cases[] = {
        /* libvirt refused the plug into the transient domain on the destination: exit 16 */
        {"defined source, plain", TRUE, FALSE, FALSE, FALSE, NULL, TRUE, TRUE, FALSE, FALSE},
        {"--persistent --undefinesource", TRUE, FALSE, TRUE, TRUE, NULL, TRUE, FALSE, TRUE, TRUE},
        {"transient source, --persistent", FALSE, FALSE, TRUE, FALSE, NULL, TRUE, FALSE, TRUE,
         TRUE},
        {"defined on the destination before", FALSE, TRUE, FALSE, FALSE, NULL, TRUE, FALSE, TRUE,
         TRUE},
        {"--persistent, plug fails", FALSE, FALSE, TRUE, FALSE, "device_attach@destination", FALSE,
         FALSE, FALSE, FALSE},
        {"--persistent --undefinesource, plug fails", TRUE, FALSE, TRUE, TRUE,
         "device_attach@destination", FALSE, TRUE, FALSE, FALSE},
        {"defined on both, plug fails", TRUE, TRUE, TRUE, TRUE, "device_attach@destination", FALSE,
         TRUE, TRUE, FALSE},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
        FakeOpen fo = {w, cases[i].fault};
        g_auto(OrchOptions) opts;
        g_autoptr(OrchReport) report = NULL;
        g_autoptr(GError) error = NULL;
        gboolean ok;

        options_for_test(&opts);
        w->defined_source = cases[i].defined_source;
        w->defined_destination = cases[i].defined_destination;
        opts.persistent = cases[i].persistent;
        opts.undefine_source = cases[i].undefine_source;
        ok = migrate_on(&opts, &fo, &report, &error);
        if (ok != cases[i].ok)
            fail_msg("%s: %s", cases[i].name, error ? error->message : "migrated");
        assert_string_equal(w->where, ok ? "destination" : "source");
        assert_int_equal(world_count_vfs(w), 2);
        if (w->defined_source != cases[i].want_source ||
            w->defined_destination != cases[i].want_destination)
            fail_msg("%s: defined on the source %d, on the destination %d", cases[i].name,
                     w->defined_source, w->defined_destination);
        if (ok && w->last_plug_config != cases[i].want_plug_config)
            fail_msg("%s: the plug on the destination %s the definition", cases[i].name,
                     w->last_plug_config ? "changed" : "left");
        if (!ok)
            assert_int_equal(report->failed_phase, ORCH_PHASE_PLUG);
    }
}

/* The chosen destination VF (02.2: 02.1 is taken) fails both attempts; the next free VF of the
 * same model (02.3) is plugged instead. */
static void test_plug_other_vf(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
    FakeOpen fo = {w, "device_attach@destination#1,device_attach@destination#2"};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;
    const char *want = "function='0x3'";
    gboolean found = FALSE;

    options_for_test(&opts);
    assert_true(migrate_on(&opts, &fo, &report, &error));
    assert_string_equal(w->where, "destination");
    assert_int_equal(world_count_vfs(w), 2);
    for (guint i = 0; i < w->devices->len; i++) {
        const char *dev = g_ptr_array_index(w->devices, i);
        if (g_str_has_prefix(dev, "<hostdev")) {
            assert_non_null(strstr(dev, "bus='0x5e'"));
            if (!strstr(dev, want))
                fail_msg("plugged: %s", dev);
            found = TRUE;
        }
    }
    assert_true(found);
}

static void test_bad_input(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(GError) error = NULL;

    {
        g_autoptr(OrchReport) report = NULL;
        options_for_test(&opts);
        g_free(opts.domain);
        opts.domain = g_strdup("nosuch");
        assert_false(migrate_on(&opts, &fo, &report, &error));
        assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_NO_DOMAIN));
        assert_non_null(strstr(error->message, "'nosuch'"));
        g_clear_error(&error);
        orch_options_clear(&opts);
    }
    {
        g_autoptr(OrchReport) report = NULL;
        options_for_test(&opts);
        g_free(opts.dest_uri);
        opts.dest_uri = g_strdup("bad://host");
        assert_false(migrate_on(&opts, &fo, &report, &error));
        assert_non_null(strstr(error->message, "bad://host"));
        assert_int_equal(report->failed_phase, ORCH_PHASE_CONNECT);
        g_clear_error(&error);
        orch_options_clear(&opts);
    }
    {
        g_autoptr(OrchReport) report = NULL;
        options_for_test(&opts);
        opts.target_vf = g_strdup("zz:1");
        assert_false(migrate_on(&opts, &fo, &report, &error));
        assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_INVALID));
        assert_non_null(strstr(error->message, "'zz:1'"));
        g_clear_error(&error);
    }
    assert_string_equal(w->where, "source");
    assert_int_equal(world_count_vfs(w), 2);
}

static void test_fault_spec_rejected(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
    FakeOpen fo = {w, "explode@source"};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    options_for_test(&opts);
    assert_false(migrate_on(&opts, &fo, &report, &error));
    assert_non_null(strstr(error->message, "unknown operation 'explode'"));
    assert_string_equal(w->where, "source");
}

static gboolean journal_exists(void)
{
    g_autofree char *path = g_build_filename(state_dir, "journal", DOMAIN ".journal", NULL);

    return g_file_test(path, G_FILE_TEST_EXISTS);
}

/* Recovers DOMAIN without faults: it must end on one host with all VFs and the agent resumed;
 * a second recovery finds nothing to do. */
static void recover_and_check(FakeWorld *w, const char *spec)
{
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(GPtrArray) results = NULL;
    g_autoptr(GError) error = NULL;
    OrchRecovery *rec;

    options_for_test(&opts);
    if (!recover_on(&opts, &fo, &results, &error))
        fail_msg("%s: recovery failed: %s", spec, error->message);
    assert_int_equal(results->len, 1);
    rec = g_ptr_array_index(results, 0);
    if (world_count_vfs(w) != 2 || w->agent_prepared) {
        for (guint i = 0; i < w->devices->len; i++)
            print_message("device: %s\n", (char *)g_ptr_array_index(w->devices, i));
        fail_msg("%s: after recovery %u VFs, agent %s", spec, world_count_vfs(w),
                 w->agent_prepared ? "prepared" : "running");
    }
    assert_string_equal(rec->final_host, w->where);
    assert_false(journal_exists());
    g_clear_pointer(&results, g_ptr_array_unref);
    assert_true(recover_on(&opts, &fo, &results, &error));
    assert_int_equal(results->len, 1);
    assert_string_equal(((OrchRecovery *)g_ptr_array_index(results, 0))->outcome,
                        "nothing to do");
}

/* The record recovery loads from a journal (OrchJournalRecord) as text, for comparing. */
static char *journal_record_text(const char *domain)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(OrchJournal) journal = orch_journal_open(state_dir, domain, FALSE, &error);
    g_autoptr(OrchJournalRecord) rec = NULL;
    g_autoptr(GString) out = g_string_new(NULL);

    if (!journal || !(rec = orch_journal_load(journal, &error)))
        fail_msg("%s: %s", domain, error->message);
#define OR_DASH(s) ((s) ? (s) : "-")
    /* Not the domain: the journals compared are of different domains. */
    g_string_append_printf(out, "%s %s %s agent=%d asked=%d channel=%s hotmigd=%s",
                           OR_DASH(rec->migration), OR_DASH(rec->source),
                           OR_DASH(rec->destination), rec->agent, rec->agent_asked,
                           OR_DASH(rec->agent_channel), OR_DASH(rec->hotmigd));
    for (guint i = 0; rec->vfs && i < rec->vfs->len; i++) {
        OrchJournalVf *vf = g_ptr_array_index(rec->vfs, i);

        g_string_append_printf(out, "; %s %s %s src=%s dst=%s lease=%s/%s unplug=%d",
                               OR_DASH(vf->alias), OR_DASH(vf->kind), OR_DASH(vf->host_pci),
                               OR_DASH(vf->source_xml), OR_DASH(vf->destination_xml),
                               OR_DASH(vf->lease_vf), OR_DASH(vf->lease_id), vf->unplug_asked);
    }
#undef OR_DASH
    return g_string_free(g_steal_pointer(&out), FALSE);
}

/* Writes a journal for @domain: the begin line, then @steps ("event" or "event alias"). */
static void journal_write(const char *domain, const char *const *steps)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(OrchJournal) journal = orch_journal_open(state_dir, domain, TRUE, &error);
    g_autoptr(OrchJournalRecord) rec = g_new0(OrchJournalRecord, 1);
    OrchJournalVf *vf = g_new0(OrchJournalVf, 1);

    assert_non_null(journal);
    rec->migration = g_strdup("m1");
    rec->domain = g_strdup(domain);
    rec->source = g_strdup("test:///a");
    rec->destination = g_strdup("test:///b");
    rec->agent = TRUE;
    rec->agent_channel = g_strdup("org.hotmig.agent.0");
    rec->vfs = g_ptr_array_new_with_free_func((GDestroyNotify)orch_journal_vf_free);
    vf->alias = g_strdup("hostdev0");
    vf->source_xml = g_strdup("<hostdev/>");
    vf->destination_xml = g_strdup("<hostdev planned/>");
    g_ptr_array_add(rec->vfs, vf);
    assert_true(orch_journal_begin(journal, rec, TRUE, &error));
    for (guint i = 0; steps[i]; i++) {
        g_auto(GStrv) words = g_strsplit(steps[i], " ", 2);
        const char *xml = g_str_equal(words[0], "plug") ? "<hostdev used/>" : NULL;

        assert_true(orch_journal_step(journal, "m1", words[0], words[1], xml, &error));
    }
}

/* The lines written without a sync of their own (journal.c: all but begin, prepare, unplug,
 * plug) may be lost in a crash: recovery must load the same record without them. Each one
 * after each durable prefix, and all of them together, change nothing it reads. */
static void test_journal_unsynced_lines_unread(void **state)
{
    static const char *const unsynced[] = {"migrate",        "migrated",       "resume",
                                           "undone unplug",  "undo-failed plug", "end ok",
                                           "end kept for recovery", NULL};
    static const char *const durable[] = {"prepare", "unplug hostdev0", "plug hostdev0", NULL};
    static const char *const all[] = {"prepare", "unplug hostdev0", "migrate", "migrated",
                                      "plug hostdev0", "resume", "undone unplug", "end ok", NULL};

    for (guint n = 0; n <= g_strv_length((GStrv)durable); n++) {
        g_autofree char *base_name = g_strdup_printf("jn-base-%u", n);
        g_autofree char *base = NULL;
        const char *prefix[8] = {NULL};

        for (guint i = 0; i < n; i++)
            prefix[i] = durable[i];
        journal_write(base_name, prefix);
        base = journal_record_text(base_name);
        for (guint u = 0; unsynced[u]; u++) {
            g_autofree char *name = g_strdup_printf("jn-%u-%u", n, u);
            g_autofree char *text = NULL;

            prefix[n] = unsynced[u];
            journal_write(name, prefix);
            text = journal_record_text(name);
            if (!g_str_equal(text, base))
                fail_msg("'%s' after %u durable step(s) changes what recovery reads:\n%s\n%s",
                         unsynced[u], n, text, base);
        }
        prefix[n] = NULL;
    }
    {
        g_autofree char *with = NULL;
        g_autofree char *without = NULL;

        journal_write("jn-all", all);
        journal_write("jn-durable", durable);
        with = journal_record_text("jn-all");
        without = journal_record_text("jn-durable");
        assert_string_equal(with, without);
        /* And what it reads is there: the prepare, the unplug, the plug's XML. */
        assert_non_null(strstr(with, "asked=1"));
        assert_non_null(strstr(with, "dst=<hostdev used/>"));
        assert_non_null(strstr(with, "unplug=1"));
    }
}

static void test_unfinished_blocks_then_recover(void **state)
{
    /* Every plug fails on both hosts: the undo cannot give the VFs back. */
    g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
    FakeOpen fo = {w, "device_attach"};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    options_for_test(&opts);
    assert_false(migrate_on(&opts, &fo, &report, &error));
    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_ROLLBACK));
    assert_non_null(strstr(error->message, "--recover"));
    assert_true(journal_exists());
    g_clear_error(&error);
    g_clear_pointer(&report, orch_report_free);

    /* A new migration of the same domain is refused until it is recovered. */
    fo.fault = NULL;
    assert_false(migrate_on(&opts, &fo, &report, &error));
    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_UNFINISHED));
    assert_non_null(strstr(error->message, "--recover vm1"));

    recover_and_check(w, "device_attach");
}

/* What a migrate-vm killed inside the unplug leaves: the journal's begin (its VFs as found in the
 * live XML now, with the attach XML the migration writes) and the prepare and unplug steps;
 * the agent prepared; libvirt with the detach's removal of the VF queued by its alias (its
 * 5 s wait outlived), the device still in the domain. Returns the VF's alias then. */
static char *kill_inside_unplug(FakeOpen *fo)
{
    FakeWorld *w = fo->world;
    g_autoptr(OrchVirt) src = fake_open("fake://a", "source", fo, NULL);
    g_autofree char *xml = orch_virt_domain_get_xml(src, DOMAIN, NULL);
    g_autoptr(XmlDomain) dom = xml_domain_parse(xml, NULL);
    g_autoptr(GPtrArray) vfs = xml_domain_find_vfs(dom, NULL, NULL);
    g_autoptr(OrchJournalRecord) rec = g_new0(OrchJournalRecord, 1);
    g_autoptr(OrchJournal) journal = NULL;
    g_autoptr(GError) error = NULL;
    XmlVf *vf;
    OrchJournalVf *jvf = g_new0(OrchJournalVf, 1);

    assert_int_equal(vfs->len, 1);
    vf = g_ptr_array_index(vfs, 0);
    rec->migration = g_strdup("0f0e0d0c-0b0a-4908-8706-050403020100");
    rec->domain = g_strdup(DOMAIN);
    rec->source = g_strdup("fake://a");
    rec->destination = g_strdup("fake://b");
    rec->agent = TRUE;
    rec->vfs = g_ptr_array_new_with_free_func((GDestroyNotify)orch_journal_vf_free);
    jvf->alias = g_strdup(vf->alias);
    jvf->kind = g_strdup(xml_vf_kind_to_string(vf->kind));
    jvf->host_pci = g_strdup(vf->host_pci);
    jvf->source_xml = xml_vf_format_attach(vf, vf->host_pci, &error);
    jvf->destination_xml = xml_vf_format_attach(vf, vf->host_pci ? "0000:5e:02.2" : NULL, &error);
    assert_null(error);
    g_ptr_array_add(rec->vfs, jvf);
    journal = orch_journal_open(state_dir, DOMAIN, TRUE, &error);
    assert_non_null(journal);
    assert_true(orch_journal_begin(journal, rec, TRUE, &error));
    assert_true(orch_journal_step(journal, rec->migration, "prepare", NULL, NULL, &error));
    w->agent_prepared = TRUE;
    assert_true(orch_journal_step(journal, rec->migration, "unplug", vf->alias, NULL, &error));
    g_ptr_array_add(w->queued_removals, g_strdup(vf->alias));
    return g_strdup(vf->alias);
}

/* A migrate-vm killed inside the unplug: libvirt still has the detach's removal of the VF
 * queued by its alias, and handles it after recovery's plug (issue 19: it took the re-plugged
 * stand-in NIC's backend). Recovery plugs the VF back under another alias, which the stale
 * removal does not find: "ua-hmvf0" <-> "ua-hmvf0-r" for the stand-in; libvirt's "hostdev0"
 * (which libvirt would give a hostdev plugged without an alias again) becomes "ua-hostdev0",
 * then "ua-hostdev0-r" <-> "ua-hostdev0". Killed and recovered three times in a row. */
static void test_recover_killed_in_unplug(void **state)
{
    static const struct {
        gboolean hostdev;
        const char *aliases[4]; /* before the first kill, then after each recovery */
    } cases[] = {
        {FALSE, {"ua-hmvf0", "ua-hmvf0-r", "ua-hmvf0", "ua-hmvf0-r"}},
        {TRUE, {"hostdev0", "ua-hostdev0", "ua-hostdev0-r", "ua-hostdev0"}},
    };

    for (gsize c = 0; c < G_N_ELEMENTS(cases); c++) {
        g_autoptr(FakeWorld) w = world_new(cases[c].hostdev, !cases[c].hostdev);
        FakeOpen fo = {w, NULL};
        g_auto(OrchOptions) opts;

        options_for_test(&opts);
        for (guint kill = 1; kill < G_N_ELEMENTS(cases[c].aliases); kill++) {
            g_autofree char *before = kill_inside_unplug(&fo);
            g_autoptr(GPtrArray) results = NULL;
            g_autoptr(GError) error = NULL;
            g_autofree char *table = NULL;
            g_autofree char *after = NULL;
            OrchRecovery *rec;

            assert_string_equal(before, cases[c].aliases[kill - 1]);
            if (!recover_on(&opts, &fo, &results, &error))
                fail_msg("kill %u of '%s': %s", kill, before, error->message);
            rec = g_ptr_array_index(results, 0);
            table = orch_recovery_format_table(results);
            /* The stale removal was handled after the plug: the VF is there all the same. */
            assert_int_equal(w->queued_removals->len, 0);
            if (world_count_vfs(w) != 1)
                fail_msg("kill %u of '%s': the domain lost its VF to the queued removal:\n%s",
                         kill, before, table);
            after = device_alias(g_ptr_array_index(w->devices, w->devices->len - 1));
            assert_string_equal(after, cases[c].aliases[kill]);
            assert_string_equal(rec->outcome, "rolled back");
            assert_int_equal(rec->vfs_attached, 1);
            assert_non_null(strstr(table, "finish-unplug"));
            assert_non_null(strstr(table, after));
            assert_false(w->agent_prepared);
            assert_false(journal_exists());
            assert_string_equal(w->where, "source");
        }
    }
}

/* The agent stops answering in the middle of a prepare (e2e: tests/e2e/agent-stops.sh): the
 * undo cannot resume it, so exit 3 with the journal kept and the VFs untouched; once the agent
 * answers again, the recovery resumes it. */
static void test_agent_stops_in_prepare(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    options_for_test(&opts);
    w->agent_mode = AGENT_STOPS_IN_PREPARE;
    assert_false(migrate_on(&opts, &fo, &report, &error));
    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_ROLLBACK));
    assert_non_null(strstr(error->message, "Phase 'prepare' failed"));
    assert_int_equal(report->failed_phase, ORCH_PHASE_PREPARE);
    assert_true(w->agent_prepared);
    assert_string_equal(w->where, "source");
    assert_int_equal(world_count_vfs(w), 2);
    assert_int_equal(w->migrations, 0);
    assert_true(journal_exists());

    w->agent_mode = AGENT_OK;
    recover_and_check(w, "agent stops in prepare");
}

/* While one process holds a domain's journal lock, a migration of that domain is refused and
 * changes nothing. (flock locks belong to open file descriptions: a second open in this same
 * process conflicts like another process would.) */
static void test_busy_domain_refused(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(OrchJournal) held = orch_journal_open(state_dir, DOMAIN, TRUE, &error);

    assert_non_null(held);
    options_for_test(&opts);
    assert_false(migrate_on(&opts, &fo, &report, &error));
    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_BUSY));
    assert_non_null(strstr(error->message, "under way"));
    assert_string_equal(w->where, "source");
    assert_int_equal(w->migrations, 0);
    assert_true(orch_journal_finish(held, NULL));
}


/* One VF, one RDMA device: the destination VF gets the guest's node GUID (and the port GUID of
 * its first GID) through hotmigd while the source VF is unplugged, before anything moves. */
static void test_identity_carried(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, FALSE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;
    const char *detail;

    /* The source host knows the GUIDs its VF carries; the guest agrees. */
    w->src_node_guid = 0x0002c90300a1b2c3;
    w->src_port_guid = 0x0002c90300a1b2c4;
    options_for_test(&opts);
    assert_true(migrate_on(&opts, &fo, &report, &error));
    /* The source host's identity is asked for while the lease is taken: any order. */
    assert_non_null(strstr(w->vfd_log->str, "lease;"));
    assert_non_null(strstr(w->vfd_log->str, "ib_identity;identity 0000:5e:02.2 0002c90300a1b2c3;"));
    detail = report->phases[ORCH_PHASE_UNPLUG].detail;
    if (!strstr(detail, "node GUID 0002:c903:00a1:b2c3, port GUID 0002:c903:00a1:b2c4"))
        fail_msg("unplug detail: %s", detail);
    assert_true(g_hash_table_contains(w->assigned, "0000:5e:02.2"));
}

/* The guest claims another VF's GUIDs (0002:c903:00a1:b2c3, in the fake agent's inventory):
 * what is carried is what the source host knows, and the claim is reported, never applied
 * (issue 15, item 1). Before the fix the identity request carried the guest's GUID. */
static void test_identity_from_host_not_guest(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, FALSE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;
    const char *detail;

    w->src_node_guid = 0x0002c90300ee0001;
    w->src_port_guid = 0x0002c90300ee0002;
    options_for_test(&opts);
    assert_true(migrate_on(&opts, &fo, &report, &error));
    if (!strstr(w->vfd_log->str, "host-identity 0000:3b:02.1@https://a:16680;") ||
        !strstr(w->vfd_log->str, "identity 0000:5e:02.2 0002c90300ee0001;"))
        fail_msg("hotmigd calls: %s", w->vfd_log->str);
    /* No identity request carries the guest's GUID. */
    assert_null(strstr(w->vfd_log->str, "0002c90300a1b2c3"));
    detail = report->phases[ORCH_PHASE_UNPLUG].detail;
    if (!strstr(detail, "the guest claims node GUID 0002:c903:00a1:b2c3") ||
        !strstr(detail, "not taken"))
        fail_msg("unplug detail: %s", detail);
}

/* The source host does not know its VF's GUIDs (no record, a driver that reports none): no
 * identity is carried at all, whatever the guest claims. */
static void test_identity_unknown_to_host(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, FALSE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;
    const char *detail;

    options_for_test(&opts);
    assert_true(migrate_on(&opts, &fo, &report, &error));
    if (strstr(w->vfd_log->str, "identity 0000:5e:02.2"))
        fail_msg("an identity was set: %s", w->vfd_log->str);
    detail = report->phases[ORCH_PHASE_UNPLUG].detail;
    if (!strstr(detail, "identity not carried over: the source host does not know the GUIDs") ||
        !strstr(detail, "the guest's own claim is not taken"))
        fail_msg("unplug detail: %s", detail);
}

/* Issue 15, item 4: a 2 s lease under a 5 s copy. The migration renews it (a third of its TTL),
 * so a second client's lease attempt mid-copy fails and the plug finds the lease still its
 * own. Without the renewals the lease expired under the copy and the other client took the VF. */
static void test_lease_renewed_under_long_copy(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, FALSE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    w->lease_ttl_s = 2;
    w->migrate_sleep_ms = 5000;
    options_for_test(&opts);
    if (!migrate_on(&opts, &fo, &report, &error))
        fail_msg("migration: %s", error->message);
    assert_true(w->mid_copy_tried);
    assert_false(w->mid_copy_taken);
    assert_true(w->renewals >= 3);
    assert_string_equal(w->where, "destination");
}

/* Issue 21: a lease taken less than half its TTL ago is surely still held (only its holder can
 * release it): the plug does not renew it first, a request less between the copy and the plug.
 * Longer copies renew (test_lease_renewed_under_long_copy, test_lease_lost_before_plug). */
static void test_plug_trusts_fresh_lease(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, FALSE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    w->lease_ttl_s = 60;
    options_for_test(&opts);
    if (!migrate_on(&opts, &fo, &report, &error))
        fail_msg("migration: %s", error->message);
    assert_int_equal(w->renewals, 0);
    assert_string_equal(w->where, "destination");
}

/* The lease is lost anyway (the keeper's renewals fail): the plug refuses a VF that may be
 * another migration's by now, and the domain goes back with its VF. */
static void test_lease_lost_before_plug(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, FALSE);
    FakeOpen fo = {w, "vfd_renew"};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    w->lease_ttl_s = 1;
    w->migrate_sleep_ms = 2500;
    options_for_test(&opts);
    assert_false(migrate_on(&opts, &fo, &report, &error));
    assert_int_equal(report->failed_phase, ORCH_PHASE_PLUG);
    if (!strstr(error->message, "was lost before the plug"))
        fail_msg("error: %s", error->message);
    assert_true(w->mid_copy_taken);
    assert_string_equal(w->where, "source");
    assert_int_equal(world_count_vfs(w), 1);
}

/* Issue 15, item 11: migrate-vm's journals and locks are hotmigd's ([hotmigd] state-dir), so
 * the per-domain lock keeps the two apart whatever the configuration says. */
static void test_state_dir_shared(void **state)
{
    static const char conf[] = "[hotmigd]\nstate-dir = /srv/hotmig-state\n";
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfig) config = hm_config_load_data(conf, sizeof(conf) - 1, "s.conf", &error);
    g_auto(OrchOptions) opts;

    assert_non_null(config);
    orch_options_init(&opts);
    orch_options_take_config(&opts, config);
    assert_string_equal(opts.state_dir, "/srv/hotmig-state");
}

/* A hostile guest answers inventory with 60 000 nested brackets (within the 64 KiB line
 * limit): the nesting is refused before json-glib sees it, the migration goes on without the
 * guest's view (issue 15, item 6). */
static void test_agent_deep_nesting(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, FALSE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;
    const char *detail;

    w->agent_mode = AGENT_DEEP_INVENTORY;
    options_for_test(&opts);
    assert_true(migrate_on(&opts, &fo, &report, &error));
    detail = report->phases[ORCH_PHASE_UNPLUG].detail;
    if (!strstr(detail, "JSON nests deeper than 32 levels"))
        fail_msg("unplug detail: %s", detail);
    assert_string_equal(w->where, "destination");
}

/* Issue 21: the source's agent gets the handshake, info and inventory in one write (one guest
 * round trip instead of three); all three replies are read, so the prepare goes in a write of
 * its own without a new handshake. The processes the inventory lists reach the jobs check. */
static void test_agent_pipelined(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, FALSE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    w->processes = JOB_PEERS;
    options_for_test(&opts);
    if (!migrate_on(&opts, &fo, &report, &error))
        fail_msg("%s", error->message);
    assert_string_equal(w->agent_writes->str, "source: sync,info,inventory;source: prepare;"
                                              "destination: sync;destination: resume;");
    if (!strstr(report->phases[ORCH_PHASE_TARGET_VF].detail, "pauses 1 peer connection(s)"))
        fail_msg("target-vf detail: %s", report->phases[ORCH_PHASE_TARGET_VF].detail);
    assert_string_equal(report->phases[ORCH_PHASE_PREPARE].detail,
                        "1 process(es) quiesced: mpi[7]");
    assert_false(w->agent_prepared);
}

/* info fails (an error reply, no reply, a reply that is not JSON) with the inventory asked in
 * the same write: the migration goes on without the guest's view, as it did when each was
 * asked in turn, and says why (info's message). The replies still expected are dropped: the
 * prepare comes after a new handshake, so no stale reply is taken for its own. */
static void test_agent_info_fails(void **state)
{
    static const struct {
        FakeAgentMode mode;
        const char *why;
    } cases[] = {
        {AGENT_INFO_FAILS, "no guest view: no inventory from the agent (Agent command 'info' "
                           "failed: Unsupported: no protocol 2 today)"},
        {AGENT_INFO_SILENT, "no guest view: no inventory from the agent (Agent command 'info': "
                            "Timed out (fake))"},
        {AGENT_INFO_GARBLED, "no guest view: no inventory from the agent (Agent command 'info': "
                             "The guest agent sent bad JSON"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(FakeWorld) w = world_new(TRUE, FALSE);
        FakeOpen fo = {w, NULL};
        g_auto(OrchOptions) opts;
        g_autoptr(OrchReport) report = NULL;
        g_autoptr(GError) error = NULL;
        const char *detail;

        w->agent_mode = cases[i].mode;
        options_for_test(&opts);
        if (!migrate_on(&opts, &fo, &report, &error))
            fail_msg("case %zu: %s", i, error->message);
        assert_string_equal(w->where, "destination");
        assert_false(w->agent_prepared);
        detail = report->phases[ORCH_PHASE_UNPLUG].detail;
        if (!strstr(detail, cases[i].why))
            fail_msg("case %zu: unplug detail: %s", i, detail);
        if (!g_str_has_prefix(w->agent_writes->str,
                              "source: sync,info,inventory;source: sync;source: prepare;"))
            fail_msg("case %zu: agent writes: %s", i, w->agent_writes->str);
        assert_string_equal(report->phases[ORCH_PHASE_PREPARE].detail,
                            "1 process(es) quiesced: mpi[7]");
    }
}

/* The phase's object in the report's JSON @json (owned root in *keep). */
static JsonObject *json_phase(const char *json, const char *name, JsonNode **keep)
{
    g_autoptr(GError) error = NULL;
    JsonArray *phases;

    *keep = json_from_string(json, &error);
    if (!*keep)
        fail_msg("report JSON: %s", error->message);
    phases = json_object_get_array_member(json_node_get_object(*keep), "phases");
    for (guint i = 0; i < json_array_get_length(phases); i++) {
        JsonObject *p = json_array_get_object_element(phases, i);

        if (g_str_equal(json_object_get_string_member(p, "name"), name))
            return p;
    }
    fail_msg("no phase '%s' in %s", name, json);
    return NULL;
}

/* The "standby" of phase @name in the report's JSON @json has exactly the 3 members @names
 * with @values. */
static void assert_phase_standby(const char *json, const char *name, const char *const *names,
                                 const gint64 *values)
{
    g_autoptr(JsonNode) root = NULL;
    JsonObject *phase = json_phase(json, name, &root);
    JsonObject *sb;

    assert_true(json_object_has_member(phase, "standby"));
    sb = json_object_get_object_member(phase, "standby");
    assert_int_equal(json_object_get_size(sb), 3);
    for (guint k = 0; k < 3; k++)
        if (!json_object_has_member(sb, names[k]) ||
            json_object_get_int_member(sb, names[k]) != values[k])
            fail_msg("%s: standby.%s is not %" G_GINT64_FORMAT " in %s", name, names[k], values[k],
                     json);
}

/* A process record of the fake agent's answers with the standby record "standby":{...} */
#define SB_PROC(pid, used, sw, pa, se, re, ms)                                                     \
    "{\"pid\":" pid ",\"name\":\"p" pid "\",\"mode\":\"lazy\",\"standby\":{\"used\":" used         \
    ",\"switched\":" sw ",\"paused\":" pa ",\"sends\":" se ",\"receives\":" re ",\"ms\":" ms "}}"

/* Three processes, one without a record; two of them at the resume */
#define SB_THREE_QUIESCED                                                                          \
    "[" SB_PROC("7", "true", "3", "1", "0", "0", "42") "," SB_PROC(                                \
        "8", "true", "2", "0", "0", "0", "50") ",{\"pid\":9,\"name\":\"c\",\"mode\":\"lazy\"}]"
#define SB_TWO_RESUMED                                                                             \
    "[" SB_PROC("7", "true", "3", "1", "1234", "1230",                                             \
                "17") "," SB_PROC("8", "true", "2", "0", "9007199254740991", "6", "9") "]"

/* Issue 30 item 3: the processes' "standby" records of the prepare and resume answers, summed,
 * in the two phases' details and as their JSON "standby" members (the switch: switched, paused,
 * the longest pause; the switch back: sends, receives, the longest pause). Without records, or
 * with no process that had a standby device, neither: an older agent reads as before. Records
 * out of shape or range are left out (said in the detail); the migration goes on. */
static void test_standby_report(void **state)
{
    static const struct {
        const char *quiesced, *resumed;
        const char *prepare_detail, *resume_detail; /* NULL: no standby text, no member */
    } cases[] = {
        {NULL, NULL, NULL, NULL},
        {"[" SB_PROC("7", "false", "0", "4", "0", "0", "0") "]",
         "[" SB_PROC("7", "false", "0", "4", "0", "0", "0") "]", NULL, NULL},
        {SB_THREE_QUIESCED, SB_TWO_RESUMED,
         "3 process(es) quiesced: p7[7], p8[8], c[9]; standby: 5 connection(s) switched, 1 "
         "paused until the resume, switch pause 50 ms",
         "2 process(es) resumed on mlx5_0; standby: carried 9007199254742225 sends and 1236 "
         "receives, switch-back pause 17 ms"},
        {"[" SB_PROC("7", "true", "65537", "1", "0", "0", "4") "]",
         "[{\"pid\":7,\"name\":\"p7\",\"mode\":\"lazy\",\"standby\":[]}]",
         "1 process(es) quiesced: p7[7]; standby figures left out: The agent's standby figures "
         "are malformed: 'switched' of process 0 in 'quiesced'",
         "1 process(es) resumed on mlx5_0; standby figures left out: The agent's standby figures "
         "are malformed: 'standby' of process 0 in 'resumed'"},
        /* a standby device, but the peer could not follow: no switch, no pause of one, and
         * nothing the switch back could have carried */
        {"[" SB_PROC("7", "true", "0", "1", "0", "0", "0") "]",
         "[" SB_PROC("7", "true", "0", "1", "0", "0", "0") "]",
         "1 process(es) quiesced: p7[7]; standby: 0 connection(s) switched, 1 paused until the "
         "resume",
         "1 process(es) resumed on mlx5_0"},
    };

    (void)state;
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(FakeWorld) w = world_new(TRUE, FALSE);
        FakeOpen fo = {w, NULL};
        g_auto(OrchOptions) opts;
        g_autoptr(OrchReport) report = NULL;
        g_autoptr(GError) error = NULL;
        g_autoptr(JsonNode) root = NULL;
        g_autofree char *json = NULL;
        const OrchPhaseRecord *prep, *res;
        JsonObject *phase;

        w->quiesced = cases[i].quiesced;
        w->resumed = cases[i].resumed;
        options_for_test(&opts);
        if (!migrate_on(&opts, &fo, &report, &error))
            fail_msg("case %zu: %s", i, error->message);
        prep = &report->phases[ORCH_PHASE_PREPARE];
        res = &report->phases[ORCH_PHASE_RESUME];
        json = orch_report_format_json(report, FALSE);
        if (!cases[i].prepare_detail || strstr(cases[i].prepare_detail, "left out")) {
            if (!cases[i].prepare_detail) {
                assert_true(g_str_has_prefix(prep->detail, "1 process(es) quiesced: "));
                assert_null(strstr(prep->detail, "standby"));
                assert_string_equal(res->detail, "1 process(es) resumed on mlx5_0");
            } else {
                assert_string_equal(prep->detail, cases[i].prepare_detail);
                assert_string_equal(res->detail, cases[i].resume_detail);
            }
            assert_false(prep->standby.used);
            assert_false(res->standby.used);
            assert_null(strstr(json, "\"standby\""));
            continue;
        }
        assert_string_equal(prep->detail, cases[i].prepare_detail);
        assert_string_equal(res->detail, cases[i].resume_detail);
        if (prep->standby.switched == 0) {
            assert_phase_standby(json, "prepare", (const char *[]){"switched", "paused", "ms"},
                                 (const gint64[]){0, 1, 0});
            assert_phase_standby(json, "resume", (const char *[]){"sends", "receives", "ms"},
                                 (const gint64[]){0, 0, 0});
            continue;
        }
        assert_phase_standby(json, "prepare", (const char *[]){"switched", "paused", "ms"},
                             (const gint64[]){5, 1, 50});
        assert_phase_standby(json, "resume", (const char *[]){"sends", "receives", "ms"},
                             (const gint64[]){9007199254742225, 1236, 17});
        phase = json_phase(json, "migrate", &root);
        assert_false(json_object_has_member(phase, "standby"));
    }
}

/* The first handshake's reply comes after an earlier sync's (a retried open: the agent's
 * queued output reaches the new stream): it starts with its own 0xFF and is found, without a
 * second handshake. It was skipped as bad JSON, and the open tried again on a new channel. */
static void test_agent_stale_sync(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, FALSE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    w->agent_mode = AGENT_STALE_SYNC;
    options_for_test(&opts);
    if (!migrate_on(&opts, &fo, &report, &error))
        fail_msg("%s", error->message);
    if (!g_str_has_prefix(w->agent_writes->str, "source: sync,info,inventory;source: prepare;"))
        fail_msg("agent writes: %s", w->agent_writes->str);
}

/* hotmigd refuses to give the identity (asked while the VF is unplugged): the domain has not
 * moved; the VF is plugged back, the processes resumed, the lease released. */
static void test_identity_refused(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, FALSE);
    FakeOpen fo = {w, "vfd_ib_identity"};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;

    w->src_node_guid = 0x0002c90300a1b2c3;
    w->src_port_guid = 0x0002c90300a1b2c4;
    options_for_test(&opts);
    assert_false(migrate_on(&opts, &fo, &report, &error));
    assert_int_equal(report->failed_phase, ORCH_PHASE_UNPLUG);
    assert_non_null(strstr(error->message, "node GUID 0002:c903:00a1:b2c3"));
    assert_string_equal(w->where, "source");
    assert_int_equal(world_count_vfs(w), 1);
    assert_false(w->agent_prepared);
    assert_int_equal(g_hash_table_size(w->leases), 0);
    assert_int_equal(g_hash_table_size(w->assigned), 0);
}

/* The destination's hotmigd does not take a lease back while a failed migration is undone
 * (after target-vf, and after migrate): the migration ends undone as it would have, no
 * journal is kept, the report lists the failed release, and the lease stays with hotmigd until
 * it expires (it was never confirmed). */
static void test_lease_release_fails(void **state)
{
    static const struct {
        const char *fault;
        OrchPhase phase;
    } cases[] = {
        {"vfd_lease@destination#2,vfd_release@destination#1", ORCH_PHASE_TARGET_VF},
        {"migrate@source#1,vfd_release@destination#1", ORCH_PHASE_MIGRATE},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
        FakeOpen fo = {w, cases[i].fault};
        g_auto(OrchOptions) opts;
        g_autoptr(OrchReport) report = NULL;
        g_autoptr(GError) error = NULL;
        gboolean release_failed = FALSE;

        options_for_test(&opts);
        assert_false(migrate_on(&opts, &fo, &report, &error));
        assert_int_equal(report->failed_phase, cases[i].phase);
        assert_false(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_ROLLBACK));
        assert_false(journal_exists());
        assert_string_equal(w->where, "source");
        assert_int_equal(world_count_vfs(w), 2);
        assert_false(w->agent_prepared);
        assert_int_equal(g_hash_table_size(w->leases), 1);
        assert_int_equal(g_hash_table_size(w->assigned), 0);
        for (guint r = 0; r < report->rollback->len; r++) {
            OrchRollbackRecord *rec = g_ptr_array_index(report->rollback, r);

            release_failed = release_failed || (g_str_equal(rec->action, "release-lease") &&
                                                !rec->ok && strstr(rec->detail, "injected"));
        }
        assert_true(release_failed);
    }
}

/* The destination's hotmigd cannot be reached for a while after the migrate phase failed (it
 * restarts): the undo's release is asked again until it gets through, and the lease goes. */
static void test_lease_release_retried(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
    FakeOpen fo = {w, "migrate@source#1"};
    g_auto(OrchOptions) opts;
    g_autoptr(OrchReport) report = NULL;
    g_autoptr(GError) error = NULL;
    gboolean released = FALSE;

    (void)state;
    w->release_unreachable = 2;
    options_for_test(&opts);
    assert_false(migrate_on(&opts, &fo, &report, &error));
    assert_int_equal(report->failed_phase, ORCH_PHASE_MIGRATE);
    assert_string_equal(w->where, "source");
    assert_int_equal(world_count_vfs(w), 2);
    assert_int_equal(g_hash_table_size(w->leases), 0); /* both, after two refused connections */
    assert_int_equal(g_hash_table_size(w->assigned), 0);
    assert_non_null(strstr(w->vfd_log->str, "release;release;release;"));
    for (guint r = 0; r < report->rollback->len; r++) {
        OrchRollbackRecord *rec = g_ptr_array_index(report->rollback, r);

        released = released || (g_str_equal(rec->action, "release-lease") && rec->ok);
    }
    assert_true(released);
}

/* No free VF of the model on the destination, or its hotmigd is down: target-vf fails, nothing
 * changes, and no lease is left behind. */
static void test_no_free_vf(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
    FakeOpen fo = {w, NULL};
    g_auto(OrchOptions) opts;
    g_autoptr(GError) error = NULL;

    g_hash_table_insert(w->leases, g_strdup("0000:5e:02.2"), g_strdup("x"));
    g_hash_table_insert(w->leases, g_strdup("0000:5e:02.3"), g_strdup("y"));
    {
        g_autoptr(OrchReport) report = NULL;

        options_for_test(&opts);
        assert_false(migrate_on(&opts, &fo, &report, &error));
        assert_int_equal(report->failed_phase, ORCH_PHASE_TARGET_VF);
        assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_CONFLICT));
        /* The error names the VF and its VM. */
        if (!strstr(error->message, "Leasing a VF for 'hostdev0' of '" DOMAIN "' on the destination"))
            fail_msg("error: %s", error->message);
        g_clear_error(&error);
        orch_options_clear(&opts);
    }
    assert_int_equal(g_hash_table_size(w->leases), 2); /* the others' leases, not ours */
    g_hash_table_remove_all(w->leases);
    /* The stand-in's tap is taken: the hostdev's lease, taken first, is given back. */
    g_hash_table_insert(w->leases, g_strdup("hmtap1"), g_strdup("z"));
    {
        g_autoptr(OrchReport) report = NULL;

        options_for_test(&opts);
        assert_false(migrate_on(&opts, &fo, &report, &error));
        assert_int_equal(report->failed_phase, ORCH_PHASE_TARGET_VF);
        assert_int_equal(g_hash_table_size(w->leases), 1);
        assert_non_null(strstr(w->vfd_log->str, "lease;lease;release;"));
        g_clear_error(&error);
        orch_options_clear(&opts);
    }
    {
        g_autoptr(OrchReport) report = NULL;

        options_for_test(&opts);
        g_free(opts.hotmigd_url);
        opts.hotmigd_url = g_strdup("https://down:16680");
        assert_false(migrate_on(&opts, &fo, &report, &error));
        assert_int_equal(report->failed_phase, ORCH_PHASE_TARGET_VF);
        assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE));
        assert_non_null(strstr(error->message, "https://down:16680"));
    }
    assert_string_equal(w->where, "source");
    assert_int_equal(world_count_vfs(w), 2);
    assert_int_equal(w->migrations, 0);
    assert_null(strstr(w->vfd_log->str, "left ")); /* the domain left nothing */
}

static OrchCheckStatus check_status(GPtrArray *checks, const char *name, const char **ret_detail)
{
    for (guint i = 0; i < checks->len; i++) {
        OrchCheck *check = g_ptr_array_index(checks, i);

        if (g_str_equal(check->name, name)) {
            if (ret_detail)
                *ret_detail = check->detail;
            return check->status;
        }
    }
    fail_msg("no check '%s'", name);
    return ORCH_CHECK_LAST;
}

/* --dry-run: every check passes on a good case; each bad case fails its own line, and
 * nothing changes on either host. */
/* --dry-run: the peers a move pauses; a refused call fails the check unless --force. */
static void test_preflight_jobs(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
    FakeOpen fo = {w, NULL};
    const char *detail = NULL;
    struct {
        const char *processes;
        gboolean force;
        OrchCheckStatus status;
        const char *needle;
    } cases[] = {
        {JOB_PEERS, FALSE, ORCH_CHECK_PASS,
         "pauses 1 peer connection(s) of 1 process(es): 'verbs:xdlu' (pid 1802): "
         "::ffff:198.51.100.2 QP 18"},
        {"[]", FALSE, ORCH_CHECK_PASS, "0 process(es) registered, no peer connection"},
        {JOB_REFUSED, FALSE, ORCH_CHECK_FAIL,
         "process 'verbs:xdlu' (pid 1802) used ibv_alloc_mw, which a migration cannot carry: "
         "the move will be refused (--force moves anyway)"},
        {JOB_REFUSED, TRUE, ORCH_CHECK_PASS, "--force moves anyway (a registered process is paused"},
        {"[{\"pid\":0,\"name\":\"x\"}]", FALSE, ORCH_CHECK_FAIL, "'pid' of process 0"},
        /* issue 29 item 5: it used to PASS "0 process(es) registered" */
        {JOB_UNREGISTERED, FALSE, ORCH_CHECK_FAIL,
         "process 'ibv_rc_pingpong' (pid 812) holds the RDMA device uverbs0 without the hotmig "
         "verbs layer or libhotmig, which a migration cannot carry: the move will be refused "
         "(--force moves anyway)"},
        {JOB_UNREGISTERED, TRUE, ORCH_CHECK_PASS, "one that did not register loses the device"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_auto(OrchOptions) opts;
        g_autoptr(GPtrArray) checks = NULL;
        g_autoptr(GError) error = NULL;
        gboolean ok;

        options_for_test(&opts);
        opts.force = cases[i].force;
        w->processes = cases[i].processes;
        ok = preflight_on(&opts, &fo, &checks, &error);
        assert_int_equal(ok, cases[i].status == ORCH_CHECK_PASS);
        assert_int_equal(check_status(checks, "jobs", &detail), cases[i].status);
        if (!strstr(detail, cases[i].needle))
            fail_msg("case %zu: '%s' lacks '%s'", i, detail, cases[i].needle);
    }
}

static void test_preflight(void **state)
{
    g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
    FakeOpen fo = {w, NULL};
    const char *detail = NULL;

    {
        g_auto(OrchOptions) opts;
        g_autoptr(GPtrArray) checks = NULL;
        g_autoptr(GError) error = NULL;
        g_autofree char *table = NULL;
        g_autofree char *json = NULL;

        options_for_test(&opts);
        assert_true(preflight_on(&opts, &fo, &checks, &error));
        table = orch_checks_format_table(checks);
        for (guint i = 0; i < checks->len; i++) {
            OrchCheck *check = g_ptr_array_index(checks, i);

            if (check->status != ORCH_CHECK_PASS)
                fail_msg("%s", table);
        }
        assert_int_equal(check_status(checks, "target-vf", &detail), ORCH_CHECK_PASS);
        assert_non_null(strstr(detail, "hostdev0 -> 0000:5e:02.2, ua-hmvf0 -> hmtap1"));
        assert_int_equal(check_status(checks, "migration-port", &detail), ORCH_CHECK_PASS);
        assert_non_null(strstr(detail, "127.0.0.1"));
        json = orch_checks_format_json(checks, FALSE);
        assert_non_null(strstr(json, "\"ok\":true"));
    }
    /* No free VF: the stand-in's tap is leased by someone else. */
    g_hash_table_insert(w->leases, g_strdup("hmtap1"), g_strdup("z"));
    {
        g_auto(OrchOptions) opts;
        g_autoptr(GPtrArray) checks = NULL;
        g_autoptr(GError) error = NULL;

        options_for_test(&opts);
        assert_false(preflight_on(&opts, &fo, &checks, &error));
        assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_PREFLIGHT));
        assert_int_equal(check_status(checks, "target-vf", &detail), ORCH_CHECK_FAIL);
        if (!strstr(detail, "'hmtap1' is leased by 'someone' (a test)") ||
            !strstr(detail, "of '" DOMAIN "' on the destination"))
            fail_msg("detail: %s", detail);
        assert_int_equal(check_status(checks, "hotmigd", NULL), ORCH_CHECK_PASS);
    }
    g_hash_table_remove_all(w->leases);
    /* Unknown domain. */
    {
        g_auto(OrchOptions) opts;
        g_autoptr(GPtrArray) checks = NULL;
        g_autoptr(GError) error = NULL;

        options_for_test(&opts);
        g_free(opts.domain);
        opts.domain = g_strdup("nosuch");
        assert_false(preflight_on(&opts, &fo, &checks, &error));
        assert_int_equal(check_status(checks, "domain", &detail), ORCH_CHECK_FAIL);
        assert_non_null(strstr(detail, "'nosuch' is not defined"));
        assert_int_equal(check_status(checks, "agent", NULL), ORCH_CHECK_SKIP);
    }
    /* The agent does not answer. */
    w->agent_mode = AGENT_SILENT;
    {
        g_auto(OrchOptions) opts;
        g_autoptr(GPtrArray) checks = NULL;
        g_autoptr(GError) error = NULL;

        options_for_test(&opts);
        opts.agent_timeout_ms = 100;
        assert_false(preflight_on(&opts, &fo, &checks, &error));
        assert_int_equal(check_status(checks, "agent", &detail), ORCH_CHECK_FAIL);
        assert_non_null(strstr(detail, "--no-agent"));
        assert_int_equal(check_status(checks, "target-vf", NULL), ORCH_CHECK_PASS);
    }
    w->agent_mode = AGENT_OK;
    /* The destination lacks the domain's kernel. */
    w->kernel = "/images/missing-vmlinuz";
    {
        g_auto(OrchOptions) opts;
        g_autoptr(GPtrArray) checks = NULL;
        g_autoptr(GError) error = NULL;

        options_for_test(&opts);
        assert_false(preflight_on(&opts, &fo, &checks, &error));
        assert_int_equal(check_status(checks, "files", &detail), ORCH_CHECK_FAIL);
        assert_non_null(strstr(detail, "lacks 1 of the domain's 1 file(s): '/images/missing-vmlinuz'"));
    }
    w->kernel = "/images/vmlinuz";
    /* The destination cannot provide the domain's CPU; its hotmigd is down. */
    w->cpu_model = "NoSuchCPU";
    {
        g_auto(OrchOptions) opts;
        g_autoptr(GPtrArray) checks = NULL;
        g_autoptr(GError) error = NULL;

        options_for_test(&opts);
        g_free(opts.hotmigd_url);
        opts.hotmigd_url = g_strdup("https://down:16680");
        assert_false(preflight_on(&opts, &fo, &checks, &error));
        assert_int_equal(check_status(checks, "cpu", &detail), ORCH_CHECK_FAIL);
        assert_non_null(strstr(detail, "cannot provide the domain's CPU"));
        assert_int_equal(check_status(checks, "hotmigd", &detail), ORCH_CHECK_FAIL);
        assert_non_null(strstr(detail, "https://down:16680"));
        assert_int_equal(check_status(checks, "target-vf", NULL), ORCH_CHECK_SKIP);
    }
    /* Nothing changed anywhere. */
    assert_string_equal(w->where, "source");
    assert_int_equal(world_count_vfs(w), 2);
    assert_int_equal(w->migrations, 0);
    assert_false(w->agent_prepared);
    assert_int_equal(g_hash_table_size(w->leases) + g_hash_table_size(w->assigned), 0);
}

/* Fails every adapter call in turn, on each host, and checks the invariant. */
static void test_fault_walk(void **state)
{
    static const char *ops[] = {"domain_state", "domain_is_persistent", "domain_get_xml",
                                "device_detach", "device_attach", "migrate", "domain_abort_job",
                                "channel_open",
                                "channel_send", "channel_recv", "nodedev_list_pci_xml",
                                "domain_list_xml", "vfd_lease", "vfd_confirm", "vfd_release",
                                "vfd_ib_identity", "vfd_left", "watch_migrated_in"};
    static const char *labels[] = {"source", "destination"};
    /* Operations one failure of which does not fail a migration: a failed attach is tried
     * again (test_plug_other_vf fails two), the job is aborted and the domains listed only
     * while undoing or for hotmigd's inventory, a lease that cannot be confirmed or released
     * expires, the source's "VF left" keeps its lease, the fake VFs ask for no IB identity. */
    static const char *absorbed[] = {"device_attach", "domain_abort_job", "domain_list_xml",
                                     "vfd_confirm",   "vfd_release",      "vfd_left",
                                     "vfd_ib_identity", "watch_migrated_in", NULL};
    guint runs = 0;
    guint failures = 0;
    guint failures_of[2 * G_N_ELEMENTS(ops)] = {0};

    /* Each operation with a transient domain, then with a defined one moved with --persistent
     * --undefinesource. */
    for (gsize o = 0; o < 2 * G_N_ELEMENTS(ops); o++) {
        const char *op = ops[o % G_N_ELEMENTS(ops)];
        gboolean defined = o >= G_N_ELEMENTS(ops);

        for (gsize l = 0; l < G_N_ELEMENTS(labels); l++) {
            for (guint nth = 1; nth <= 6; nth++) {
                g_autoptr(FakeWorld) w = world_new(TRUE, TRUE);
                g_autofree char *spec = g_strdup_printf("%s@%s#%u", op, labels[l], nth);
                FakeOpen fo = {w, spec};
                g_auto(OrchOptions) opts;
                g_autoptr(OrchReport) report = NULL;
                g_autoptr(GError) error = NULL;
                gboolean ok;

                options_for_test(&opts);
                w->defined_source = opts.persistent = opts.undefine_source = defined;
                ok = migrate_on(&opts, &fo, &report, &error);
                runs++;
                /* The report always tells where the domain is and how many VFs it has. */
                if (!g_str_equal(report->final_host, w->where))
                    fail_msg("%s: report says %s, domain is on %s", spec, report->final_host,
                             w->where);
                if (report->phases[ORCH_PHASE_INSPECT].status == ORCH_STATUS_OK &&
                    report->vfs_attached != world_count_vfs(w))
                    fail_msg("%s: report says %u VFs, domain has %u", spec,
                             report->vfs_attached, world_count_vfs(w));
                /* No lease of ours is left unconfirmed, unless confirming or releasing it was
                 * what failed (it expires then); the VFs the domain left are not assigned. */
                if (g_hash_table_size(w->leases) && !g_str_has_prefix(op, "vfd_"))
                    fail_msg("%s: a lease was left behind: %s", spec, w->vfd_log->str);
                if (g_str_equal(w->where, "source") && g_hash_table_size(w->assigned))
                    fail_msg("%s: a destination VF stays assigned", spec);
                if (ok) {
                    assert_false(journal_exists());
                    assert_string_equal(w->where, "destination");
                    assert_int_equal(world_count_vfs(w), 2);
                    assert_false(w->agent_prepared);
                    if (w->defined_destination != defined || w->defined_source)
                        fail_msg("%s: migrated, defined on the source %d, destination %d", spec,
                                 w->defined_source, w->defined_destination);
                    continue;
                }
                failures++;
                failures_of[o]++;
                assert_non_null(error);
                assert_non_null(report->error);
                if (journal_exists()) {
                    /* Kept only when the undo or the resume failed: recovery finishes it. */
                    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_ROLLBACK) ||
                                report->failed_phase == ORCH_PHASE_RESUME);
                    recover_and_check(w, spec);
                    continue;
                }
                if (g_error_matches(error, ORCH_ERROR, ORCH_ERROR_ROLLBACK))
                    fail_msg("%s: undo failed but no journal kept", spec);
                /* Otherwise nothing is lost: all VFs attached where the domain runs. */
                if (world_count_vfs(w) != 2)
                    fail_msg("%s: %u VFs left, error: %s", spec, world_count_vfs(w),
                             error->message);
                if (report->failed_phase == ORCH_PHASE_RESUME) {
                    assert_string_equal(w->where, "destination");
                } else {
                    assert_string_equal(w->where, "source");
                    if (w->agent_prepared)
                        fail_msg("%s: agent left prepared: %s", spec, error->message);
                    /* Undone: the definitions are as they were. */
                    if (w->defined_source != defined || w->defined_destination)
                        fail_msg("%s: undone, defined on the source %d, destination %d: %s", spec,
                                 w->defined_source, w->defined_destination, error->message);
                }
            }
        }
    }
    print_message("fault walk: %u runs, %u failed and were checked\n", runs, failures);
    assert_int_equal(runs, 2 * G_N_ELEMENTS(ops) * G_N_ELEMENTS(labels) * 6);
    /* Counted per operation and domain kind, so that one operation failing many runs cannot
     * hide another that failed none: every operation that matters fails at least one run with
     * a transient and with a defined domain; the absorbed ones fail none. */
    for (gsize o = 0; o < 2 * G_N_ELEMENTS(ops); o++) {
        const char *op = ops[o % G_N_ELEMENTS(ops)];
        const char *kind = o >= G_N_ELEMENTS(ops) ? "defined" : "transient";
        gboolean is_absorbed = g_strv_contains(absorbed, op);

        print_message("fault walk: %s (%s domain): %u failed runs\n", op, kind, failures_of[o]);
        if (is_absorbed && failures_of[o] != 0)
            fail_msg("failing %s (%s domain) failed %u migrations, expected none", op, kind,
                     failures_of[o]);
        if (!is_absorbed && failures_of[o] == 0)
            fail_msg("failing %s (%s domain) failed no migration: the walk did not reach it", op,
                     kind);
    }
}

/* The typed readers of the agent's info and inventory: members of another type read as
 * absent, more devices than the limit is refused. */
static void test_agent_typed_replies(void **state)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(OrchAgentInfo) info = NULL;
    g_autoptr(OrchAgentInventory) inv = NULL;
    g_autoptr(GString) many = g_string_new("{\"devices\":[");
    g_autoptr(GError) error = NULL;
    OrchAgentDevice *dev;
    OrchAgentPort *port;

    assert_true(json_parser_load_from_data(
        parser,
        "{\"version\":7,\"protocol\":2,\"devices\":[{\"name\":\"mlx5_0\",\"node_guid\":"
        "\"0002:c903:00a1:b2c3\",\"ports\":[{\"link_layer\":\"InfiniBand\",\"gids\":["
        "\"fe80::1\",\"fe80::2\",3,\"fe80::4\"]},5]},\"x\"]}",
        -1, NULL));
    info = orch_agent_info_parse(json_node_get_object(json_parser_get_root(parser)), &error);
    assert_non_null(info);
    assert_null(info->version);
    assert_int_equal(info->protocol, 2);
    inv = orch_agent_inventory_parse(json_node_get_object(json_parser_get_root(parser)), &error);
    assert_non_null(inv);
    assert_int_equal(inv->devices->len, 2);
    dev = g_ptr_array_index(inv->devices, 0);
    assert_string_equal(dev->name, "mlx5_0");
    assert_string_equal(dev->node_guid, "0002:c903:00a1:b2c3");
    assert_int_equal(dev->ports->len, 1);
    port = g_ptr_array_index(dev->ports, 0);
    assert_string_equal(port->link_layer, "InfiniBand");
    assert_int_equal(g_strv_length(port->gids), 2); /* up to the first that is not a string */
    dev = g_ptr_array_index(inv->devices, 1);
    assert_null(dev->name);
    assert_null(dev->node_guid);
    assert_int_equal(dev->ports->len, 0);
    g_clear_pointer(&inv, orch_agent_inventory_free);

    for (guint i = 0; i <= ORCH_AGENT_MAX_DEVICES; i++)
        g_string_append(many, i ? ",{}" : "{}");
    g_string_append(many, "]}");
    assert_true(json_parser_load_from_data(parser, many->str, -1, NULL));
    inv = orch_agent_inventory_parse(json_node_get_object(json_parser_get_root(parser)), &error);
    assert_null(inv);
    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_AGENT));
    assert_non_null(strstr(error->message, "more than 64"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_happy_path),
        cmocka_unit_test(test_agent_typed_replies),
        cmocka_unit_test(test_plug_at_switchover),
        cmocka_unit_test(test_no_vf),
        cmocka_unit_test(test_agent_silent_refuses),
        cmocka_unit_test(test_jobs_guest_job),
        cmocka_unit_test(test_jobs_unregistered_parse),
        cmocka_unit_test(test_jobs_unregistered_refused),
        cmocka_unit_test(test_jobs_refused),
        cmocka_unit_test(test_jobs_force),
        cmocka_unit_test(test_nova_refused),
        cmocka_unit_test(test_preflight_jobs),
        cmocka_unit_test(test_no_agent_option),
        cmocka_unit_test(test_quiesce_refused_resumes),
        cmocka_unit_test(test_plug_fails_migrates_back),
        cmocka_unit_test(test_persistence),
        cmocka_unit_test(test_plug_other_vf),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_fault_spec_rejected),
        cmocka_unit_test(test_unfinished_blocks_then_recover),
        cmocka_unit_test(test_recover_killed_in_unplug),
        cmocka_unit_test(test_agent_stops_in_prepare),
        cmocka_unit_test(test_busy_domain_refused),
        cmocka_unit_test(test_identity_carried),
        cmocka_unit_test(test_agent_deep_nesting),
        cmocka_unit_test(test_agent_pipelined),
        cmocka_unit_test(test_agent_info_fails),
        cmocka_unit_test(test_agent_stale_sync),
        cmocka_unit_test(test_standby_report),
        cmocka_unit_test(test_journal_unsynced_lines_unread),
        cmocka_unit_test(test_identity_from_host_not_guest),
        cmocka_unit_test(test_identity_unknown_to_host),
        cmocka_unit_test(test_lease_renewed_under_long_copy),
        cmocka_unit_test(test_plug_trusts_fresh_lease),
        cmocka_unit_test(test_state_dir_shared),
        cmocka_unit_test(test_lease_lost_before_plug),
        cmocka_unit_test(test_resume_waits_for_one_under_way),
        cmocka_unit_test(test_resume_failure_not_retried),
        cmocka_unit_test(test_identity_refused),
        cmocka_unit_test(test_no_free_vf),
        cmocka_unit_test(test_lease_release_fails),
        cmocka_unit_test(test_lease_release_retried),
        cmocka_unit_test(test_preflight),
        cmocka_unit_test(test_fault_walk),
    };

    g_autofree char *dir = g_dir_make_tmp("hm-orch-XXXXXX", NULL);
    int rc;

    g_assert(dir);
    state_dir = dir;
    g_log_set_always_fatal(G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    {
        g_autofree char *jdir = g_build_filename(dir, "journal", NULL);
        g_autoptr(GDir) d = g_dir_open(jdir, 0, NULL);
        const char *name;

        while (d && (name = g_dir_read_name(d))) {
            g_autofree char *path = g_build_filename(jdir, name, NULL);
            g_unlink(path);
        }
        g_rmdir(jdir);
        g_rmdir(dir);
    }
    return rc;
}
