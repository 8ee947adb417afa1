hm_add_test(workload-test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/workload-test.c
  LIBS hm-workload-core)
