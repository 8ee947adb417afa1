# hm-policies benchmark (label bench; not run by the default CI, built with the tests):
#   build/tests/consolidate ../shared/data/planetlab/*.csv     one JSON line per day
#   build/tests/consolidate --scale                            10 000 hosts / 100 000 VMs
# docs/policies.md ("Benchmark") describes the snapshots and the figures.
add_executable(consolidate ${CMAKE_CURRENT_LIST_DIR}/consolidate.c)
target_link_libraries(consolidate PRIVATE hm-policies m)
set(HM_PLANETLAB_DIR ${PROJECT_SOURCE_DIR}/../shared/data/planetlab CACHE PATH
    "PlanetLab traces for the consolidation benchmark")
file(GLOB hm_planetlab_days ${HM_PLANETLAB_DIR}/*.csv)
if(hm_planetlab_days)
  add_test(NAME bench-consolidate COMMAND consolidate ${hm_planetlab_days})
  set_tests_properties(bench-consolidate PROPERTIES LABELS bench)
endif()
add_test(NAME bench-consolidate-scale COMMAND consolidate --scale)
set_tests_properties(bench-consolidate-scale PROPERTIES LABELS bench)
