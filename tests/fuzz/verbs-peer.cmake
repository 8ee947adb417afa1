# Fuzzing of the verbs layer's peer protocol parser (guest-agent/verbs/hv-proto.c). The corpus
# always replays as a normal test (label fuzz). With clang and -DHM_FUZZ=ON also a libFuzzer
# binary: build/tests/verbs-peer-fuzz -max_len=16385 tests/fuzz/corpus/verbs-peer
hm_add_test(verbs-peer-fuzz-replay fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/verbs-peer-fuzz.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz-replay.c
    ${PROJECT_SOURCE_DIR}/guest-agent/verbs/hv-udtab.c ${PROJECT_SOURCE_DIR}/guest-agent/verbs/hv-map.c
  LIBS hotmig-verbs-proto PkgConfig::GLIB PkgConfig::IBVERBS
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/verbs-peer)
target_include_directories(verbs-peer-fuzz-replay PRIVATE ${PROJECT_SOURCE_DIR}/guest-agent/verbs)

if(HM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  # the parser compiled into the target, so that libFuzzer's coverage instruments it
  add_executable(verbs-peer-fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/verbs-peer-fuzz.c
                 ${PROJECT_SOURCE_DIR}/guest-agent/verbs/hv-proto.c
                 ${PROJECT_SOURCE_DIR}/guest-agent/verbs/hv-udtab.c
                 ${PROJECT_SOURCE_DIR}/guest-agent/verbs/hv-map.c)
  target_include_directories(verbs-peer-fuzz PRIVATE ${PROJECT_SOURCE_DIR}/guest-agent/verbs)
  target_link_libraries(verbs-peer-fuzz PRIVATE PkgConfig::IBVERBS)
  target_compile_options(verbs-peer-fuzz PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(verbs-peer-fuzz PRIVATE -fsanitize=fuzzer,address,undefined)
endif()
