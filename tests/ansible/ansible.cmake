# The ansible roles run for real against localhost into a scratch root (tests/ansible/run).
# It installs the packages the packaging test builds: that test is its fixture.
set_tests_properties(packaging PROPERTIES FIXTURES_SETUP debs)
add_test(NAME ansible
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ansible/run ${PROJECT_SOURCE_DIR}
          ${CMAKE_BINARY_DIR}/packaging-test/build ${CMAKE_BINARY_DIR}/ansible-test)
set_tests_properties(ansible PROPERTIES LABELS ansible FIXTURES_REQUIRED debs TIMEOUT 1500)
# The role's comments document every hotmig.conf key with migrate-vm's default (no ansible
# needed: label unit).
add_test(NAME ansible-defaults
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ansible/defaults-test.sh $<TARGET_FILE:migrate-vm>
          ${PROJECT_SOURCE_DIR}/ansible/roles/hotmig_host/defaults/main.yml)
set_tests_properties(ansible-defaults PROPERTIES LABELS unit)
