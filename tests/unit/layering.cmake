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
# Calls, read from the objects' symbol tables (STYLE.md: files call downward only): no two
# files of a library call each other in a circle; the verbs layer's files call only their own
# layer or lower ones (HM_VERBS_LAYER_*, guest-agent/CMakeLists.txt).
set(HM_CALLS_LAYERS)
foreach(layer ${HM_VERBS_LAYERS})
  set(files)
  foreach(f ${HM_VERBS_LAYER_${layer}})
    get_filename_component(name ${f} NAME)
    list(APPEND files ${name})
  endforeach()
  list(JOIN files "," files)
  string(APPEND HM_CALLS_LAYERS "${layer}=${files} ")
endforeach()
set(HM_CALLS_LIBS)
foreach(lib hm-common hm-xml hm-hotplug hm-policies hm-engine hm-hotmigd hotmigd migrate-vm
    hotmig-agent-core)
  list(APPEND HM_CALLS_LIBS --lib ${lib} $<TARGET_OBJECTS:${lib}>)
endforeach()
add_test(NAME calls-check
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/calls-check.sh ${HM_CALLS_LIBS})
add_test(NAME calls-check-verbs
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/calls-check.sh --layers "${HM_CALLS_LAYERS}"
          --lib hotmig-verbs $<TARGET_OBJECTS:hotmig-verbs>)
add_test(NAME calls-check-self-test
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/calls-check.sh --self-test)
set_tests_properties(calls-check calls-check-verbs calls-check-self-test PROPERTIES LABELS unit)
