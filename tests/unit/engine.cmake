hm_add_test(engine-test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/engine-test.c ${CMAKE_CURRENT_LIST_DIR}/fake-agent-channel.c
  LIBS hm-engine)
