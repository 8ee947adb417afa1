# The configuration file parser (common/config.c) and the sample it documents.
hm_add_test(config-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/config-test.c
  LIBS hm-common
  ENV HM_CONFIG_SAMPLE=${PROJECT_SOURCE_DIR}/etc/hotmig.conf.sample
      HM_TEST_PKI=${CMAKE_CURRENT_SOURCE_DIR}/unit/test-pki.sh)
