# The layer rules (STYLE.md): a library includes only the libraries in its brackets.
add_test(NAME layering-check
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/layering-check.sh ${PROJECT_SOURCE_DIR})
add_test(NAME layering-check-self-test
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/layering-check.sh --self-test)
set_tests_properties(layering-check layering-check-self-test PROPERTIES LABELS unit)
# Short functions (STYLE.md): none of the project's C sources is over 100 lines.
add_test(NAME function-length-check
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/function-length-check.sh ${PROJECT_SOURCE_DIR})
add_test(NAME function-length-check-self-test
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/function-length-check.sh --self-test)
set_tests_properties(function-length-check function-length-check-self-test PROPERTIES LABELS unit)
