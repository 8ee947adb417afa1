# SR-IOV discovery (hotplug/sysfs.c) and the libpci adapter (hotplug/pci-libpci.c) on the
# fixture trees and lspci dumps of tests/fixtures (see tests/fixtures/README.md), and the
# hotmig-sriov tool on them.
hm_add_test(hotplug-sysfs-test unit
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/hotplug-sysfs-test.c
  LIBS hm-hotplug PkgConfig::JSONGLIB
  ENV HM_FIXTURES=${CMAKE_CURRENT_SOURCE_DIR}/fixtures HM_SRIOV_TOOL=$<TARGET_FILE:hotmig-sriov>)
add_dependencies(hotplug-sysfs-test hotmig-sriov)
