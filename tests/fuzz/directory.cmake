# The peer directory's announcement parser and table (guest-agent/agent/dir-msg.c,
# dir-table.c) against hostile datagrams. The corpus replays as a normal test (label fuzz); with
# clang and -DHM_FUZZ=ON directory-fuzz is also a libFuzzer binary:
#   build/tests/directory-fuzz -max_len=4096 tests/fuzz/corpus/directory
hm_add_test(directory-fuzz-replay fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/directory-fuzz.c
          ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz-replay.c
  LIBS hotmig-agent-core
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/directory)

if(HM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(directory-fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/directory-fuzz.c)
  target_link_libraries(directory-fuzz PRIVATE hotmig-agent-core)
  target_compile_options(directory-fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(directory-fuzz PRIVATE -fsanitize=fuzzer)
endif()
