# Fuzzing of the verbs peer channel's authenticated frame (guest-agent/verbs/hv-auth.c). The
# corpus always replays as a normal test (label fuzz). With clang and -DHM_FUZZ=ON also a
# libFuzzer binary: build/tests/verbs-auth-fuzz -max_len=16600 tests/fuzz/corpus/verbs-auth
hm_add_test(verbs-auth-fuzz-replay fuzz
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/verbs-auth-fuzz.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz-replay.c
  LIBS hotmig-verbs-proto PkgConfig::GLIB
  ARGS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/verbs-auth)

if(HM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(verbs-auth-fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/verbs-auth-fuzz.c
                 ${PROJECT_SOURCE_DIR}/guest-agent/verbs/hv-auth.c
                 ${PROJECT_SOURCE_DIR}/guest-agent/verbs/hv-sha256.c)
  target_include_directories(verbs-auth-fuzz PRIVATE ${PROJECT_SOURCE_DIR}/guest-agent/verbs)
  target_compile_options(verbs-auth-fuzz PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(verbs-auth-fuzz PRIVATE -fsanitize=fuzzer,address,undefined)
endif()
