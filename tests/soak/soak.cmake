# The soak (issue 31, tests/soak/soak.sh): lab guests moved between the hosts under random
# faults from a printed seed, the invariants checked after every step, resource figures
# sampled. Label soak, not in tests/run (hours); e2e-soak-short (tests/e2e/e2e.cmake) is its
# CI version. Settings come from the environment (SOAK_SEED, SOAK_MIGRATIONS, SOAK_MINUTES,
# SOAK_PAIRS, SOAK_FAULTS, SOAK_FAULT_PCT, SOAK_PATHS, SOAK_VIRSH_LOOP; docs/reliability.md
# "Soak"):
#   HOTMIG_LAB_INSTANCE=K SOAK_MIGRATIONS=1000 ctest --test-dir build -L soak --output-on-failure
#   HOTMIG_LAB_INSTANCE=K SOAK_FAULT_PCT=0 SOAK_PATHS=migrate-vm SOAK_VIRSH_LOOP=30 ctest ... -L soak
add_test(NAME soak COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/soak.sh)
set_tests_properties(soak PROPERTIES FIXTURES_REQUIRED lab LABELS "soak;standin" TIMEOUT 43200
                     ENVIRONMENT "HM_BUILD=${CMAKE_BINARY_DIR}")
