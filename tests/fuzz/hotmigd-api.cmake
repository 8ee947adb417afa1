# hotmigd's API (hotmigd/api.c) over the unit tests' fake host. The corpus always
# replays as a normal test (label fuzz); with clang and -DHM_FUZZ=ON hotmigd-api-fuzz is also built
# as a libFuzzer binary:
#   build/tests/hotmigd-api-fuzz -max_len=20000 tests/fuzz/corpus/hotmigd-api
hm_add_test(hotmigd-api-fuzz-replay fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/hotmigd-api-fuzz.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz-replay.c
          ${CMAKE_CURRENT_SOURCE_DIR}/unit/pool-fake-host.c
  LIBS hm-hotmigd
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/hotmigd-api)
target_include_directories(hotmigd-api-fuzz-replay PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)

if(HM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(hotmigd-api-fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/hotmigd-api-fuzz.c
                 ${CMAKE_CURRENT_SOURCE_DIR}/unit/pool-fake-host.c)
  target_include_directories(hotmigd-api-fuzz PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
  target_link_libraries(hotmigd-api-fuzz PRIVATE hm-hotmigd)
  target_compile_options(hotmigd-api-fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(hotmigd-api-fuzz PRIVATE -fsanitize=fuzzer)
endif()
