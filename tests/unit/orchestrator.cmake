hm_add_test(test-orchestrator unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test-orchestrator.c
  LIBS hm-orchestrator)
