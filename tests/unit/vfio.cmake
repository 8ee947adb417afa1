# hm-hotplug's vfio binding on a sysfs fixture tree (tests/unit/vfio-test.c builds it).
hm_add_test(vfio-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/vfio-test.c ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-dir.c
  LIBS hm-hotplug)
