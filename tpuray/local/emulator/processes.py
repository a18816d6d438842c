"""Processes of an emulated cluster: recorded by PID, found again, and stopped.

Never `ray stop` or pkill: other Ray clusters may run on the same machine. Only the
recorded process trees, and processes whose command line names this cluster's own temp
dir, are ever signalled.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import psutil

from tpuray.local.emulator.state import ProcessRecord


def _records(node: Any) -> list[ProcessRecord]:
    out = []
    for kind, infos in node.all_processes.items():
        for info in infos:
            with contextlib.suppress(psutil.Error):
                out.append(ProcessRecord(info.process.pid, psutil.Process(info.process.pid).create_time(), kind))
    return out


def _tree(procs: Sequence[psutil.Process]) -> list[psutil.Process]:
    seen: dict[int, psutil.Process] = {}
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            for p in [proc, *proc.children(recursive=True)]:
                seen[p.pid] = p
    return list(seen.values())


def _marked(ray_dir: str) -> list[psutil.Process]:
    """Processes whose command line names this cluster's own temp dir.

    A safety net for processes reparented away from the recorded trees (a raylet that
    died before its workers): the temp dir is unique to this cluster, so this never
    matches another cluster's processes."""
    me = os.getpid()
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if proc.pid != me and any(ray_dir in part for part in (proc.info["cmdline"] or [])):
                found.append(proc)
    return found


def marked_processes(path: str) -> list[psutil.Process]:
    """Processes (other than this one) whose command line names `path`."""
    return _marked(path)


def kill_processes(procs: Sequence[psutil.Process], grace_s: float = 3.0, killed_s: float = 30.0) -> list[int]:
    """SIGTERM, then SIGKILL what is left after `grace_s`. Returns the PIDs still there.

    A SIGKILLed process cannot refuse, but it is gone only once the kernel has torn down its
    memory and its parent has reaped it, which for a raylet or a Ray worker holding a JAX heap
    takes seconds on a loaded machine (a demo at load 30 saw four outlive a 3 s wait): so wait
    up to `killed_s` for them to disappear (psutil reaps the ones that are our children)."""
    procs = [p for p in procs if p.pid != os.getpid()]
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    _, alive = psutil.wait_procs(alive, timeout=killed_s)
    return [p.pid for p in alive]


@contextlib.contextmanager
def _environ(updates: dict[str, str]) -> Iterator[None]:
    """Ray reads the TPU environment in *this* process when it resolves a node's labels and
    resources, and the raylet inherits it: set it around each add_node only."""
    saved = {k: os.environ.get(k) for k in updates}
    os.environ.update(updates)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _loopback_only() -> None:
    """Keep this process's Ray on 127.0.0.1.

    On Linux Ray rewrites 127.0.0.1 in a bootstrap address to the machine's network
    address unless RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, and it reads that variable once
    at import: set both the variable (for processes started later) and the value Ray
    already read (if ray was imported before)."""
    os.environ[_CLUSTER_ENV] = "0"
    mod = sys.modules.get("ray._private.ray_constants")
    if mod is not None:
        mod.ENABLE_RAY_CLUSTER = False


_CLUSTER_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
