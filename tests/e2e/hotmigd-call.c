/* hm-hotmigd-call: one call of the hotmigd client (engine/hotmigd-client-soup.c), for the end-to-end
 * tests: the client certificate, key and CA come from [migrate] of CONFIG, the URL from its
 * [host HOST] group (hotmigd, else https://SERVER-OF-URI:HOTMIGD-PORT).
 *
 *   hm-hotmigd-call CONFIG HOST host
 *   hm-hotmigd-call CONFIG HOST list                         one line a VF: id kind state lease domain
 *   hm-hotmigd-call CONFIG HOST leases                       one line a leased VF: id lease lease's-domain
 *   hm-hotmigd-call CONFIG HOST lease VF HOLDER REASON DOMAIN [TTL]      prints the lease id
 *   hm-hotmigd-call CONFIG HOST lease-model VENDOR DEVICE HOLDER REASON DOMAIN [TTL]
 *                                                       prints "VF LEASE-ID"
 *   hm-hotmigd-call CONFIG HOST confirm|release VF LEASE-ID
 *   hm-hotmigd-call CONFIG HOST ib-identity VF NODE-GUID PORT-GUID      prints the note
 *   hm-hotmigd-call CONFIG HOST vfio VF                                 prints the note
 *
 * Exit status 0, or 1 with the error on stderr; 2 for bad usage; 3 when the daemon said 409
 * (ORCH_ERROR_CONFLICT), 4 when it said 404. */
#include <stdio.h>
#include <stdlib.h>

#include "common/config.h"
#include "engine/hotmigd-client.h"
#include "hotplug/hotplug.h"

static int usage(void)
{
    fprintf(
        stderr,
        "usage: hm-hotmigd-call CONFIG HOST host|list|leases|lease|lease-model|confirm|release|ib-identity|vfio [ARGS]\n");
    return 2;
}

/* The [host NAME]'s hotmigd URL (owned). */
static char *host_url(const HmConfig *config, const char *name, GError **error)
{
    const HmConfigHost *host = hm_config_find_host(config, name);
    g_autoptr(GUri) uri = NULL;

    if (!host) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "no [host %s] in '%s'", name,
                    hm_config_get_path(config));
        return NULL;
    }
    if (host->hotmigd)
        return g_strdup(host->hotmigd);
    uri = g_uri_parse(host->uri, G_URI_FLAGS_NONE, error);
    if (!uri)
        return NULL;
    return g_strdup_printf("https://%s:%" G_GUINT64_FORMAT, g_uri_get_host(uri),
                           hm_config_get_uint(config, HM_CONFIG_MIGRATE_HOTMIGD_PORT));
}

static guint parse_uint(const char *text, guint base, guint64 max)
{
    guint64 value = 0;

    if (!g_ascii_string_to_unsigned(text, base, 0, max, &value, NULL)) {
        fprintf(stderr, "hm-hotmigd-call: '%s' is not a number\n", text);
        exit(2);
    }
    return (guint)value;
}

static guint64 parse_guid(const char *text)
{
    g_autoptr(GError) error = NULL;
    guint64 guid = 0;

    if (!hotplug_guid_parse(text, &guid, &error)) {
        fprintf(stderr, "hm-hotmigd-call: %s\n", error->message);
        exit(2);
    }
    return guid;
}

int main(int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfig) config = NULL;
    g_autoptr(OrchHotmigdClient) vfd = NULL;
    g_autofree char *url = NULL;
    const char *cmd;
    gboolean ok = FALSE;

    if (argc < 4)
        return usage();
    cmd = argv[3];
    config = hm_config_load(argv[1], &error);
    if (config)
        url = host_url(config, argv[2], &error);
    if (url)
        vfd = orch_hotmigd_client_new(
            url, hm_config_get_string(config, HM_CONFIG_MIGRATE_CLIENT_CERT),
            hm_config_get_string(config, HM_CONFIG_MIGRATE_CLIENT_KEY),
            hm_config_get_string(config, HM_CONFIG_MIGRATE_CA_CERT), 10, &error);
    if (!vfd) {
        fprintf(stderr, "hm-hotmigd-call: %s\n", error->message);
        return 1;
    }

    if (g_str_equal(cmd, "host") && argc == 4) {
        g_autoptr(OrchHotmigdHostInfo) info = orch_hotmigd_client_host(vfd, &error);

        if ((ok = info != NULL)) {
            printf("name %s\nversion %s\npool %u\n", info->name, info->version, info->pool_size);
            for (int st = 0; st < ORCH_VF_STATE_LAST; st++)
                printf("%s %u\n", orch_vf_state_to_string(st), info->counts[st]);
        }
    } else if (g_str_equal(cmd, "list") && argc == 4) {
        g_autoptr(GPtrArray) vfs = orch_hotmigd_client_list(vfd, &error);

        for (guint i = 0; vfs && i < vfs->len; i++) {
            OrchHotmigdVfInfo *vf = g_ptr_array_index(vfs, i);

            printf("%s %s %s %s %s\n", vf->id, orch_vf_kind_to_string(vf->kind),
                   orch_vf_state_to_string(vf->state), vf->lease ? vf->lease->id : "-",
                   vf->assigned_to ? vf->assigned_to : "-");
        }
        ok = vfs != NULL;
    } else if (g_str_equal(cmd, "leases") && argc == 4) {
        g_autoptr(GPtrArray) vfs = orch_hotmigd_client_list(vfd, &error);

        for (guint i = 0; vfs && i < vfs->len; i++) {
            OrchHotmigdVfInfo *vf = g_ptr_array_index(vfs, i);

            if (vf->lease)
                printf("%s %s %s\n", vf->id, vf->lease->id,
                       vf->lease->domain ? vf->lease->domain : "-");
        }
        ok = vfs != NULL;
    } else if ((g_str_equal(cmd, "lease") && (argc == 8 || argc == 9)) ||
               (g_str_equal(cmd, "lease-model") && (argc == 9 || argc == 10))) {
        gboolean model = g_str_equal(cmd, "lease-model");
        int a = model ? 6 : 5;
        OrchHotmigdLeaseRequest req = {
            .vf = model ? NULL : argv[4],
            .vendor_id = model ? parse_uint(argv[4], 16, 0xffff) : 0,
            .device_id = model ? parse_uint(argv[5], 16, 0xffff) : 0,
            .holder = argv[a],
            .reason = argv[a + 1],
            .domain = argv[a + 2],
            .ttl_s = argc > a + 3 ? parse_uint(argv[a + 3], 10, 604800) : 0,
        };
        g_autoptr(HotplugLease) lease = orch_hotmigd_client_lease(vfd, &req, &error);

        if ((ok = lease != NULL)) {
            if (model)
                printf("%s %s\n", lease->vf, lease->id);
            else
                printf("%s\n", lease->id);
        }
    } else if (g_str_equal(cmd, "confirm") && argc == 6) {
        g_autoptr(HotplugLease) lease = orch_hotmigd_client_confirm(vfd, argv[4], argv[5], &error);

        if ((ok = lease != NULL))
            printf("%s %s\n", lease->vf, hotplug_lease_state_to_string(lease->state));
    } else if (g_str_equal(cmd, "release") && argc == 6) {
        ok = orch_hotmigd_client_release(vfd, argv[4], argv[5], &error);
    } else if (g_str_equal(cmd, "ib-identity") && argc == 7) {
        g_autofree char *note = NULL;

        if ((ok = orch_hotmigd_client_ib_identity(vfd, argv[4], parse_guid(argv[5]),
                                                  parse_guid(argv[6]), &note, &error)))
            printf("%s\n", note ? note : "");
    } else if (g_str_equal(cmd, "vfio") && argc == 5) {
        g_autofree char *note = NULL;

        if ((ok = orch_hotmigd_client_vfio(vfd, argv[4], &note, &error)))
            printf("%s\n", note ? note : "");
    } else {
        return usage();
    }
    if (ok)
        return 0;
    fprintf(stderr, "hm-hotmigd-call: %s\n", error->message);
    if (g_error_matches(error, ORCH_ERROR, ORCH_ERROR_CONFLICT))
        return 3;
    if (g_error_matches(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND))
        return 4;
    return 1;
}
