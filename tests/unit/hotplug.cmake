hm_add_test(hotplug-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/hotplug-test.c
  LIBS hm-hotplug)
