# hm-xml fuzzing. The corpus always replays as a normal test (label fuzz). With clang and
# -DHM_FUZZ=ON (best with CMAKE_C_FLAGS=-fsanitize=fuzzer-no-link so the libraries are
# instrumented too) xml-fuzz is also built as a libFuzzer binary:
#   build/tests/xml-fuzz -max_len=65536 tests/fuzz/corpus/xml
hm_add_test(xml-fuzz-replay fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/xml-fuzz.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz-replay.c
  LIBS hm-xml
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/xml)

if(HM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(xml-fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/xml-fuzz.c)
  target_link_libraries(xml-fuzz PRIVATE hm-xml)
  target_compile_options(xml-fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(xml-fuzz PRIVATE -fsanitize=fuzzer)
endif()
