# JSON string literals of hm-common (common/json.c), checked against json-glib.
hm_add_test(json-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/json-test.c
  LIBS hm-common PkgConfig::JSONGLIB)
# The log writer (common/common.c): --verbose shows hotmig's debug lines, not GLib's.
hm_add_test(log-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/log-test.c
  LIBS hm-common)
