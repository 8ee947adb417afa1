# The cluster side of hotmigd over fakes: the inventory (fake hypervisor adapters and hotmigd
# client), its snapshot export read back by the planner's parser, the scheduler runner with a
# fake migrate function.
hm_add_test(cluster-test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/cluster-test.c ${CMAKE_CURRENT_LIST_DIR}/fake-agent-channel.c
  LIBS hm-hotmigd)
