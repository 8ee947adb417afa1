# hotmigd's pool and API without TLS, over a fake host (orchestrator/vfd-pool.c, vfd-api.c).
# The real host adapter (vfd-host.c) on the ConnectX-6 fixture tree and libvirt's test driver.
hm_add_test(vfd-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/vfd-test.c ${CMAKE_CURRENT_SOURCE_DIR}/unit/vfd-fake-host.c
  LIBS hm-vfd
  ENV HM_FIXTURES=${CMAKE_CURRENT_SOURCE_DIR}/fixtures)
# The TLS server and the client migrate-vm uses, in one process, with a throwaway PKI.
hm_add_test(vfd-tls-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/vfd-tls-test.c ${CMAKE_CURRENT_SOURCE_DIR}/unit/vfd-fake-host.c
  LIBS hm-vfd
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-pki.sh)
