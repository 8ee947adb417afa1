# hm-agent-bench: the agent's prepare -> all-quiesced latency with 1/16/64 processes, measured
# inside a lab guest (the lab copies build/tests/bench/hm-agent-bench into its initramfs).
# agent-bench (label bench) boots a guest on the lab, runs it there and prints p50/p99; it
# measures, it asserts nothing about the figures.
add_executable(hm-agent-bench ${CMAKE_CURRENT_SOURCE_DIR}/bench/agent-bench.c)
target_link_libraries(hm-agent-bench PRIVATE hotmig)
set_target_properties(hm-agent-bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/bench)
add_test(NAME agent-bench COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bench/agent-bench.sh)
set_tests_properties(agent-bench PROPERTIES LABELS bench TIMEOUT 1800
                     ENVIRONMENT "HM_BUILD=${CMAKE_BINARY_DIR}")

# migrate-vm against bare 'virsh migrate --live --p2p' on the lab (label bench): prints one
# JSON object: the medians, their ratio, the per-phase medians, migration complete -> verbs
# traffic, the TCP-fallback blackout minus libvirt's downtime, evacuation makespans
# (tests/bench/migration.sh).
add_test(NAME bench-migration COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bench/migration.sh)
set_tests_properties(bench-migration PROPERTIES LABELS bench TIMEOUT 3600 FIXTURES_REQUIRED lab
                     ENVIRONMENT "HM_BUILD=${CMAKE_BINARY_DIR}")
# The verbs layer's data-path cost (ib_send_lat, ib_write_bw with and without the layer,
# interleaved) on the lab: tests/bench/verbs-layer.sh prints, asserts nothing.
add_test(NAME bench-verbs-layer COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bench/verbs-layer.sh)
set_tests_properties(bench-verbs-layer PROPERTIES LABELS bench TIMEOUT 3600 FIXTURES_REQUIRED lab
                     ENVIRONMENT "HM_BUILD=${CMAKE_BINARY_DIR}")
# An MPI job's time with and without one migration, each rank's pause, against the same move of
# the idle VM (tests/bench/mpi-job.sh, on the MPI fixture's guests): prints, asserts nothing.
add_test(NAME bench-mpi-job COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bench/mpi-job.sh)
set_tests_properties(bench-mpi-job PROPERTIES LABELS bench TIMEOUT 3600 FIXTURES_REQUIRED "lab;mpi"
                     ENVIRONMENT "HM_BUILD=${CMAKE_BINARY_DIR}")
