"""The state file of an emulated cluster: what `tpuray local status|down` find again.

Every PID the emulator starts is recorded with its create time, so a later `down` kills
exactly those processes (and never a recycled PID).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from tpuray.local.emulator.plan import EmulatorError, SliceSpec

STATE_FILE = "state.json"
LOCAL_DIR_ENV = "TPURAY_LOCAL_DIR"
DEFAULT_ROOT = Path("/tmp/tpuray-local")


@dataclass
class ProcessRecord:
    pid: int
    create_time: float  # guards against a recycled PID being killed later
    kind: str

    def process(self) -> psutil.Process | None:
        try:
            proc = psutil.Process(self.pid)
            if abs(proc.create_time() - self.create_time) > 0.01:
                return None
            return proc
        except psutil.Error:
            return None


@dataclass
class HostRecord:
    slice: str  # "" for the head
    worker_id: int
    node_id: str
    processes: list[ProcessRecord] = field(default_factory=list)


@dataclass
class ClusterState:
    name: str
    state_dir: str
    address: str = ""
    dashboard_url: str = ""  # http://127.0.0.1:<port>: Jobs API and Serve REST API
    launcher_pid: int = 0
    started_at: float = 0.0
    ready: bool = False
    slices: list[SliceSpec] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    hosts: list[HostRecord] = field(default_factory=list)
    storage_host: str = ""  # http://127.0.0.1:<port>: the GCS emulator (STORAGE_EMULATOR_HOST)
    storage: list[ProcessRecord] = field(default_factory=list)

    @property
    def ray_dir(self) -> str:
        return os.path.join(self.state_dir, "ray")

    def save(self) -> None:
        path = Path(self.state_dir) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({**asdict(self), "slices": [s.as_json() for s in self.slices]}, indent=2))
        tmp.replace(path)  # atomic: `status` never reads half a file

    @classmethod
    def load(cls, state_dir: str | Path) -> ClusterState:
        path = Path(state_dir) / STATE_FILE
        if not path.is_file():
            raise EmulatorError(f"no emulated cluster at {state_dir} ({STATE_FILE} missing)")
        raw = json.loads(path.read_text())
        raw["slices"] = [SliceSpec.from_json(s) for s in raw["slices"]]
        raw["storage"] = [ProcessRecord(**p) for p in raw.get("storage", [])]
        raw["hosts"] = [
            HostRecord(**{**h, "processes": [ProcessRecord(**p) for p in h["processes"]]}) for h in raw["hosts"]
        ]
        return cls(**raw)


def local_root() -> Path:
    """Where every emulated cluster keeps its state folder ($TPURAY_LOCAL_DIR)."""
    return Path(os.environ.get(LOCAL_DIR_ENV, DEFAULT_ROOT))


def state_dir_for(name: str) -> Path:
    # Kept short on purpose: Ray puts Unix sockets under it and sun_path is 107 bytes.
    return local_root() / name
