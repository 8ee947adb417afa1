# The .deb packages build, install into a throwaway root and run (tests/packaging/run).
# About a minute: it builds the tree again with the release settings.
add_test(NAME packaging
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/packaging/run ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR}/packaging-test)
set_tests_properties(packaging PROPERTIES LABELS package TIMEOUT 900)
