# migrate-vm's command line without a hypervisor (options, combinations, config, exit codes),
# its man pages and its bash completion.
add_test(NAME migrate-vm-cli
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/cli-test.sh $<TARGET_FILE:migrate-vm>
          ${PROJECT_SOURCE_DIR})
add_test(NAME man-pages
  COMMAND sh -c "for p in '${PROJECT_SOURCE_DIR}'/man/*.[0-9]; do LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l \"$p\" 2>&1 >/dev/null | grep . && { echo \"man -l $p warns\"; exit 1; }; LC_ALL=C.UTF-8 MANWIDTH=80 man -l \"$p\" | grep -q '^NAME' || { echo \"$p: no NAME\"; exit 1; }; done; echo ok")
add_test(NAME bash-completion
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/unit/completion-test.sh
          ${PROJECT_SOURCE_DIR}/contrib/bash-completion/migrate-vm)
set_tests_properties(migrate-vm-cli man-pages bash-completion PROPERTIES LABELS unit)
