/* hotmigd's local API, the listener (local-api.c): JSON lines on the Unix socket [hotmigd]
 * socket. The wire format, the request parser and the client are engine/local-protocol.h; the
 * commands' work is done by the listener's owner (the daemon: daemon.c binds commands.c's and
 * schedules.c's functions) through the table below, on the owner's main context. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "engine/local-protocol.h"
#include "policies/policies.h"

G_BEGIN_DECLS

/* The result of an asynchronous call: @result (a JSON value) or @error, both taken. */
typedef void (*HotmigdDone)(JsonNode *result, GError *error, gpointer data);

typedef struct {
    PolPolicy policy;
    const char *host; /* drain: the host */
    gint min_stay_s;  /* < 0: [scheduler] min-stay (consolidate, balance) */
    double bandwidth; /* <= 0: [scheduler] bandwidth */
    gboolean pack_vcpus;
    gboolean keep_jobs;
    double tolerance; /* < 0: the default */
    gint max_moves;   /* < 0: none */
    gint host_value;  /* consolidate; < 0: [scheduler] host-value */
    gint max_migrations; /* consolidate; < 0: none */
} HotmigdPlanRequest;

/* A move's start or end while a schedule runs; NULL once when it has ended (@event borrowed). */
typedef void (*HotmigdWatchFunc)(JsonNode *event, gpointer data);

/* What the commands ask of the listener's owner (@owner of hotmigd_local_api_new()); each entry
 * is the daemon's function of that name (hotmigd/commands.h, and schedules.h for watch, say what
 * each answers). */
typedef struct {
    void (*plan)(gpointer owner, const HotmigdPlanRequest *req, HotmigdDone done, gpointer data);
    void (*run)(gpointer owner, PolPlan *plan, const char *reason, HotmigdDone done,
                gpointer data);
    void (*drain)(gpointer owner, const char *host, gint64 deadline, const char *reason,
                  HotmigdDone done, gpointer data);
    void (*snapshot)(gpointer owner, HotmigdDone done, gpointer data);
    JsonNode *(*status)(gpointer owner, const char *id, GError **error);
    guint (*watch)(gpointer owner, const char *id, HotmigdWatchFunc fn, gpointer data,
                   GError **error);
} HotmigdLocalApiOps;

typedef struct HotmigdLocalApi HotmigdLocalApi;

/* Listens on @path (a stale socket file is replaced; a path holding something else is an
 * error), mode 0600, and serves the local API on the thread-default main context, each
 * command's work done by @ops on @owner (both borrowed: they outlive the API). */
HotmigdLocalApi *hotmigd_local_api_new(const HotmigdLocalApiOps *ops, gpointer owner,
                                       const char *path, GError **error);
void hotmigd_local_api_free(HotmigdLocalApi *api);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotmigdLocalApi, hotmigd_local_api_free)

G_END_DECLS
