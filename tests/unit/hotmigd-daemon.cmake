# hotmigd's daemon object and local API over fakes (no hosts, no TLS): the local socket's bad
# lines and size limit, drains followed to their end, the evacuation entry point, plans and runs.
hm_add_test(hotmigd-daemon-test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/hotmigd-daemon-test.c ${CMAKE_CURRENT_LIST_DIR}/test-dir.c
  LIBS hm-hotmigd)
