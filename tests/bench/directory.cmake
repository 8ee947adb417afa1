# hm-directory-bench: the agent's peer directory with 100, 1,000 and 10,000 simulated peers on
# loopback: a peer's change until the file shows it, the layer's load of the file and its
# lookups in it (guest-agent/verbs/hv-dir.c compiled in), memory per peer
# (tests/bench/directory-bench.c). Label bench; it prints, it asserts nothing:
#   ctest --test-dir BUILD -L bench -R bench-directory -V
add_executable(hm-directory-bench ${CMAKE_CURRENT_SOURCE_DIR}/bench/directory-bench.c
               ${PROJECT_SOURCE_DIR}/guest-agent/verbs/hv-dir.c)
target_include_directories(hm-directory-bench PRIVATE ${PROJECT_SOURCE_DIR}/guest-agent/verbs
                           ${IBVERBS_INCLUDE_DIRS})
target_link_libraries(hm-directory-bench PRIVATE hotmig-agent-core Threads::Threads)
set_target_properties(hm-directory-bench PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/bench)
add_test(NAME bench-directory COMMAND hm-directory-bench)
set_tests_properties(bench-directory PROPERTIES LABELS bench TIMEOUT 600)
