hm_add_test(engine-test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/engine-test.c
  LIBS hm-engine)
