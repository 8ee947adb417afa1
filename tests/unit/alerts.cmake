# The failure-prediction hook's pure parts (policies/alert-book.c, evacuate.c, schedule.c) and the
# parsers of its inputs (hotmigd/alert-parse.c).
hm_add_test(policies-alerts-test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/policies-alerts-test.c
  LIBS hm-policies)
hm_add_test(policies-schedule-test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/policies-schedule-test.c
  LIBS hm-policies)
hm_add_test(alert-parse-test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/alert-parse-test.c
  LIBS hm-hotmigd)
