/* LD_PRELOAD=libhotmig-verbs.so alone, libibverbs loaded late and RTLD_LOCAL (as UCX's
 * libuct_ib is): the module's ibv_* calls bind to the layer, and the layer finds the real
 * functions (it opens libibverbs itself when RTLD_NEXT has none). Run by CTest with the layer
 * preloaded; argv[1] the layer, argv[2] the module (verbs-late-lib.c). */
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    void *layer, *mod, *ibv;
    void *(*list_fn)(void);
    const char *(*status)(void);
    int (*mbps)(void), (*count)(void);
    const char *s;

    if (argc != 3) {
        fprintf(stderr, "usage: %s LAYER.so MODULE.so\n", argv[0]);
        return 2;
    }
    layer = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
    if (!layer) {
        fprintf(stderr, "FAIL: %s is not preloaded (LD_PRELOAD=%s)\n", argv[1],
                getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "");
        return 1;
    }
    /* The situation under test: nothing has loaded libibverbs yet. */
    CHECK(dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD) == NULL,
          "libibverbs is loaded before the module (test set-up)");

    mod = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!mod) {
        fprintf(stderr, "FAIL: dlopen %s: %s\n", argv[2], dlerror());
        return 1;
    }
    ibv = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
    CHECK(ibv != NULL, "the module did not load libibverbs");
    list_fn = (void *(*)(void))dlsym(mod, "late_device_list_fn");
    status = (const char *(*)(void))dlsym(mod, "late_wc_status_str");
    mbps = (int (*)(void))dlsym(mod, "late_rate_to_mbps");
    count = (int (*)(void))dlsym(mod, "late_device_count");
    if (!list_fn || !status || !mbps || !count) {
        fprintf(stderr, "FAIL: module symbols missing\n");
        return 1;
    }

    /* The module's references bind to the layer, not to the libibverbs it loaded. */
    CHECK(list_fn() == dlsym(layer, "ibv_get_device_list"),
          "module's ibv_get_device_list %p, layer's %p", list_fn(),
          dlsym(layer, "ibv_get_device_list"));
    /* The layer reaches the real functions (before the fix these called through NULL). */
    s = status();
    CHECK(s && strcmp(s, "success") == 0, "ibv_wc_status_str(SUCCESS) = %s", s ? s : "NULL");
    CHECK(mbps() == 10000, "ibv_rate_to_mbps(10 Gb/s) = %d", mbps());
    if (ibv) {
        int (*real_mbps)(int) = (int (*)(int))dlvsym(ibv, "ibv_rate_to_mbps", "IBVERBS_1.1");
        struct ibv_device **(*real_list)(int *) =
            (struct ibv_device * *(*)(int *)) dlvsym(ibv, "ibv_get_device_list", "IBVERBS_1.1");
        void (*real_free)(struct ibv_device **) =
            (void (*)(struct ibv_device **))dlvsym(ibv, "ibv_free_device_list", "IBVERBS_1.1");
        int n = -1;
        struct ibv_device **l;

        CHECK(real_mbps && real_mbps(IBV_RATE_10_GBPS) == 10000, "real ibv_rate_to_mbps");
        CHECK(real_list && (void *)real_list != dlsym(layer, "ibv_get_device_list"),
              "libibverbs' own ibv_get_device_list is the layer's");
        /* Same device count through the layer as from libibverbs (0 or -1 on a host without
         * RDMA devices, which still proves the call went through). */
        l = real_list ? real_list(&n) : NULL;
        if (!l)
            n = -1;
        else if (real_free)
            real_free(l);
        CHECK(count() == n, "device count through the layer %d, libibverbs %d", count(), n);
    }
    if (failures)
        return 1;
    printf("ok: late RTLD_LOCAL libibverbs reached through the layer\n");
    return 0;
}
