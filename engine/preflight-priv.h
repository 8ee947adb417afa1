/* The pre-flight checks' shared state (preflight.c), for the checks that ask the destination's
 * hotmigd (preflight-target.c), and the list both add to (checks.c). preflight.c calls
 * preflight-target.c, both call checks.c: never upward. */
#pragma once

#include "engine/engine.h"
#include "engine/virt.h"
#include "xml/xml.h"

G_BEGIN_DECLS

typedef struct {
    const OrchOptions *opts;
    GPtrArray *checks; /* OrchCheck, in order */
    OrchVirt *src;     /* NULL when the source is unreachable */
    OrchVirt *dst;     /* NULL when the destination is unreachable */
    XmlDomain *dom;    /* the live domain on the source, NULL when not running */
    GPtrArray *vfs;    /* XmlVf of the domain, NULL when unknown */
} Preflight;

/* Appends check @name with @status and the detail @fmt, @ap to @checks; returns it (borrowed).
 * checks.c. */
OrchCheck *orch_checks_addv(GPtrArray *checks, const char *name, OrchCheckStatus status,
                            const char *fmt, va_list ap) G_GNUC_PRINTF(4, 0);

/* Adds the checks of the destination's VFs: its hotmigd answers, a free compatible VF for each
 * of the domain's, its files are there, the migration port is reachable. With no source
 * (pf->src NULL) each is added as skipped. */
void orch_preflight_check_target(Preflight *pf);

G_END_DECLS
