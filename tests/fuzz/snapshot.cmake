# Snapshot fuzzing (engine/snapshot.c and the planners behind it). The corpus always
# replays as a normal test (label fuzz). With clang and -DHM_FUZZ=ON (best with
# CMAKE_C_FLAGS=-fsanitize=fuzzer-no-link) snapshot-fuzz is also built as a libFuzzer binary:
#   build/tests/snapshot-fuzz -max_len=8192 tests/fuzz/corpus/snapshot   (tests/fuzz/run: why 8192)
hm_add_test(snapshot-fuzz-replay fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/snapshot-fuzz.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz-replay.c
  LIBS hm-engine
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/snapshot)

if(HM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(snapshot-fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/snapshot-fuzz.c)
  target_link_libraries(snapshot-fuzz PRIVATE hm-engine)
  target_compile_options(snapshot-fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(snapshot-fuzz PRIVATE -fsanitize=fuzzer)
endif()
