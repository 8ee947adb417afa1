# What the packages carry besides the binaries: the configuration (the commented sample,
# installed as /etc/hotmig/hotmig.conf and as documentation), the man pages, the bash
# completion. Components as in cmake/HotmigPackaging.cmake.
set(HM_SYSCONFDIR /etc CACHE PATH "Where hotmig/hotmig.conf goes (absolute; /etc for packages)")

install(FILES ${PROJECT_SOURCE_DIR}/etc/hotmig.conf.sample
  DESTINATION ${HM_SYSCONFDIR}/hotmig RENAME hotmig.conf COMPONENT hotmig)
install(FILES ${PROJECT_SOURCE_DIR}/etc/hotmig.conf.sample
  DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/hotmig COMPONENT hotmig)
install(FILES ${PROJECT_SOURCE_DIR}/man/migrate-vm.1
  DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT hotmig)
install(FILES ${PROJECT_SOURCE_DIR}/man/hotmig-sriov.8
  DESTINATION ${CMAKE_INSTALL_MANDIR}/man8 COMPONENT hotmig)
install(FILES ${PROJECT_SOURCE_DIR}/man/hotmig-agent.8
  DESTINATION ${CMAKE_INSTALL_MANDIR}/man8 COMPONENT hotmig-agent)
install(FILES ${PROJECT_SOURCE_DIR}/man/hotmigd.8
  DESTINATION ${CMAKE_INSTALL_MANDIR}/man8 COMPONENT hotmig)
# hotmigd's API reference, for the operators who set up the daemons and their certificates,
# and its failure-prediction hook (Alertmanager, the socket, the predictor command).
install(FILES ${PROJECT_SOURCE_DIR}/docs/hotmigd.md ${PROJECT_SOURCE_DIR}/docs/alerts.md
  ${PROJECT_SOURCE_DIR}/docs/hardware.md
  DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/hotmig COMPONENT hotmig)
# The agent unit's drop-in for the verbs layer's peer broker (--peer-listen): opt-in, the
# hotmig_guest role or the operator copies it into /etc/systemd/system/hotmig-agent.service.d/.
install(FILES ${PROJECT_SOURCE_DIR}/guest-agent/hotmig-agent-peer.conf
  DESTINATION ${CMAKE_INSTALL_DATADIR}/hotmig COMPONENT hotmig-agent)
# The cluster's certificates, laid out as libvirt's PKI (docs/hardware.md, section 5).
install(PROGRAMS ${PROJECT_SOURCE_DIR}/contrib/hotmig-make-certs
  DESTINATION ${CMAKE_INSTALL_DATADIR}/hotmig COMPONENT hotmig)

# bash-completion's own directory when its pkg-config file says where, else the usual one.
pkg_get_variable(HM_BASH_COMPLETION_DIR bash-completion completionsdir)
if(NOT HM_BASH_COMPLETION_DIR)
  set(HM_BASH_COMPLETION_DIR ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
endif()
install(FILES ${PROJECT_SOURCE_DIR}/contrib/bash-completion/migrate-vm
  DESTINATION ${HM_BASH_COMPLETION_DIR} COMPONENT hotmig)
