"""Run several `tpuray preview STACK --json` of different trees from one pre-loaded process.

`tpuray diff` evaluates each side with that side's own code: the base ref extracted from git
and the working tree are different `tpuray` packages, so each preview used to be a fresh
interpreter. About half of such a process's CPU time (2.4 of 4.4 s measured for dev) is
importing the provider SDKs, which are the same virtualenv's on both sides. This module,
run as a script (never importing tpuray), imports those SDKs once and then forks one child
per preview; the child puts its tree first on sys.path and imports that tree's tpuray and
infra as a fresh interpreter would. Only packages from the virtualenv are pre-loaded, never
a module from either tree.

The parent side (`run`) is imported by tpuray.preview.diff; the `__main__` side runs in the
pre-loaded process. Everything here is stdlib at import time.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

# The virtualenv modules a preview spends its import time in (python -X importtime on
# `tpuray preview dev`; with these loaded first, 0.2 s of its imports are left, half tpuray's):
# the SDKs load their resource modules lazily, so the heavy _inputs and outputs modules are
# named. A name a future SDK lacks is skipped.
PRELOAD = (
    "pulumi",
    "pulumi.runtime",
    "pulumi.runtime.mocks",
    "pulumi_gcp",
    "pulumi_gcp.compute._inputs",
    "pulumi_gcp.compute.outputs",
    "pulumi_gcp.compute.router",
    "pulumi_gcp.compute.router_nat",
    "pulumi_gcp.compute.resource_policy",
    "pulumi_gcp.container._inputs",
    "pulumi_gcp.container.outputs",
    "pulumi_gcp.container.cluster",
    "pulumi_gcp.container.node_pool",
    "pulumi_gcp.monitoring._inputs",
    "pulumi_gcp.monitoring.outputs",
    "pulumi_gcp.storage._inputs",
    "pulumi_gcp.storage.outputs",
    "pulumi_kubernetes",
    "pulumi_kubernetes.core.v1._inputs",
    "pulumi_kubernetes.core.v1.outputs",
    "pulumi_kubernetes.apiextensions",
    "pulumi_kubernetes.meta.v1._inputs",
    "pulumi_kubernetes.networking.v1._inputs",
    "pydantic",
    "pydantic._internal._generate_schema",  # loaded when the first model class is built
    "yaml",
    "jsonschema",
    "celpy",
    "rich.console",
    "rich.table",
)
_POLL_S = 0.05


class PreviewProcessError(RuntimeError):
    """The pre-loaded process itself failed (not one preview): nothing was compared."""


@dataclass(frozen=True)
class Finished:
    """One preview's outcome: its exit code (None: killed at the timeout) and its output."""

    code: int | None
    stdout: str
    stderr: str


# pragma: no mutate start (a process pool: covered by test_diff.py on real refs)
def run(
    work: list[tuple[Path, str]], env: dict[str, str], jobs: int, timeout_s: float, preload: tuple[str, ...] = PRELOAD
) -> list[Finished]:
    """`tpuray preview STACK --json` for each (tree, stack), at most `jobs` at a time, each in
    its tree's own code and killed after `timeout_s`; `preload` is imported before the forks."""
    with tempfile.TemporaryDirectory(prefix="tpuray-previews-") as tmp:
        requests = [
            {"tree": str(tree), "stack": stack, "out": f"{tmp}/{i}.out", "err": f"{tmp}/{i}.err"}
            for i, (tree, stack) in enumerate(work)
        ]
        env = {k: v for k, v in env.items() if k != "PYTHONPATH"}  # each child's tree comes first
        boot = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"
        rounds = -(-len(work) // max(1, jobs))
        deadline_s = timeout_s * rounds + 60  # every round at its timeout, and the pre-load
        try:
            result = subprocess.run(
                [sys.executable, "-c", boot, __file__, str(jobs), str(timeout_s), ",".join(preload)],
                input="".join(json.dumps(r) + "\n" for r in requests),
                cwd=tmp,  # not a tree: '' on sys.path must not resolve tpuray
                env=env,
                capture_output=True,
                text=True,
                timeout=deadline_s,
            )
        except subprocess.TimeoutExpired:
            raise PreviewProcessError(f"the preview process did not finish in {deadline_s:.0f} s") from None
        codes: dict[int, int | None] = {}
        for line in result.stdout.splitlines():  # a pre-loaded module could print: only the server's lines count
            with contextlib.suppress(ValueError, TypeError, KeyError):
                done = json.loads(line)
                codes[int(done["i"])] = done["code"]
        if len(codes) != len(work):
            raise PreviewProcessError(
                f"the preview process exited {result.returncode}: {result.stderr.strip()[-2000:]}"
            )
        return [
            Finished(codes[i], Path(r["out"]).read_text(), Path(r["err"]).read_text()) for i, r in enumerate(requests)
        ]


def _preload(names: list[str]) -> None:
    for name in names:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _child(request: dict[str, str]) -> None:
    """In the forked child: become `python -c CLI preview STACK --json` run in the tree."""
    for fd, path in ((1, request["out"]), (2, request["err"])):  # first: what fails below is reported
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    code: object = 1
    try:
        tree = request["tree"]
        sys.path[:] = [tree] + [p for p in sys.path if p not in ("", os.getcwd())]
        os.environ["PYTHONPATH"] = tree
        os.chdir(tree)
        sys.argv = ["tpuray", "preview", request["stack"], "--json"]
        from tpuray.cli import main  # the tree's: nothing of tpuray is loaded before the fork

        code = main()
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # noqa: BLE001 - reported on the child's stderr, as an interpreter would
        traceback.print_exc()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 1)


def _serve(jobs: int, timeout_s: float, preload: list[str]) -> None:
    jobs = max(1, jobs)
    requests = [json.loads(line) for line in sys.stdin if line.strip()]
    _preload(preload)
    pending = list(enumerate(requests))
    running: dict[int, tuple[int, float]] = {}  # pid -> (request index, deadline)
    killed: set[int] = set()
    while pending or running:
        while pending and len(running) < jobs:
            i, request = pending.pop(0)
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                try:
                    _child(request)  # ends with os._exit
                finally:
                    os._exit(1)  # never back into this loop as a second server
            running[pid] = (i, time.monotonic() + timeout_s)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            for child, (_, deadline) in running.items():
                if time.monotonic() > deadline and child not in killed:
                    os.kill(child, signal.SIGKILL)
                    killed.add(child)
            time.sleep(_POLL_S)
            continue
        i, _ = running.pop(pid)
        code = None if pid in killed else os.waitstatus_to_exitcode(status)
        print(json.dumps({"i": i, "code": code}), flush=True)


if __name__ == "__main__":
    # sys.argv: -c, this file, jobs, timeout, the modules to pre-load
    _serve(int(sys.argv[2]), float(sys.argv[3]), list(filter(None, sys.argv[4].split(","))))
# pragma: no mutate end
