# hm-policies benchmark (label bench; not run by the default CI, built with the tests):
#   build/tests/consolidate ../shared/data/planetlab/*.csv     one JSON line per day
#   build/tests/consolidate --placement skewed ...             the VMs crowded on the first hosts
#   tests/bench/watcher-compare.py --consolidate build/tests/consolidate \
#       --migrate-vm build/migrate-vm/migrate-vm ../shared/data/planetlab/*.csv
#                                                              side by side with OpenStack Watcher
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
  add_test(NAME bench-consolidate-skewed COMMAND consolidate --placement skewed ${hm_planetlab_days})
  set_tests_properties(bench-consolidate-skewed PROPERTIES LABELS bench)
  # Debian's python3-watcher lives in /usr/lib/python3/dist-packages: the system interpreter.
  add_test(NAME bench-watcher-compare
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/watcher-compare.py
                   --consolidate $<TARGET_FILE:consolidate> --migrate-vm $<TARGET_FILE:migrate-vm>
                   ${hm_planetlab_days})
  set_tests_properties(bench-watcher-compare PROPERTIES LABELS bench TIMEOUT 600)
endif()
add_test(NAME bench-consolidate-scale COMMAND consolidate --scale)
set_tests_properties(bench-consolidate-scale PROPERTIES LABELS bench)
