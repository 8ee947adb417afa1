# libhotmig-verbs (guest-agent/verbs): the export table against the installed libibverbs and
# the imports of ibverbs-utils, perftest and UCX; the layer's pieces in-process.
add_test(NAME verbs-layer-exports
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-layer-exports.sh $<TARGET_FILE:hotmig-verbs>)
set_tests_properties(verbs-layer-exports PROPERTIES LABELS unit)
hm_add_test(verbs-map-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-map-test.c ${PROJECT_SOURCE_DIR}/guest-agent/verbs/hv-map.c
  LIBS PkgConfig::IBVERBS Threads::Threads)
target_include_directories(verbs-map-test PRIVATE ${PROJECT_SOURCE_DIR}/guest-agent/verbs)
hm_add_test(verbs-loopback-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-loopback-test.c ${PROJECT_SOURCE_DIR}/guest-agent/verbs/hv-local.c
  LIBS PkgConfig::IBVERBS Threads::Threads)
target_include_directories(verbs-loopback-test PRIVATE ${PROJECT_SOURCE_DIR}/guest-agent/verbs)
hm_add_test(verbs-udmap-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-udmap-test.c ${PROJECT_SOURCE_DIR}/guest-agent/verbs/hv-udtab.c
    ${PROJECT_SOURCE_DIR}/guest-agent/verbs/hv-map.c
  LIBS hotmig-verbs-proto PkgConfig::IBVERBS Threads::Threads)
target_include_directories(verbs-udmap-test PRIVATE ${PROJECT_SOURCE_DIR}/guest-agent/verbs)
# A connection made after a swap: the LOOKUP / LOOKEDUP messages.
hm_add_test(verbs-lookup-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-lookup-test.c
  LIBS hotmig-verbs-proto)
target_include_directories(verbs-lookup-test PRIVATE ${PROJECT_SOURCE_DIR}/guest-agent/verbs)
# The authenticated peer channel: SHA-256, HMAC-SHA256 (RFC 4231), the frame.
hm_add_test(verbs-auth-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-auth-test.c
  LIBS hotmig-verbs-proto)
# LD_PRELOAD=libhotmig-verbs.so alone with libibverbs dlopen'ed late and RTLD_LOCAL (UCX).
add_library(verbs-late-lib MODULE ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-late-lib.c)
target_link_libraries(verbs-late-lib PRIVATE PkgConfig::IBVERBS)
hm_add_test(verbs-late-load-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-late-load-test.c
  LIBS ${CMAKE_DL_LIBS}
  ARGS $<TARGET_FILE:hotmig-verbs> $<TARGET_FILE:verbs-late-lib>
  ENV "LD_PRELOAD=$<TARGET_FILE:hotmig-verbs>;HOTMIG_VERBS_DISABLE=1;ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0")
target_include_directories(verbs-late-load-test PRIVATE ${IBVERBS_INCLUDE_DIRS})
add_dependencies(verbs-late-load-test hotmig-verbs verbs-late-lib)
# Both ends of a connection moving at once: the RECONNECT verdict, every interleaving.
hm_add_test(verbs-both-move-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-both-move-test.c ${PROJECT_SOURCE_DIR}/guest-agent/verbs/hv-verdict.c
  LIBS hotmig-verbs-proto PkgConfig::IBVERBS Threads::Threads)
target_include_directories(verbs-both-move-test PRIVATE ${PROJECT_SOURCE_DIR}/guest-agent/verbs)
# The ibv_wr_* API (ibv_qp_ex) the layer serves: built into the layer's own posts. The layer's
# sources are linked in (no libibverbs: the test needs no device, its QP is paused).
hm_add_test(verbs-wr-api-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-wr-api-test.c
    ${HM_VERBS_SOURCES}
  LIBS hotmig-verbs-proto hotmig Threads::Threads ${CMAKE_DL_LIBS})
target_include_directories(verbs-wr-api-test PRIVATE ${PROJECT_SOURCE_DIR}/guest-agent/verbs
  ${IBVERBS_INCLUDE_DIRS})
# the layer's allocations counted: its data path must not allocate (hv.h)
target_link_options(verbs-wr-api-test PRIVATE -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc)
# The UCX timeouts the layer sets unless the user did (docs/verbs-layer.md, "UCX").
add_test(NAME verbs-ucx-env
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-ucx-env.sh $<TARGET_FILE:hotmig-verbs>)
set_tests_properties(verbs-ucx-env PROPERTIES LABELS unit)
# The layer on InfiniBand (issue 29): LID-routed connections, a mover's new LID, the agents'
# directory; the layer's sources linked in, the real libibverbs faked through hv_real.
hm_add_test(verbs-ib-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-ib-test.c ${HM_VERBS_SOURCES}
  LIBS hotmig-verbs-proto hotmig Threads::Threads ${CMAKE_DL_LIBS})
target_include_directories(verbs-ib-test PRIVATE ${PROJECT_SOURCE_DIR}/guest-agent/verbs
  ${IBVERBS_INCLUDE_DIRS})
# The peer protocol as a trust boundary (issue 28): each request only from the peer its QP is
# connected to, bounded tables, SUSPEND/UDHOLD deadlines, the authenticated channel on a socket
# pair. The layer's sources are linked in, libibverbs faked through hv_real.
hm_add_test(verbs-peer-check-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-peer-check-test.c ${HM_VERBS_SOURCES}
  LIBS hotmig-verbs-proto hotmig Threads::Threads ${CMAKE_DL_LIBS})
target_include_directories(verbs-peer-check-test PRIVATE ${PROJECT_SOURCE_DIR}/guest-agent/verbs
  ${IBVERBS_INCLUDE_DIRS})
# The UD drain of a quiesce (issue 30): datagrams lost before it are not waited out, those in
# flight are. The layer's sources are linked in, the physical CQ faked.
hm_add_test(verbs-ud-drain-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/verbs-ud-drain-test.c ${HM_VERBS_SOURCES}
  LIBS hotmig-verbs-proto hotmig Threads::Threads ${CMAKE_DL_LIBS})
target_include_directories(verbs-ud-drain-test PRIVATE ${PROJECT_SOURCE_DIR}/guest-agent/verbs
  ${IBVERBS_INCLUDE_DIRS})
