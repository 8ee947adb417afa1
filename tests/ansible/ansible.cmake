# The ansible roles run for real against localhost into a scratch root (tests/ansible/run).
# It installs the packages the packaging test builds: that test is its fixture.
set_tests_properties(packaging PROPERTIES FIXTURES_SETUP debs)
add_test(NAME ansible
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ansible/run ${PROJECT_SOURCE_DIR}
          ${CMAKE_BINARY_DIR}/packaging-test/build ${CMAKE_BINARY_DIR}/ansible-test)
set_tests_properties(ansible PROPERTIES LABELS ansible FIXTURES_REQUIRED debs TIMEOUT 600)
