# Fuzzing of the failure-prediction hook's event line parser (hotmigd/alert-parse.c)
# and of the alert book behind it. The corpus always replays as a normal test (label fuzz).
# With clang and -DHM_FUZZ=ON alert-line-fuzz is also built as a libFuzzer binary:
#   build/tests/alert-line-fuzz -max_len=65536 tests/fuzz/corpus/alert-line
hm_add_test(alert-line-fuzz-replay fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/alert-line-fuzz.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz-replay.c
  LIBS hm-hotmigd
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/alert-line)

if(HM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(alert-line-fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/alert-line-fuzz.c)
  target_link_libraries(alert-line-fuzz PRIVATE hm-hotmigd)
  target_compile_options(alert-line-fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(alert-line-fuzz PRIVATE -fsanitize=fuzzer)
endif()
