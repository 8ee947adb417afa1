hm_add_test(policies-test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/policies-test.c
  LIBS hm-policies)
hm_add_test(policies-snapshot-test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/policies-snapshot-test.c
  LIBS hm-engine)
