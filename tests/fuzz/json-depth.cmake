# The JSON nesting guard (common/json.c) against the parser run after it (json-glib): what the
# guard lets through must not nest deeper as json-glib reads it. The corpus replays as a normal
# test (label fuzz); with clang and -DHM_FUZZ=ON json-depth-fuzz is also a libFuzzer binary:
#   build/tests/json-depth-fuzz tests/fuzz/corpus/json-depth
hm_add_test(json-depth-fuzz-replay fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/json-depth-fuzz.c
          ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz-replay.c
  LIBS hm-common PkgConfig::JSONGLIB
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/json-depth)

if(HM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(json-depth-fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/json-depth-fuzz.c)
  target_link_libraries(json-depth-fuzz PRIVATE hm-common PkgConfig::JSONGLIB)
  target_compile_options(json-depth-fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(json-depth-fuzz PRIVATE -fsanitize=fuzzer)
endif()
