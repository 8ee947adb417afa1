# The failure-prediction hook of hotmigd (hotmigd/alerts.c, alerts-input.c, the
# alert listener in hotmigd/server.c) and /metrics (metrics.c). Two real hotmigds with curl, socat
# and a predictor script as inputs (tests/unit/hotmigd-alerts-test.sh; ~15 s).
add_test(NAME hotmigd-alerts-test
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/hotmigd-alerts-test.sh $<TARGET_FILE:hotmigd> ${PROJECT_SOURCE_DIR})
set_tests_properties(hotmigd-alerts-test PROPERTIES LABELS unit TIMEOUT 120)
# The hook's logic with fakes for the other daemons and the scheduler: the bearer check, bad
# bodies, acting on the book, who acts, /v1/alerts.
hm_add_test(alerts-daemon-test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/alerts-daemon-test.c
  LIBS hm-hotmigd)
# /metrics in the Prometheus text format.
hm_add_test(metrics-test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/metrics-test.c
  LIBS hm-hotmigd)
