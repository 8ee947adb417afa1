# hotmig-agent parser fuzzing. The corpus always replays as a normal test (label fuzz). With
# clang and -DHM_FUZZ=ON agent-fuzz is also built as a libFuzzer binary:
#   build/tests/agent-fuzz -max_len=1024 tests/fuzz/corpus/agent   (tests/fuzz/run: why 1024)
hm_add_test(agent-fuzz-replay fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/agent-fuzz.c
          ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz-replay.c
  LIBS hotmig-agent-core
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/agent)

if(HM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(agent-fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/agent-fuzz.c)
  target_link_libraries(agent-fuzz PRIVATE hotmig-agent-core)
  target_compile_options(agent-fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(agent-fuzz PRIVATE -fsanitize=fuzzer)
endif()
