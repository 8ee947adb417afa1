# VF lease record fuzzing (hotplug/lease.c). The corpus always replays as a normal test (label
# fuzz); with clang and -DHM_FUZZ=ON lease-fuzz is also built as a libFuzzer binary:
#   build/tests/lease-fuzz -max_len=20000 tests/fuzz/corpus/lease
hm_add_test(lease-fuzz-replay fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/lease-fuzz.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz-replay.c
  LIBS hm-hotplug
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/lease)

if(HM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(lease-fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/lease-fuzz.c)
  target_link_libraries(lease-fuzz PRIVATE hm-hotplug)
  target_compile_options(lease-fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(lease-fuzz PRIVATE -fsanitize=fuzzer)
endif()
