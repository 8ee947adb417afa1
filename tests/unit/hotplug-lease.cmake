# VF leases (hotplug/lease.c): forks 16 processes and starts 16 threads that race for 8 VFs.
hm_add_test(hotplug-lease-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/hotplug-lease-test.c
  LIBS hm-hotplug)
