# The InfiniBand identity of a VF: the logic over a fake netlink adapter, and the libnl adapter
# against the real kernel in a private network namespace (skips unless root).
hm_add_test(hotplug-ib-identity-test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/hotplug-ib-identity-test.c
          ${CMAKE_CURRENT_LIST_DIR}/netlink-fake.c ${CMAKE_CURRENT_LIST_DIR}/test-error.c
  LIBS hm-hotplug)
hm_add_test(hotplug-netlink-live-test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/hotplug-netlink-live-test.c
          ${CMAKE_CURRENT_LIST_DIR}/test-error.c
  LIBS hm-hotplug)
