# migrate-vm's command line without a hypervisor (options, combinations, config, exit codes),
# its man pages and its bash completion.
add_test(NAME migrate-vm-cli
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/cli-test.sh $<TARGET_FILE:migrate-vm>
          ${PROJECT_SOURCE_DIR})
# Docs that match the code: the man pages render and document every --help option, hotmigd(8)
# names every key it reads, the docs' ini examples pass config check, the exit codes agree.
add_test(NAME man-pages
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/docs-test.sh ${PROJECT_SOURCE_DIR}
          $<TARGET_FILE:migrate-vm> $<TARGET_FILE:hotmigd> $<TARGET_FILE:hotmig-agent>
          $<TARGET_FILE:hotmig-sriov>)
add_test(NAME bash-completion
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/completion-test.sh
          ${PROJECT_SOURCE_DIR}/contrib/bash-completion/migrate-vm)
set_tests_properties(migrate-vm-cli man-pages bash-completion PROPERTIES LABELS unit)
