/* libhotmig-verbs, base layer: the layer's state (hv), the real libibverbs (hv_real, hv_init), the
 * UCX defaults set at load, the clock, the wait for a swap's end, and the QP lookup by virtual QPN
 * across contexts. */
#include "hv.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

HvLayer hv = {.lock = PTHREAD_MUTEX_INITIALIZER, .evt_wake = {-1, -1}};
HvReal hv_real;
static pthread_cond_t hv_cond = PTHREAD_COND_INITIALIZER; /* a swap ended */
static pthread_once_t hv_once = PTHREAD_ONCE_INIT;

void *hv_real_lib = RTLD_NEXT;

/* Where the real functions are: the next libibverbs in the global scope when there is one (the
 * program links it, or LD_PRELOAD lists it after the layer); otherwise libibverbs opened by the
 * layer itself. The second case is UCX's: libuct_ib, which needs libibverbs, is dlopen'ed
 * RTLD_LOCAL long after start-up, so RTLD_NEXT (which searches the start-up scope and what was
 * opened RTLD_GLOBAL) does not see it; its calls still reach the layer first (a preloaded
 * object precedes a local scope in every lookup). Opening the same soname gives the copy that
 * is loaded, or loads it. */
static void hv_init_once(void)
{
    if (!dlvsym(RTLD_NEXT, "ibv_get_device_list", "IBVERBS_1.1")) {
        hv_real_lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!hv_real_lib) {
            hv_log("cannot open libibverbs.so.1: %s", dlerror());
            return;
        }
    }
#define HV_REAL(ret, name, ver, args)                                                              \
    hv_real.r_##name = (ret(*) args)dlvsym(hv_real_lib, #name, ver);                               \
    if (!hv_real.r_##name)                                                                         \
        hv_real.r_##name = (ret(*) args)dlsym(hv_real_lib, #name);                                 \
    if (!hv_real.r_##name)                                                                         \
        hv_log("libibverbs has no %s@%s", #name, ver);
#include "hv-real.def"
#undef HV_REAL
}

void hv_init(void)
{
    pthread_once(&hv_once, hv_init_once);
}

/* UCX's own failure detectors must outlast a migration's blackout (docs/verbs-layer.md, "UCX"):
 * its UD endpoints declare a peer dead after UCX_UD_TIMEOUT (30 s) without an answer, and its
 * keepalive (UCX_KEEPALIVE_INTERVAL, 20 s) probes every endpoint. While a peer's guest moves,
 * the layer holds this process's sends to it and drops nothing, but the peer answers nothing
 * until it resumed: 9-10 s per move on the loaded lab, more for a drain. The layer sets both,
 * before the program's main() and so before UCX reads its configuration, unless the user did. */
static const char *const hv_ucx_env[][2] = {
    {"UCX_UD_TIMEOUT", "300s"},
    {"UCX_KEEPALIVE_INTERVAL", "300s"},
};

/* The UCX defaults first; the real functions are resolved at load only when libibverbs is
 * loaded already: a preloaded process that never uses verbs (a shell, mpirun, ssh) does not get
 * libibverbs; otherwise at the first ibv_* call. */
__attribute__((constructor)) static void hv_constructor(void)
{
    const char *off = getenv("HOTMIG_VERBS_DISABLE");
    void *h;

    if (!(off && *off && strcmp(off, "0") != 0))
        for (size_t i = 0; i < sizeof(hv_ucx_env) / sizeof(hv_ucx_env[0]); i++)
            setenv(hv_ucx_env[i][0], hv_ucx_env[i][1], 0);
    h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h) {
        hv_init();
        dlclose(h);
    }
}

/* Waits while a swap is under way: control calls need a physical object. */
int hv_wait_phys(HvContext *ctx)
{
    pthread_mutex_lock(&hv.lock);
    while (hv.swapping || !ctx->phys)
        if (!hv.swapping && !ctx->phys)
            break;
        else
            pthread_cond_wait(&hv_cond, &hv.lock);
    pthread_mutex_unlock(&hv.lock);
    return ctx->phys ? 0 : ENODEV;
}

void hv_swap_ended(void)
{
    pthread_mutex_lock(&hv.lock);
    pthread_cond_broadcast(&hv_cond);
    pthread_mutex_unlock(&hv.lock);
}

int64_t hv_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Progress the swap's waits wait for: a leaf lock (taken under any other), a generation
 * counter so that a signal between a waiter's check and its wait is not lost. */
static pthread_mutex_t hv_progress_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hv_progress_cond;
static uint64_t hv_progress_n;
static pthread_once_t hv_progress_once = PTHREAD_ONCE_INIT;

static void hv_progress_init(void)
{
    pthread_condattr_t a;

    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&hv_progress_cond, &a);
    pthread_condattr_destroy(&a);
}

uint64_t hv_progress_gen(void)
{
    uint64_t g;

    pthread_once(&hv_progress_once, hv_progress_init);
    pthread_mutex_lock(&hv_progress_lock);
    g = hv_progress_n;
    pthread_mutex_unlock(&hv_progress_lock);
    return g;
}

void hv_progress_signal(void)
{
    pthread_once(&hv_progress_once, hv_progress_init);
    pthread_mutex_lock(&hv_progress_lock);
    hv_progress_n++;
    pthread_cond_broadcast(&hv_progress_cond);
    pthread_mutex_unlock(&hv_progress_lock);
}

int hv_progress_wait(uint64_t seen, int64_t until)
{
    struct timespec ts;
    int r = 0;

    pthread_once(&hv_progress_once, hv_progress_init);
    ts.tv_sec = (time_t)(until / 1000);
    ts.tv_nsec = (long)(until % 1000) * 1000000L;
    pthread_mutex_lock(&hv_progress_lock);
    while (hv_progress_n == seen && r != ETIMEDOUT)
        r = pthread_cond_timedwait(&hv_progress_cond, &hv_progress_lock, &ts);
    pthread_mutex_unlock(&hv_progress_lock);
    return r == ETIMEDOUT ? ETIMEDOUT : 0;
}

static HvQp *hv_vqpn_lookup(uint32_t vqpn, HvContext **ret, int hold)
{
    HvQp *qp = NULL;

    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx && !qp; ctx = ctx->next) {
        uint64_t v;

        pthread_mutex_lock(&ctx->lock);
        if (hv_map_get(&ctx->vqpn, vqpn, &v)) {
            qp = (HvQp *)(uintptr_t)v;
            if (hold) /* under ctx->lock: ibv_destroy_qp takes it out of the map under it */
                atomic_fetch_add(&qp->refs, 1);
            if (ret)
                *ret = ctx;
        }
        pthread_mutex_unlock(&ctx->lock);
    }
    pthread_mutex_unlock(&hv.lock);
    return qp;
}

HvQp *hv_find_vqpn(uint32_t vqpn, HvContext **ret)
{
    return hv_vqpn_lookup(vqpn, ret, 0);
}

HvQp *hv_qp_hold(uint32_t vqpn, HvContext **ret)
{
    return hv_vqpn_lookup(vqpn, ret, 1);
}

void hv_qp_release(HvQp *qp)
{
    if (qp && atomic_fetch_sub(&qp->refs, 1) == 1)
        hv_progress_signal(); /* a destroy may wait for it */
}

void hv_qp_wait_unheld(HvQp *qp)
{
    for (;;) {
        uint64_t seen = hv_progress_gen();

        if (atomic_load(&qp->refs) == 0)
            return;
        hv_progress_wait(seen, hv_now_ms() + 100);
    }
}

/* The real device list (free with r_ibv_free_device_list), the device named @name in
 * *@found (NULL when absent). */
struct ibv_device **hv_phys_list(const char *name, struct ibv_device **found)
{
    int n = 0;
    struct ibv_device **l = hv_real.r_ibv_get_device_list(&n);

    *found = NULL;
    for (int i = 0; l && i < n; i++)
        if (strcmp(l[i]->name, name) == 0)
            *found = l[i];
    return l;
}

/* The real device @name, opened (the swap's, the standby's); NULL with errno set. */
struct ibv_context *hv_open_phys(const char *name)
{
    struct ibv_device *p, **l = hv_phys_list(name, &p);
    struct ibv_context *c = p ? hv_real.r_ibv_open_device(p) : NULL;
    int e = errno;

    if (l)
        hv_real.r_ibv_free_device_list(l);
    if (!p)
        e = ENODEV;
    errno = e;
    return c;
}
