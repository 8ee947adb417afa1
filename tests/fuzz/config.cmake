# Configuration parser fuzzing (common/config.c). The corpus always replays as a normal test
# (label fuzz); with clang and -DHM_FUZZ=ON config-fuzz is also built as a libFuzzer binary:
#   build/tests/config-fuzz -max_len=70000 tests/fuzz/corpus/config
hm_add_test(config-fuzz-replay fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/config-fuzz.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz-replay.c
  LIBS hm-common
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/config)

if(HM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(config-fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/config-fuzz.c)
  target_link_libraries(config-fuzz PRIVATE hm-common)
  target_compile_options(config-fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(config-fuzz PRIVATE -fsanitize=fuzzer)
endif()
