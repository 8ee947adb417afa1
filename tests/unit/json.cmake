# JSON string literals of hm-common (common/json.c), checked against json-glib.
hm_add_test(json-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/json-test.c
  LIBS hm-common PkgConfig::JSONGLIB)
