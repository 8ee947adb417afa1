# Every command the test, lab and demo scripts call comes from a package tests/install-deps
# installs (tests/deps.list, the lab's HOTMIG_LAB_PACKAGES) or from an essential one.
add_test(NAME deps-check
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/deps-check.sh ${PROJECT_SOURCE_DIR})
add_test(NAME deps-check-self-test
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/deps-check.sh --self-test)
set_tests_properties(deps-check deps-check-self-test PROPERTIES LABELS unit)
