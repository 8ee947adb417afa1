# A real hotmigd on 127.0.0.1 with a throwaway CA and a fixture pool, curl as the client: the
# lease races, expiry, restart, refused certificates (tests/unit/hotmigd-test.sh; ~15 s).
add_test(NAME hotmigd-test
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/hotmigd-test.sh $<TARGET_FILE:hotmigd> ${PROJECT_SOURCE_DIR}
    $<TARGET_FILE:migrate-vm>)
set_tests_properties(hotmigd-test PROPERTIES LABELS unit TIMEOUT 240)
