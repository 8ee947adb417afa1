# The .deb packages build, install into a throwaway root and run (tests/packaging/run).
# About a minute: it builds the tree again with the release settings.
add_test(NAME packaging
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/packaging/run ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR}/packaging-test)
set_tests_properties(packaging PROPERTIES LABELS package TIMEOUT 900)
# The packages' maintainer scripts under dpkg in a scratch root: install, upgrade, remove,
# purge, and what each asks of systemd and udev (tests/packaging/deb-lifecycle says what this
# does not prove). Root only (77: skipped); uses the packages the packaging test built.
add_test(NAME deb-lifecycle
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/packaging/deb-lifecycle ${CMAKE_BINARY_DIR}/packaging-test/build
          ${CMAKE_BINARY_DIR}/deb-lifecycle)
set_tests_properties(deb-lifecycle PROPERTIES LABELS package FIXTURES_REQUIRED debs
  SKIP_RETURN_CODE 77 TIMEOUT 300)

# The systemd units' sandbox, as `systemd-analyze security --offline=true` rates it (a second).
add_test(NAME unit-security
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/packaging/unit-security.sh
    ${CMAKE_BINARY_DIR}/hotmigd/hotmigd.service 5.0
    ${CMAKE_BINARY_DIR}/guest-agent/hotmig-agent.service 4.0
    # With the verbs layer's peer broker (--peer-listen): the shipped drop-in and the role's
    # IPAddressAllow= for the control network.
    ${CMAKE_BINARY_DIR}/guest-agent/hotmig-agent.service,${PROJECT_SOURCE_DIR}/guest-agent/hotmig-agent-peer.conf,${CMAKE_CURRENT_SOURCE_DIR}/packaging/hotmig-agent-peer-allow.conf 4.0)
set_tests_properties(unit-security PROPERTIES LABELS "package;unit" TIMEOUT 60)
