# libhotmig-verbs (guest-agent/verbs): the export table against the installed libibverbs and
# the imports of ibverbs-utils, perftest and UCX; the layer's pieces in-process.
add_test(NAME verbs-layer-exports
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-layer-exports.sh $<TARGET_FILE:hotmig-verbs>)
set_tests_properties(verbs-layer-exports PROPERTIES LABELS unit)
hm_add_test(verbs-map-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-map-test.c ${PROJECT_SOURCE_DIR}/guest-agent/verbs/hv-util.c
  LIBS PkgConfig::IBVERBS Threads::Threads)
target_include_directories(verbs-map-test PRIVATE ${PROJECT_SOURCE_DIR}/guest-agent/verbs)
hm_add_test(verbs-loopback-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-loopback-test.c ${PROJECT_SOURCE_DIR}/guest-agent/verbs/hv-util.c
  LIBS PkgConfig::IBVERBS Threads::Threads)
target_include_directories(verbs-loopback-test PRIVATE ${PROJECT_SOURCE_DIR}/guest-agent/verbs)
hm_add_test(verbs-udmap-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-udmap-test.c ${PROJECT_SOURCE_DIR}/guest-agent/verbs/hv-util.c
  LIBS hotmig-verbs-proto PkgConfig::IBVERBS Threads::Threads)
target_include_directories(verbs-udmap-test PRIVATE ${PROJECT_SOURCE_DIR}/guest-agent/verbs)
# The UCX timeouts the layer sets unless the user did (docs/verbs-layer.md, "UCX").
add_test(NAME verbs-ucx-env
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-ucx-env.sh $<TARGET_FILE:hotmig-verbs>)
set_tests_properties(verbs-ucx-env PROPERTIES LABELS unit)
