# SR-IOV discovery fuzzing (hotplug/sysfs.c parsers, lspci dumps through the libpci adapter,
# the JSON strings of hotmig-sriov). The corpus always replays as a normal test (label fuzz);
# with clang and -DHM_FUZZ=ON sysfs-fuzz is also built as a libFuzzer binary:
#   build/tests/sysfs-fuzz -max_len=65536 tests/fuzz/corpus/sysfs
hm_add_test(sysfs-fuzz-replay fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/sysfs-fuzz.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz-replay.c
  LIBS hm-hotplug
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/sysfs)

if(HM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(sysfs-fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/sysfs-fuzz.c)
  target_link_libraries(sysfs-fuzz PRIVATE hm-hotplug)
  target_compile_options(sysfs-fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(sysfs-fuzz PRIVATE -fsanitize=fuzzer)
endif()
