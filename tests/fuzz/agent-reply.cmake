# The host's reader of agent replies (engine/agent-client.c) against hostile input. The
# corpus replays as a normal test (label fuzz); with clang and -DHM_FUZZ=ON agent-reply-fuzz is
# also a libFuzzer binary:  build/tests/agent-reply-fuzz tests/fuzz/corpus/agent-reply
hm_add_test(agent-reply-fuzz-replay fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/agent-reply-fuzz.c
          ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz-replay.c
  LIBS hm-engine
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/agent-reply)

if(HM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(agent-reply-fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/agent-reply-fuzz.c)
  target_link_libraries(agent-reply-fuzz PRIVATE hm-engine)
  target_compile_options(agent-reply-fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(agent-reply-fuzz PRIVATE -fsanitize=fuzzer)
endif()
