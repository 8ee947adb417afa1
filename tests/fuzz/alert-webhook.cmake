# Fuzzing of the failure-prediction hook's Alertmanager webhook parser (hotmigd/alert-parse.c)
# and of the alert book behind it. The corpus always replays as a normal test (label fuzz).
# With clang and -DHM_FUZZ=ON alert-webhook-fuzz is also built as a libFuzzer binary:
#   build/tests/alert-webhook-fuzz -max_len=65536 tests/fuzz/corpus/alert-webhook
hm_add_test(alert-webhook-fuzz-replay fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/alert-webhook-fuzz.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz-replay.c
  LIBS hm-hotmigd
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/alert-webhook)

if(HM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(alert-webhook-fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/alert-webhook-fuzz.c)
  target_link_libraries(alert-webhook-fuzz PRIVATE hm-hotmigd)
  target_compile_options(alert-webhook-fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(alert-webhook-fuzz PRIVATE -fsanitize=fuzzer)
endif()
