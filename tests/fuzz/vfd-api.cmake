# hotmigd's API (orchestrator/vfd-api.c) over the unit tests' fake host. The corpus always
# replays as a normal test (label fuzz); with clang and -DHM_FUZZ=ON vfd-api-fuzz is also built
# as a libFuzzer binary:
#   build/tests/vfd-api-fuzz -max_len=20000 tests/fuzz/corpus/vfd-api
hm_add_test(vfd-api-fuzz-replay fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/vfd-api-fuzz.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz-replay.c
          ${CMAKE_CURRENT_SOURCE_DIR}/unit/vfd-fake-host.c
  LIBS hm-vfd
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/vfd-api)
target_include_directories(vfd-api-fuzz-replay PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)

if(HM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(vfd-api-fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/vfd-api-fuzz.c
                 ${CMAKE_CURRENT_SOURCE_DIR}/unit/vfd-fake-host.c)
  target_include_directories(vfd-api-fuzz PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
  target_link_libraries(vfd-api-fuzz PRIVATE hm-vfd)
  target_compile_options(vfd-api-fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(vfd-api-fuzz PRIVATE -fsanitize=fuzzer)
endif()
