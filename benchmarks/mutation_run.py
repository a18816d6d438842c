"""`make mutation`: mutmut over each core module against the fast tests that concern it.

    python benchmarks/mutation_run.py [--jobs 2] [--max-children 1] [GROUP ...]

mutmut 3 picks, for each mutant, the tests that executed the mutated function in one
recorded run. The catalog and config are executed by nearly every test (every stack render
looks up a shape), so against the whole fast suite each surviving mutant of theirs would
re-run hundreds of stack renders. Each group below therefore names the module(s) it mutates
and the fast test files that specify them; mutmut runs once per group (its own `mutants/`
tree, since mutmut keeps one test selection per tree), and the tree is then kept under
.mutation/<group>/ for `mutmut show` (see docs/testing.md). No group runs a Ray cluster:
every test file listed here is fast (`-m "not slow"` is in [tool.mutmut] as well).

Groups run side by side (`--jobs`, each with `--max-children` mutmut workers), each in a
private copy of the project under .mutation/work/<group>/ (mutmut works in ./mutants of its
current folder). A group spends much of its time in serial phases (generating mutants, the
clean run, the stats run); a second group's mutants fill that idle core. Longest groups
start first, by the CPU seconds benchmarks/mutation.json recorded for them.

Per group and in total it records the wall time, the CPU seconds of mutmut and every
process it forked (wait4's rusage of the group's process) and the load average sampled
every 10 s while it ran (the machine may be shared), then scores every group with
mutation_score.py. Each group's mutmut output goes to .mutation/<group>.log.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / ".mutation"

RULES_MODULES = sorted(p.stem for p in (ROOT / "tpuray" / "policies").glob("rules_*.py"))

# The policy tests. Most of them run the whole pack on one fixture, so every rule function is
# called by every one of them, and mutmut (which selects for each mutant the tests that called
# the mutated function) would run all of them, about 400, for every surviving rule mutant.
# Each rules module is therefore its own group, run against the tests of these files that
# concern it (policy_selection): the per-fixture tests of its own rules, the test that runs
# its rules alone on every fixture (test_policy_modules.py, which catches a rule firing on
# another rule's fixture), and every test that is not about one rule (unit tests, the
# conformance samples).
POLICY_TESTS = [
    "tests/test_policy_branches.py",
    "tests/test_policy_internals.py",
    "tests/test_policy_modules.py",
    "tests/test_security_policies.py",
    "tests/test_podsecurity.py",
    "tests/test_check.py",
    "tests/test_policies.py",
    "tests/test_kuberay_versions.py",
    "tests/test_serve_app_parts.py",
    "tests/test_hardening_rule_parts.py",
    "tests/test_rayservice_spec_rule.py",
    "tests/test_stack_providers.py",
    "tests/test_expanded_pods.py",
    "tests/test_hf_token_mount_rule.py",
]

# group -> (files mutmut mutates, fast test files that specify them)
GROUPS: dict[str, tuple[list[str], list[str]]] = {
    "catalog": (
        ["tpuray/catalog.py"],
        [
            "tests/test_catalog.py",
            "tests/test_catalog_lookups.py",
            "tests/test_catalog_ray.py",
            "tests/test_config_checks.py",
        ],
    ),
    "config": (
        ["tpuray/config/checks.py", "tpuray/config/pools.py"],
        [
            "tests/test_config.py",
            "tests/test_config_checks.py",
            "tests/test_config_semantics.py",
            "tests/test_llm_stack.py",
        ],
    ),
    "capacity": (
        ["tpuray/capacity.py", "infra/components/capacity_chain.py"],
        ["tests/test_capacity_table.py", "tests/test_config_checks.py"],
    ),
    # one group per rules module (policy_selection below picks its tests): see POLICY_TESTS
    **{f"policies-{m.removeprefix('rules_')}": ([f"tpuray/policies/{m}.py"], []) for m in RULES_MODULES},
    "slices": (["ray_apps/slices.py"], ["tests/test_slices_choice.py", "tests/test_slices_reserve_timing.py"]),
    "diff": (["tpuray/preview/diff.py"], ["tests/test_diff_units.py", "tests/test_exit_codes.py"]),
    "cli": (
        ["tpuray/cli.py", "tpuray/errors.py", "tpuray/commands/check.py", "tpuray/commands/preview.py"],
        [
            "tests/test_exit_codes.py",
            "tests/test_errors.py",
            "tests/test_check.py",
            "tests/test_check_output.py",
            "tests/test_cli_parser.py",
            "tests/test_preview_output.py",
        ],
    ),
}


TIMEOUT_MULTIPLIER = 60.0

# Groups whose tests run a Pulumi program (pulumi.runtime.test with mocks): forked straight
# from a parent that already ran one, a mutant's run hangs until mutmut's time limit (a
# surviving config mutant that passes in 12 s run by hand "timed out"). mutmut's fork server
# forks each mutant from a process that has only collected the tests; each mutant then
# imports what the tests import lazily (Pulumi's runtime, checkov), seconds per mutant.
FORKSERVER = {"config", "cli"}

# Tests left out of a group's run: the policies group's two tests that run whole stacks under
# Pulumi's mocks (every rule runs on every stack, so every rule mutant would select them, and
# in mutmut's forked run one sat in epoll_wait for minutes at 5 % CPU). The rules on
# the stacks' objects are pinned per path by test_policy_branches; these two stay in the
# fast suite.
POLICY_DESELECT = [
    "tests/test_policies.py::test_stack_has_no_mandatory_violation",
    "tests/test_check.py::test_stacks_rendered_manifests_pass_check",
]

_SELECT = """
import json, sys
import pytest
import tpuray.policies as pack

module = sys.argv[1]
rules = {r.name: m for m in vars(pack) if m.startswith("rules_") for r in getattr(pack, m).RULES}
modules = set(rules.values())

class Ids:
    ids = []
    def pytest_collection_finish(self, session):  # after --deselect and -m
        self.ids += [i.nodeid for i in session.items]

ids = Ids()
args = ["-q", "--collect-only", "-p", "no:cacheprovider", "-m", "not slow", *sys.argv[2:]]
assert pytest.main(args, plugins=[ids]) == 0
def concerns(nodeid):
    param = nodeid.partition("[")[2].rstrip("]")
    about = param.split("/")[0].split("--")[0]
    if about in rules:
        return rules[about] == module
    return param not in modules or param == module
print("SELECTED " + json.dumps([i for i in ids.ids if concerns(i)]))
"""


def policy_selection(module: str) -> list[str]:
    """The node ids of POLICY_TESTS that concern `module` (a rules module): a test
    parametrized by a rule name (`[rule]`, `[rule/case]`, `[rule--case]`) or by a rules module
    (`[rules_x]`) when that rule or module is this one, and every other test. Collected in a
    child process: this one must not import tpuray before mutmut points it at mutants/."""
    deselect = [a for t in POLICY_DESELECT for a in ("--deselect", t)]
    out = subprocess.run(
        [sys.executable, "-c", _SELECT, module, *POLICY_TESTS, *deselect],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.rpartition("SELECTED ")[2])


def run_group(name: str, max_children: int) -> None:
    """In a child process: mutmut's run with this group's files and tests (mutmut reads its
    configuration once, from pyproject.toml; the group overrides two fields of it)."""
    from mutmut import configuration

    only, tests = GROUPS[name]
    cfg = configuration._load_config()
    cfg.only_mutate = only
    if name.startswith("policies-"):
        tests = policy_selection(Path(only[0]).stem)
        print(f"{name}: {len(tests)} tests", flush=True)
    cfg.pytest_add_cli_args_test_selection = [t for t in tests if (ROOT / t.partition("::")[0]).exists()]
    # mutmut stops a mutant after (recorded test time + 1 s) x timeout_multiplier of wall time
    # and counts it as killed. Its default 15 is hit by plain boundary mutants on a shared
    # 2-core machine at load 20 (seen: `len(name) > 30` to `>= 30` "timed out" after 39 s),
    # which would hide survivors: 60 keeps the load out of the verdicts.
    cfg.timeout_multiplier = TIMEOUT_MULTIPLIER
    if name in FORKSERVER:
        cfg.process_isolation = configuration.ProcessIsolation.FORKSERVER
    configuration._config = cfg
    from mutmut.__main__ import cli

    cli.main(["run", "--max-children", str(max_children)], standalone_mode=False)


class LoadSampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self.stop.wait(10)

    def summary(self) -> dict[str, float]:
        s = self.samples or [os.getloadavg()[0]]
        return {"min": round(min(s), 2), "mean": round(sum(s) / len(s), 2), "max": round(max(s), 2)}


def private_copy(group: str) -> Path:
    """The project's files (tracked, and untracked but not ignored) copied to a folder of the
    group's own, where its mutmut run writes ./mutants."""
    dest = RESULTS / "work" / group
    shutil.rmtree(dest, ignore_errors=True)
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if src.is_file():  # a deleted but still tracked file is listed too
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def previous_cpu_s(group: str) -> float:
    """The CPU seconds the last recorded run of this group took (0 when never run)."""
    path = ROOT / "benchmarks" / "mutation.json"
    recorded = json.loads(path.read_text()).get("groups", {}) if path.exists() else {}
    return float(recorded.get(group, {}).get("cpu_s", 0))


def run_in_copy(group: str, max_children: int, env: dict[str, str]) -> dict[str, object]:
    """One group's mutmut run in its private copy; its tree ends up in .mutation/<group>/."""
    work = private_copy(group)
    load = LoadSampler()
    load.start()
    t0 = time.monotonic()
    cmd = [sys.executable, str(work / "benchmarks" / "mutation_run.py"), "--inner", group]
    with open(RESULTS / f"{group}.log", "wb") as log:
        proc = subprocess.Popen(cmd + ["--max-children", str(max_children)], cwd=work, env=env, stdout=log, stderr=log)
        _, status, usage = os.wait4(proc.pid, 0)  # this group's CPU alone, its forks included
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    load.stop.set()
    cpu = usage.ru_utime + usage.ru_stime
    timing = {"rc": proc.returncode, "wall_s": round(wall), "cpu_s": round(cpu), "load_avg_1min": load.summary()}
    print(f"== {group}: rc {proc.returncode}, {wall:.0f} s wall, {cpu:.0f} CPU s, load {load.summary()}", flush=True)
    shutil.rmtree(RESULTS / group, ignore_errors=True)
    if (work / "mutants").exists():
        shutil.move(work / "mutants", RESULTS / group)
    shutil.rmtree(work, ignore_errors=True)
    return timing


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("groups", nargs="*", help=f"default: all of {', '.join(GROUPS)}")
    parser.add_argument("--jobs", type=int, default=2, help="groups run side by side")
    parser.add_argument("--max-children", type=int, default=1, help="mutmut workers per group")
    parser.add_argument("--inner", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        run_group(args.inner, args.max_children)
        return 0
    groups = args.groups or list(GROUPS)
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        parser.error(f"unknown group(s) {', '.join(unknown)}; valid: {', '.join(GROUPS)}")
    env = {**os.environ, "TPURAY_SHARED": os.environ.get("TPURAY_SHARED", str(ROOT.parent / "shared"))}
    RESULTS.mkdir(exist_ok=True)
    all_load = LoadSampler()
    all_load.start()
    started = time.monotonic()
    longest_first = sorted(groups, key=previous_cpu_s, reverse=True)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {g: pool.submit(run_in_copy, g, args.max_children, env) for g in longest_first}
        timings = {g: futures[g].result() for g in groups}
    all_load.stop.set()
    total = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "groups": groups,
        "jobs": args.jobs,
        "max_children": args.max_children,
        "timeout_multiplier": TIMEOUT_MULTIPLIER,
        "cpus": os.cpu_count(),
        "wall_s": round(time.monotonic() - started),
        "cpu_s": round(total.ru_utime + total.ru_stime),
        "load_avg_1min": all_load.summary(),
        "per_group": timings,
    }
    (RESULTS / "run.json").write_text(json.dumps(run, indent=2))
    score = [sys.executable, str(ROOT / "benchmarks" / "mutation_score.py"), "--run", str(RESULTS / "run.json")]
    return subprocess.call(score + [str(RESULTS / g) for g in groups], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
