# hm_add_test(NAME LABEL SOURCES src... LIBS lib... [ARGS arg...] [ENV var=value...])
# Builds one cmocka test binary and registers it with CTest under LABEL (exit 77: skipped).
function(hm_add_test name label)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;ARGS;ENV" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} PkgConfig::CMOCKA)
  add_test(NAME ${name} COMMAND ${name} ${T_ARGS})
  # A test that cannot run here exits 77: CTest shows it skipped, not passed.
  set_tests_properties(${name} PROPERTIES LABELS ${label} SKIP_RETURN_CODE 77)
  if(T_ENV)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${T_ENV}")
  endif()
endfunction()
