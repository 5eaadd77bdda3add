"""Run a benchmark: ``python -m bench <workload> [--size small|full] [--rounds N]``.

With no workload: simulator. Sizes: small (CI smoke: 50 nodes / 200 pods live, 500 nodes / 1,000
pods in the simulator), full (1,000 KWOK nodes / 5,000 pods live, 5,000 nodes / 10,000 pods in
the simulator). Results are appended to bench/results/<date>.json.

Workloads:
  simulator [--workload NAME|all]            in-process scheduling loop (bench/simulator.py): SchedulingBasic
                                             (default) or one of the scheduler_perf workloads below
  time-to-answer                             `kubesched simulate` end to end, as a user runs it: summary, --output
                                             json, --report, --output jsonl (bench/time_to_answer.py)
  two-ways                                   one what-if answered by `kubesched simulate` and by kube-scheduler on
                                             KWOK: time to answer side by side, outcomes compared (bench/two_ways.py)
  dra [--nodes N --gpus G --pods M]          a GPU cluster dump with ResourceSlices and claims from templates
      [--upstream]                           replayed by `kubesched simulate --cluster` (bench/dra.py); --upstream:
                                             scheduler_perf's SchedulingWithResourceClaimTemplate shape
  dra live --workload W [--size S]           live: scheduler_perf's SchedulingWithResourceClaimTemplate or
                                             ExtendedResource, kubesched vs the real kube-scheduler (bench/dra.py)
  podgroups live --workload W [--size S]    scheduler_perf's podgroup workloads (GangScheduling, BasicScheduling,
  podgroups simulator --workload W|all       TopologyAwareScheduling, GangPreemptionBasic; GenericWorkload on): live
                                             vs the real kube-scheduler, or in the simulator (bench/podgroups.py)
  SchedulingBasic NodeAffinity Taints        live: kubesched vs the real kube-scheduler (bench/live.py)
  UnderlayIP Coscheduling
  UnderlayIPPools                            live: kubesched with UnderlayIP pools vs kubesched's default profile
  UnderlayIPExtender                         live: `kubesched extender` with UnderlayIP pools (filter-only, bind)
                                             beside the no-op extender floor
  Gangs                                      live: kubesched vs scheduler-plugins' Coscheduling (bench/gangs.py)
  TopologySpreading PreferredTopologySpreading  live: scheduler_perf's spreading and pod (anti-)affinity
  PodAntiAffinity PreferredPodAntiAffinity      workloads (upstream SchedulingPodAntiAffinity ... also accepted)
  PodAffinity
  live                                       every live workload above
  <live workload> --nodes N --pods M         a custom size (e.g. 15,000 nodes / 30,000 pods); --init-pods K,
      [--profile-seconds S]                  --timeout T; --profile-seconds: each contender profiled S seconds
                                             from its first bind (py-spy / kube-scheduler's pprof)
  Extender                                   kube-scheduler alone vs with `kubesched extender`
  all                                        simulator, live, Extender, then report
  report                                     regenerate BENCHMARKS.md (+ chart) from bench/results/
  profile                                    py-spy profile of `kubesched run` under a live workload (bench/profile.py)
  chaos [--only NAME,...]                    faults on the real control plane, invariants checked (bench/chaos.py);
                                             failover-backlog[-kube-scheduler]: the leader killed, 10,000 pods pending
  openb [--nodes N] [--rounds R]             the openb GPU trace: kube-scheduler vs kubesched, pods bound and
                                             time to first bind with the trace pending (bench/openb.py)
  openb-sim [--seeds 1-20] [--nodes N]       kubesched's bound count on the openb backlog per seed (nodes and pods
                                             shuffled), `kubesched simulate` end to end: its spread (bench/openb_sim.py)
  gpu-replay [--policies P,..] [--seeds S,..]  the ATC '23 GPU-sharing replay of the openb trace per policy and
                                             seed: time and GPU allocation at 100/130 % demand (bench/gpu_replay.py)
  startup [--nodes N] [--rounds R]          informers syncing the openb backlog: paged LIST vs watch-list, time
                                             and CPU, and the pods' parse (bench/startup.py)
  first-bind [--nodes N] [--rounds R]       process start -> first bind with the openb backlog pending, many
      [--stock] [--contenders K,..]          starts each, stopped at their first bind (bench/first_bind.py);
      [--finished N]                         --finished: kubesched with Coscheduling and N finished pods
  startup-cost [--rounds R] [SRC ...]        CPU and peak RSS of `kubesched run` up to its first request, per
                                             source tree, side by side (bench/startup_cost.py); --first-cycle:
                                             CPU ms of the first scheduling cycles after a start instead
  live-memory [--workloads W,..] [SRC ...]    what `kubesched run` keeps per node and per pod of each live workload's
      [--nodes N --init-pods K --pods M]     shape, in process: RSS per phase; --breakdown: by holder and by the
      [--breakdown]                          allocating module (bench/live_memory.py)
  fuzz [--bodies N]                          the extender fuzzed over HTTP, RSS watched (bench/chaos_fuzz.py)
"""

from __future__ import annotations

import sys

ALIASES = {
    "basic": "SchedulingBasic",
    "schedulingbasic": "SchedulingBasic",
    "nodeaffinity": "NodeAffinity",
    "taints": "Taints",
    "underlayip": "UnderlayIP",
    "coscheduling": "Coscheduling",
    "gangs": "Gangs",
    "extender": "Extender",
    "topologyspreading": "TopologySpreading",
    "preferredtopologyspreading": "PreferredTopologySpreading",
    "podantiaffinity": "PodAntiAffinity",
    "schedulingpodantiaffinity": "PodAntiAffinity",
    "preferredpodantiaffinity": "PreferredPodAntiAffinity",
    "schedulingpreferredpodantiaffinity": "PreferredPodAntiAffinity",
    "podaffinity": "PodAffinity",
    "schedulingpodaffinity": "PodAffinity",
    "schedulingnodeaffinity": "NodeAffinity",
}


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"], ["help"]):
        print(__doc__)
        return 0
    name = argv[0] if argv and not argv[0].startswith("-") else "simulator"
    rest = argv[1:] if argv and not argv[0].startswith("-") else argv
    name = ALIASES.get(name.lower(), name)
    if name == "simulator":
        from bench import simulator

        return simulator.main(rest)
    if name == "time-to-answer":
        from bench import time_to_answer

        return time_to_answer.main(rest)
    if name == "dra":
        from bench import dra

        return dra.main(rest)
    if name == "podgroups":
        from bench import podgroups

        return podgroups.main(rest)
    if name == "two-ways":
        from bench import two_ways

        return two_ways.main(rest)
    if name == "report":
        from bench import report

        return report.main(rest)
    if name == "profile":
        from bench import profile

        return profile.main(rest)
    if name == "chaos":
        from bench import chaos

        return chaos.main(rest)
    if name == "openb":
        from bench import openb

        return openb.main(rest)
    if name == "openb-sim":
        from bench import openb_sim

        return openb_sim.main(rest)
    if name == "gpu-replay":
        from bench import gpu_replay

        return gpu_replay.main(rest)
    if name == "startup":
        from bench import startup

        return startup.main(rest)
    if name == "first-bind":
        from bench import first_bind

        return first_bind.main(rest)
    if name == "live-memory":
        from bench import live_memory

        return live_memory.main(rest)
    if name == "startup-cost":
        from bench import startup_cost

        return startup_cost.main(rest)
    if name == "fuzz":
        from bench import chaos_fuzz

        return chaos_fuzz.main(rest)
    if name == "all":
        from bench import live, report, simulator

        rc = simulator.main(rest)
        rc |= live.main(rest, "live")
        rc |= live.main(rest, "Extender")
        rc |= report.main([])
        return rc
    from bench import live

    if name == "live" or name in live.WORKLOADS:
        return live.main(rest, name)
    print(f"unknown benchmark {name!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
