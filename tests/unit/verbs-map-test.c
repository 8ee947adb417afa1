/* libhotmig-verbs: the integer map behind every translation (guest-agent/verbs/hv-map.c):
 * virtual lkey -> physical, physical QPN -> QP, the peer's rkeys. Deletions leave tombstones
 * that must neither hide later keys nor fill the table. */
#include "hv.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static void test_put_get_overwrite(void **state)
{
    HvMap m = {0};
    uint64_t v = 0;

    (void)state;
    assert_false(hv_map_get(&m, 7, &v)); /* empty, no table yet */
    assert_int_equal(hv_map_put(&m, 7, 70), 0);
    assert_int_equal(hv_map_put(&m, 0, 1), 0); /* key 0 is a key like any other */
    assert_true(hv_map_get(&m, 7, &v));
    assert_int_equal(v, 70);
    assert_true(hv_map_get(&m, 0, &v));
    assert_int_equal(v, 1);
    assert_int_equal(hv_map_put(&m, 7, 71), 0);
    assert_true(hv_map_get(&m, 7, &v));
    assert_int_equal(v, 71);
    assert_int_equal(m.n, 2);
    hv_map_clear(&m);
    assert_false(hv_map_get(&m, 7, &v));
}

static void test_grow_keeps_everything(void **state)
{
    HvMap m = {0};
    uint64_t v;

    (void)state;
    for (uint32_t k = 1; k <= 5000; k++)
        assert_int_equal(hv_map_put(&m, k * 2654435761u, k), 0);
    for (uint32_t k = 1; k <= 5000; k++) {
        assert_true(hv_map_get(&m, k * 2654435761u, &v));
        assert_int_equal(v, k);
    }
    assert_false(hv_map_get(&m, 12345, NULL));
    hv_map_clear(&m);
}

static void test_delete_and_tombstones(void **state)
{
    HvMap m = {0};
    uint64_t v;

    (void)state;
    /* churn: many more insert/delete cycles than slots, as QPs and MRs come and go */
    for (uint32_t round = 0; round < 20000; round++) {
        assert_int_equal(hv_map_put(&m, round, round + 1), 0);
        if (round >= 10)
            hv_map_del(&m, round - 10);
    }
    assert_int_equal(m.n, 10);
    for (uint32_t k = 0; k < 19990; k++)
        assert_false(hv_map_get(&m, k, NULL));
    for (uint32_t k = 19990; k < 20000; k++) {
        assert_true(hv_map_get(&m, k, &v));
        assert_int_equal(v, k + 1);
    }
    hv_map_del(&m, 424242); /* absent: nothing happens */
    assert_int_equal(m.n, 10);
    hv_map_clear(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_overwrite),
        cmocka_unit_test(test_grow_keeps_everything),
        cmocka_unit_test(test_delete_and_tombstones),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
