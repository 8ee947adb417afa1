# hotmigd's pool and API without TLS, over a fake host (hotmigd/pool.c, hotmigd/api.c).
# The real host adapter (hotmigd/host.c) on the ConnectX-6 fixture tree and libvirt's test driver.
hm_add_test(hotmigd-pool-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/hotmigd-pool-test.c ${CMAKE_CURRENT_SOURCE_DIR}/unit/pool-fake-host.c
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-dir.c
  LIBS hm-hotmigd
  ENV HM_FIXTURES=${CMAKE_CURRENT_SOURCE_DIR}/fixtures)
# The TLS server and the client migrate-vm uses, in one process, with a throwaway PKI.
hm_add_test(hotmigd-tls-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/hotmigd-tls-test.c ${CMAKE_CURRENT_SOURCE_DIR}/unit/pool-fake-host.c
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-dir.c
  LIBS hm-hotmigd
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-pki.sh)
