hm_add_test(xml-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/xml-test.c
  LIBS hm-xml)
