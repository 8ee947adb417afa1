# hotmigd's local API requests and the plans they carry (engine/local-protocol.c,
# snapshot.c). The corpus always replays as a normal test (label fuzz). With clang and
# -DHM_FUZZ=ON local-request-fuzz is also built as a libFuzzer binary:
#   build/tests/local-request-fuzz tests/fuzz/corpus/local-request
hm_add_test(local-request-fuzz-replay fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/local-request-fuzz.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz-replay.c
  LIBS hm-engine
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/local-request)

if(HM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(local-request-fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/local-request-fuzz.c)
  target_link_libraries(local-request-fuzz PRIVATE hm-engine)
  target_compile_options(local-request-fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(local-request-fuzz PRIVATE -fsanitize=fuzzer)
endif()
