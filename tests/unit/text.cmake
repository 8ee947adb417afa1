# Untrusted text made safe for terminals, logs and JSON (common/text.c).
hm_add_test(text-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/text-test.c
  LIBS hm-common)
