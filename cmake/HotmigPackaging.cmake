# Debian packages: `cmake --build BUILD --target package` writes four .deb files into BUILD.
#   hotmig          migrate-vm, hotmigd (+ unit), hotmig-sriov, /etc/hotmig/hotmig.conf, bash
#                   completion, migrate-vm(1), hotmigd(8), hotmig-sriov(8)
#   hotmig-agent    hotmig-agent, its systemd unit and udev rule, hotmig-agent(8)
#   libhotmig0      libhotmig.so.0 (linked into MPI processes: libc only)
#   libhotmig-dev   hotmig.h, libhotmig.so, hotmig.pc
# Configure with -DHM_PACKAGES=ON -DCMAKE_INSTALL_PREFIX=/usr (tests/packaging/run does);
# without HM_PACKAGES there is no package target, and with it another prefix is an error:
# the units, the udev rule and the maintainer scripts name /usr paths.
# Dependencies come from dpkg-shlibdeps, plus what is loaded at run time: glib-networking is
# GIO's TLS backend (hotmigd and migrate-vm's hotmigd client speak TLS through it).
# Maintainer scripts (cmake/debian/): hotmig's and hotmig-agent's units are enabled on a first
# install, started (hotmigd) or pulled in by udev (the agent, when the guest has the port),
# restarted on an upgrade, stopped on removal, with daemon-reload, as dh_installsystemd does;
# tests/packaging/deb-lifecycle checks what they ask of systemd and udev.
option(HM_PACKAGES "Configure for the Debian packages (cmake --build B --target package); needs -DCMAKE_INSTALL_PREFIX=/usr" OFF)
if(NOT HM_PACKAGES)
  return()
endif()
if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  message(FATAL_ERROR "HM_PACKAGES: the packages install under /usr (units, udev rule, maintainer scripts), not '${CMAKE_INSTALL_PREFIX}': configure with -DCMAKE_INSTALL_PREFIX=/usr")
endif()
if(NOT HM_SYSCONFDIR STREQUAL "/etc")
  message(FATAL_ERROR "HM_PACKAGES: the packages' configuration goes to /etc, not HM_SYSCONFDIR '${HM_SYSCONFDIR}'")
endif()

# prerm and postrm are the same for both packages with a unit, but for its name.
function(hm_deb_scripts package unit)
  set(HM_DEB_PACKAGE ${package})
  set(HM_DEB_UNIT ${unit})
  foreach(script prerm postrm)
    configure_file(${CMAKE_CURRENT_LIST_DIR}/debian/${script}.in
      ${CMAKE_BINARY_DIR}/debian/${package}/${script} @ONLY
      FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  endforeach()
endfunction()
hm_deb_scripts(hotmig hotmigd.service)
hm_deb_scripts(hotmig-agent hotmig-agent.service)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME hotmig)
set(CPACK_PACKAGE_VENDOR "hotmig")
set(CPACK_PACKAGE_CONTACT "hotmig maintainers <hotmig@localhost>")
# No CPACK_PACKAGE_DESCRIPTION_SUMMARY: CPack would put it before every package's own
# description, and all four would have hotmig's summary. Each CPACK_DEBIAN_<C>_DESCRIPTION
# starts with its package's summary line.
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL hotmig hotmig-agent libhotmig0 libhotmig-dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/hotmig/hotmig")
# libhotmig0's own package is found by shlibdeps through the build tree, not a shlibs file.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/guest-agent/libhotmig)

set(CPACK_DEBIAN_HOTMIG_PACKAGE_NAME hotmig)
set(CPACK_DEBIAN_HOTMIG_DESCRIPTION
    "Live migration of KVM VMs that hold InfiniBand SR-IOV VFs
migrate-vm quiesces the guest's RDMA processes through hotmig-agent, unplugs the
VFs, live-migrates the domain peer-to-peer and plugs VFs on the destination,
undoing every phase when a later one fails. hotmigd, on every host, leases the
host's VFs to migrations over HTTPS with client certificates.")
set(CPACK_DEBIAN_HOTMIG_PACKAGE_DEPENDS "libvirt-clients, glib-networking")
set(CPACK_DEBIAN_HOTMIG_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_LIST_DIR}/debian/hotmig/conffiles
    ${CMAKE_CURRENT_LIST_DIR}/debian/hotmig/postinst ${CMAKE_BINARY_DIR}/debian/hotmig/prerm
    ${CMAKE_BINARY_DIR}/debian/hotmig/postrm)
set(CPACK_DEBIAN_HOTMIG_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_HOTMIG-AGENT_PACKAGE_NAME hotmig-agent)
set(CPACK_DEBIAN_HOTMIG-AGENT_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_LIST_DIR}/debian/hotmig-agent/postinst
    ${CMAKE_BINARY_DIR}/debian/hotmig-agent/prerm ${CMAKE_BINARY_DIR}/debian/hotmig-agent/postrm)
set(CPACK_DEBIAN_HOTMIG-AGENT_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_HOTMIG-AGENT_DESCRIPTION
    "hotmig in-guest agent
Runs in a guest whose processes use an SR-IOV VF for RDMA: quiesces and resumes
them when the host migrates the VM (hotmig's migrate-vm).")

set(CPACK_DEBIAN_LIBHOTMIG0_PACKAGE_NAME libhotmig0)
set(CPACK_DEBIAN_LIBHOTMIG0_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIBHOTMIG0_DESCRIPTION
    "hotmig client library
Linked into MPI processes so they can be quiesced and resumed around a live
migration of their VM. Depends on libc only.")
set(CPACK_DEBIAN_LIBHOTMIG0_PACKAGE_GENERATE_SHLIBS ON)

set(CPACK_DEBIAN_LIBHOTMIG-DEV_PACKAGE_NAME libhotmig-dev)
set(CPACK_DEBIAN_LIBHOTMIG-DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_LIBHOTMIG-DEV_DESCRIPTION
    "hotmig client library: development files
The header hotmig.h, the link library and the pkg-config file (pkg-config hotmig).")
set(CPACK_DEBIAN_LIBHOTMIG-DEV_PACKAGE_DEPENDS "libhotmig0 (= ${PROJECT_VERSION})")

include(CPack)
