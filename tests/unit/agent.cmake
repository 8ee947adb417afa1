# guest-agent unit tests: the agent core in-process (fake verbs) and libhotmig against a fake
# agent.
hm_add_test(agent-core-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/agent-core-test.c
  LIBS hotmig-agent-core)
# The verbs layer's broker (peer.c) on loopback: bounded under a flood, routed connections end,
# route records checked against the socket's SO_PEERCRED.
hm_add_test(agent-peer-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/agent-peer-test.c
  LIBS hotmig-agent-core)
# The uevent listener on the real kernel socket (root: skipped, exit 77, otherwise).
add_test(NAME agent-uevent-test COMMAND agent-core-test --uevent)
set_tests_properties(agent-uevent-test PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
hm_add_test(libhotmig-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/libhotmig-test.c
  LIBS hotmig Threads::Threads)
# The binary end to end over --device fd:3, with libhotmig clients in both modes.
hm_add_test(agent-binary-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/agent-binary-test.c
  LIBS hotmig PkgConfig::GLIB PkgConfig::JSONGLIB
  ARGS $<TARGET_FILE:hotmig-agent>)
add_dependencies(agent-binary-test hotmig-agent)
# libhotmig is linked into MPI processes: it may need libc (and libpthread on old glibc) only.
add_test(NAME libhotmig-deps
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/libhotmig-deps.sh $<TARGET_FILE:hotmig>)
set_tests_properties(libhotmig-deps PROPERTIES LABELS unit)
# The protocol schema against the generated tables, the dispatcher and docs/protocol.md.
hm_add_test(agent-schema-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/agent-schema-test.c
  LIBS hotmig-agent-core
  ARGS ${PROJECT_SOURCE_DIR}/guest-agent/schema/agent-protocol.json
       ${PROJECT_SOURCE_DIR}/docs/protocol.md)
# The peer directory (guest-agent/agent/dir-*.c, directory.c): parser, table, file, and three
# agents in one process on loopback multicast and on unicast seeds.
hm_add_test(agent-directory-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/agent-directory-test.c
  LIBS hotmig-agent-core)
# The standby RDMA device (issue 30): the kernel check, made and removed through a fake of the
# RDMA netlink adapter in a sysfs fixture, and in the agent from prepare to resume.
hm_add_test(agent-standby-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/agent-standby-test.c
  LIBS hotmig-agent-core)
