# End-to-end tests on the emulated cluster (lab/hotmig-lab): root, the lab's packages, ~1 min
# each. The lab is one CTest fixture shared by all of them.
set(HM_LAB ${PROJECT_SOURCE_DIR}/lab/hotmig-lab)
set(HM_E2E ${CMAKE_CURRENT_LIST_DIR})

# tests/e2e/lab-fixture.sh: a lab instance another live CTest run uses is refused, untouched.
add_test(NAME e2e-lab-up COMMAND bash ${HM_E2E}/lab-fixture.sh up)
set_tests_properties(e2e-lab-up PROPERTIES FIXTURES_SETUP lab LABELS e2e TIMEOUT 600)
add_test(NAME e2e-lab-down COMMAND bash ${HM_E2E}/lab-fixture.sh down)
set_tests_properties(e2e-lab-down PROPERTIES FIXTURES_CLEANUP lab LABELS e2e TIMEOUT 120)

function(hm_add_e2e name script)
  add_test(NAME ${name} COMMAND bash ${HM_E2E}/${script})
  set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED lab LABELS e2e TIMEOUT 900
                       ENVIRONMENT "HM_BUILD=${CMAKE_BINARY_DIR};${ARGN}")
endfunction()

hm_add_e2e(e2e-migrate-roundtrip-lazy migrate-roundtrip.sh MODE=lazy)
hm_add_e2e(e2e-migrate-roundtrip-threaded migrate-roundtrip.sh MODE=threaded)
hm_add_e2e(e2e-plug-fail plug-fail.sh)
hm_add_e2e(e2e-bad-input bad-input.sh)
hm_add_e2e(e2e-kill-walk kill-walk.sh)
hm_add_e2e(e2e-migrate-roundtrip-lazy-fallback migrate-roundtrip.sh MODE=lazy FALLBACK=tcp)
hm_add_e2e(e2e-migrate-roundtrip-threaded-fallback migrate-roundtrip.sh MODE=threaded FALLBACK=tcp)
hm_add_e2e(e2e-cancel cancel.sh)
hm_add_e2e(e2e-cancel-hup cancel.sh SIGNAL=HUP)
hm_add_e2e(e2e-agent-stops agent-stops.sh)
# The agent's standby RDMA device (--standby on the control NIC, issue 30): made at each prepare,
# never handed out at resume, removed after it; a NIC the guest lacks is said (inventory).
hm_add_e2e(e2e-agent-standby agent-standby.sh)
hm_add_e2e(e2e-libvirtd-restart libvirtd-restart.sh)
# Each host's hotmigd over mutual TLS, through the client migrate-vm uses.
add_executable(hm-hotmigd-call ${HM_E2E}/hotmigd-call.c)
target_link_libraries(hm-hotmigd-call PRIVATE hm-engine)
hm_add_e2e(e2e-hotmigd hotmigd.sh)
hm_add_e2e(e2e-dry-run dry-run.sh)
hm_add_e2e(e2e-sysfs-nvme sysfs-nvme.sh)
# The failure-prediction hook: a real Alertmanager fires at both hotmigds, A is evacuated.
hm_add_e2e(e2e-alertmanager alertmanager.sh)
# hotmigd's scheduler drains host A (two ping-pong guests), asked of B's hotmigd: moves driven
# from A through POST /v1/migrations.
hm_add_e2e(e2e-drain drain.sh)
# An alert about A while A's hotmigd is down: B acts for A and drives the evacuation itself.
hm_add_e2e(e2e-deputy deputy.sh)
# A hotmigd killed with SIGKILL in the migrate phase of a move it drives, started again: it
# recovers the journal at its start, the guest resumes with its VF (issue 15, item 8).
hm_add_e2e(e2e-hotmigd-restart hotmigd-restart.sh)
# migrate-vm's virsh options (persistent, undefinesource, migrateuri, bandwidth, parallel,
# auto-converge, post-copy, the timeout actions, --no-X) checked against libvirt and QEMU.
hm_add_e2e(e2e-migrate-options migrate-options.sh)
# Guest memory survives bandwidth-limited migrations (plain virsh, hm-memck in the guest): the
# lab's emulator keeps QEMU 7.2's TCG from losing writes (docs/reliability.md).
hm_add_e2e(e2e-migrate-memory migrate-memory.sh)
# The lab's "VF" is a virtio-net stand-in (docs/lab.md): these tests move guests with it, so
# they exercise hotmig's VF paths against the stand-in, not a real <hostdev>, vfio binding or
# GUID setting (docs/reliability.md, "What runs against what"). `ctest -L standin` lists them.
set_tests_properties(e2e-migrate-roundtrip-lazy e2e-migrate-roundtrip-threaded e2e-plug-fail
  e2e-bad-input e2e-kill-walk e2e-migrate-roundtrip-lazy-fallback
  e2e-migrate-roundtrip-threaded-fallback e2e-cancel e2e-agent-stops e2e-libvirtd-restart
  e2e-hotmigd e2e-dry-run e2e-alertmanager e2e-drain e2e-deputy e2e-migrate-options
  e2e-hotmigd-restart PROPERTIES LABELS "e2e;standin")
# The soak's CI version (issue 31; tests/soak/soak.sh, the soak itself is label soak): 32 steps of
# seed 8 moving a ping-pong pair between A and B by every path (migrate-vm, drains, both ends at
# once, hotmigd's balance, an Alertmanager alert evacuating a host; a step of the last three
# moves one VM or two), 20 of them under a fault (kill -9 and --recover, libvirtd restarts, a
# frozen agent, a congested VF link, loss on the migration and control links, no VF, a refused
# plug, a VF not released), every invariant after each step (docs/reliability.md, "Soak"). No
# hotmigd restart: one at the destination during a move leaves that move's lease behind (a
# finding, docs/reliability.md), e2e-hotmigd-restart covers the restart. A step takes 5-10 s at
# load 10-20: 32 steps, not 50.
hm_add_e2e(e2e-soak-short ../soak/soak.sh SOAK_SEED=8 SOAK_MIGRATIONS=32 SOAK_FAULT_PCT=50
           SOAK_FAULTS=kill,libvirtd,agent,netem,novf,plugfail,nodetach,linkloss
           SOAK_AGENT_EVERY=4 SOAK_OUT=${CMAKE_BINARY_DIR}/tests/soak-short)
set_tests_properties(e2e-soak-short PROPERTIES LABELS "e2e;standin")
# The transparent verbs layer (docs/verbs-layer.md): unmodified ibv_rc_pingpong under
# LD_PRELOAD=libhotmig-verbs.so across four live migrations (client A->B->A, server B->A->B).
hm_add_e2e(e2e-verbs-rc-pingpong verbs-rc-pingpong.sh EVENTS=0)
# (with a completion channel, and without HOTMIG_VERBS_PEERS: the agents' directory)
hm_add_e2e(e2e-verbs-rc-pingpong-events verbs-rc-pingpong.sh EVENTS=1 E2E_PEERS=directory)
# The same without a VM move: quiesce, rdma link del/add rxe0, resume, after burning QPNs.
hm_add_e2e(e2e-verbs-device-swap verbs-device-swap.sh)
# A client connecting after the server's swap: the virtual QPN it was handed is looked up.
hm_add_e2e(e2e-verbs-late-connect verbs-late-connect.sh)
# perftest (ib_write_bw, ib_read_lat with --use_old_post_send) across a migration each.
hm_add_e2e(e2e-verbs-perftest verbs-perftest.sh)
# UD (ibv_ud_pingpong): the peer holds its sends while the mover is away (UDHOLD/UDMAP).
hm_add_e2e(e2e-verbs-ud-pingpong verbs-ud-pingpong.sh)
# The peer protocol as a trust boundary (issue 28): forged requests without the job's key and a
# connection flood during an ibv_rc_pingpong and a move; all refused, the move and the tool pass.
hm_add_e2e(e2e-verbs-hostile-peer verbs-hostile-peer.sh)
# The standby path (issue 30): the connection runs over soft-RoCE on the control NICs while
# the client's VF is away (client A->B->A), its iterations going on during the copy.
hm_add_e2e(e2e-standby-rc-pingpong standby-rc-pingpong.sh)
# The same with ibv_srq_pingpong: 4 QPs sharing one SRQ at each end (the server's SRQ follows
# onto its standby device), a shorter run.
hm_add_e2e(e2e-standby-srq-pingpong standby-rc-pingpong.sh TOOL=srq SECONDS_OF_TRAFFIC=60)
set_tests_properties(e2e-verbs-rc-pingpong e2e-verbs-rc-pingpong-events e2e-verbs-device-swap
  e2e-verbs-late-connect e2e-verbs-perftest e2e-verbs-ud-pingpong e2e-verbs-hostile-peer
  e2e-standby-rc-pingpong e2e-standby-srq-pingpong PROPERTIES LABELS "e2e;standin")
# Real MPI jobs (Debian's ScaLAPACK LU driver over Open MPI or MPICH on UCX verbs, the verbs
# layer preloaded) across migrate-vm and a drain (issue 18). Their three guests boot the root
# image 'mpi' (built once into the lab's cache, ~3-5 min cold) once for all of them: fixture
# 'mpi' (e2e-mpi-up / e2e-mpi-down). The drain runs last (it leaves mpi-g1, mpi-g2 on B).
function(hm_add_e2e_mpi name)
  add_test(NAME ${name} COMMAND bash ${HM_E2E}/mpi.sh)
  set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED "lab;mpi" LABELS e2e TIMEOUT 1200
                       ENVIRONMENT "HM_BUILD=${CMAKE_BINARY_DIR};${ARGN}")
endfunction()
# The same on the lab's InfiniBand fabric mode: fixture 'mpi-ib' (ibu-1 on A, ibu-2 on B).
function(hm_add_e2e_mpi_ib name)
  add_test(NAME ${name} COMMAND bash ${HM_E2E}/mpi.sh)
  set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED "lab;mpi-ib" LABELS "e2e;standin"
                       TIMEOUT 1200 ENVIRONMENT "HM_BUILD=${CMAKE_BINARY_DIR};E2E_FABRIC=ib;${ARGN}")
endfunction()
hm_add_e2e_mpi(e2e-mpi-up PHASE=up)
hm_add_e2e_mpi(e2e-mpi-down PHASE=down)
set_tests_properties(e2e-mpi-up PROPERTIES FIXTURES_REQUIRED lab FIXTURES_SETUP mpi)
set_tests_properties(e2e-mpi-down PROPERTIES FIXTURES_REQUIRED lab FIXTURES_CLEANUP mpi TIMEOUT 120)
hm_add_e2e_mpi(e2e-mpi-openmpi MPI=openmpi)
hm_add_e2e_mpi(e2e-mpi-mpich MPI=mpich)
# The standby path under a real MPI job (issue 30): the 2-rank Open MPI case, both agents with
# --standby: the mover's rank runs over the standby device, the peer's follows (its loopback
# QPs too: UCX's rc_verbs SRQ serves them, hv-sbloop.c).
hm_add_e2e_mpi(e2e-standby-mpi MPI=openmpi STANDBY=1)
hm_add_e2e_mpi(e2e-mpi-both-move MPI=openmpi BOTH=1)
hm_add_e2e_mpi(e2e-mpi-drain MPI=openmpi DRAIN=1)
set_tests_properties(e2e-mpi-drain PROPERTIES DEPENDS "e2e-mpi-openmpi;e2e-mpi-mpich;e2e-mpi-both-move")
# The lab's InfiniBand fabric mode (issue 29, item 1; docs/lab.md): guests booted with --fabric
# ib see an IB port (LID of the host's slot, SM, GID fe80::/64 + GUID); ibv_rc_pingpong without
# -g and ib_write_bw without -x pass; after a move the port is INIT until the lab SM sweeps.
hm_add_e2e(e2e-ib-fabric ib-fabric.sh)
set_tests_properties(e2e-ib-fabric PROPERTIES LABELS "e2e;standin")
# The verbs layer on the lab's InfiniBand fabric mode (issue 29): unmodified ibv_rc_pingpong
# without -g (LID-routed) across moves of each end, the peers found in the agents' directory.
hm_add_e2e(e2e-ib-rc-pingpong verbs-rc-pingpong.sh EVENTS=0 E2E_FABRIC=ib)
set_tests_properties(e2e-ib-rc-pingpong PROPERTIES LABELS "e2e;standin")
# perftest (ib_write_bw, ib_read_lat) without -x (LID-routed) across a move each, on IB.
hm_add_e2e(e2e-ib-perftest verbs-perftest.sh E2E_FABRIC=ib)
set_tests_properties(e2e-ib-perftest PROPERTIES LABELS "e2e;standin")
# The guest's GUIDs set by hotmigd on the destination VF (the stand-ins' PF driver, [pool]
# standin-guids) across A->B->A; a move whose GUIDs cannot be set is rolled back (issue 29).
hm_add_e2e(e2e-ib-identity ib-identity.sh)
set_tests_properties(e2e-ib-identity PROPERTIES LABELS "e2e;standin")
# Two root-image IB guests (image 'mpi', built once) on A and B for UCX and MPI in IB mode:
# fixture 'mpi-ib' (e2e-ib-mpi-up / e2e-ib-mpi-down).
hm_add_e2e_mpi_ib(e2e-ib-mpi-up PHASE=up)
hm_add_e2e_mpi_ib(e2e-ib-mpi-down PHASE=down)
set_tests_properties(e2e-ib-mpi-up PROPERTIES FIXTURES_REQUIRED lab FIXTURES_SETUP mpi-ib)
set_tests_properties(e2e-ib-mpi-down PROPERTIES FIXTURES_REQUIRED lab FIXTURES_CLEANUP mpi-ib
                     TIMEOUT 120)
# UCX in its IB mode there (no UCX_IB_GID_INDEX, no UCX_UD_ETH_DGID_CHECK): ucx_info, ucx_perftest
# and Open MPI's LU driver without the layer.
hm_add_e2e(e2e-ib-ucx ib-ucx.sh)
set_tests_properties(e2e-ib-ucx PROPERTIES FIXTURES_REQUIRED "lab;mpi-ib" TIMEOUT 1500)
# The MPI cases under the layer in IB mode (issue 29): LID-routed UCX, no HOTMIG_VERBS_PEERS
# (the agents' directory), the mover's LID changing at each move; results equal to the reference.
hm_add_e2e_mpi_ib(e2e-ib-mpi-openmpi MPI=openmpi)
hm_add_e2e_mpi_ib(e2e-ib-mpi-mpich MPI=mpich)
hm_add_e2e_mpi_ib(e2e-ib-mpi-both-move MPI=openmpi BOTH=1)
