"""The jobs' contract with the platform, in one place and stdlib-only: infra/ renders it into
the RayJob and RayService, tpuray.local.localrun reads it back, ray_apps.train parses it.

- `TrainArgs`: every `python -m ray_apps.train` flag, its type and default (the stack config's
  `tpuray:workloads.train` defaults come from here too), `to_argv()` and `parse_train_args()`;
- `SERVE_IMPORT_PATH`: the Serve application the RayService runs;
- `RESULT_PREFIX`: the line prefix of the apps' machine-readable JSON summary.

This module imports nothing but the standard library, so that tpuray (which must not import
Ray) and ray_apps (which must not import tpuray) can both import it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

TRAIN_MODULE = "ray_apps.train"
SERVE_IMPORT_PATH = "ray_apps.serve:build_app"
RESULT_PREFIX = "TPURAY_RESULT "  # then one line of JSON


def last_result(output: str) -> dict[str, Any] | None:
    """The JSON summary printed last in `output` (the rest of the line after RESULT_PREFIX), or
    None. The prefix is looked for anywhere in a line: with stderr merged into stdout, another
    process's log line may end up in front of it (seen on an emulated cluster whose head ran
    Ray's autoscaler)."""
    found = [ln[ln.index(RESULT_PREFIX) + len(RESULT_PREFIX) :] for ln in output.splitlines() if RESULT_PREFIX in ln]
    return json.loads(found[-1]) if found else None


# The variable Google's storage clients read to use a GCS emulator instead of GCS: set on every
# emulated host by `tpuray local up`, never on GKE (ray_apps.runtime.filesystem).
STORAGE_EMULATOR_ENV = "STORAGE_EMULATOR_HOST"

# The Kubernetes node a TPU host runs on, from the downward API (spec.nodeName) of every TPU
# worker pod; each placement records it. A pod cannot read its node's labels, so the tier GKE
# chose for a slice (spot, reservation...) is read from those nodes by whoever may read them
# (`kubectl get nodes NAME -L cloud.google.com/gke-spot,cloud.google.com/reservation-name`).
NODE_NAME_ENV = "TPURAY_NODE_NAME"

BATCH_POLICIES = ("per-slice", "global")
NOTICE_POLICIES = ("checkpoint", "ignore")

Device = Literal["tpu", "emulated", "cpu"]
DEVICES: tuple[str, ...] = ("tpu", "emulated", "cpu")


def _flag(help: str = "", **argparse_kwargs: Any) -> dict[str, Any]:
    return {"help": help, **argparse_kwargs}


@dataclass
class TrainArgs:
    """The arguments of `python -m ray_apps.train`; a field `foo_bar` is the flag `--foo-bar`."""

    data_uri: str = field(metadata=_flag("training data: gs:// or a local path (Parquet or JSONL)"))
    storage_uri: str = field(metadata=_flag("RunConfig.storage_path: gs://bucket/runs or a local dir"))
    run_name: str = field(metadata=_flag("RunConfig.name: the run's folder under --storage-uri"))
    device: Device = field(default="tpu", metadata=_flag("where the workers run", choices=DEVICES))
    accelerator_type: str | None = field(default=None, metadata=_flag("Ray accelerator type, e.g. TPU-V6E"))
    topology: str | None = field(default=None, metadata=_flag("slice topology, e.g. 4x4"))
    hosts_per_slice: int = 1
    chips_per_host: int = 0
    slices: int = field(default=1, metadata=_flag("slices of the run; with --min-slices the most it grows to"))
    # Elastic training (Ray Train v2's ScalingConfig(num_workers=(min, max)), whole slices only):
    # the run keeps going on as few as --min-slices slices and grows back to --slices.
    min_slices: int | None = field(
        default=None, metadata=_flag("elastic: the fewest slices the run keeps training on", type=int)
    )
    batch_policy: str | None = field(
        default=None,
        metadata=_flag(
            "elastic: per-slice (each host keeps --batch-size; the global batch shrinks with the slices) "
            "or global (the global batch of --slices slices is kept with gradient accumulation)",
            choices=BATCH_POLICIES,
        ),
    )
    # How often a running elastic group looks for slices that came back (Ray's default: 60 s).
    resize_interval_s: float = field(default=60.0, metadata=_flag("elastic: seconds between checks to grow"))
    # checkpoint: on Ray's preemption notice (a drained node), save a checkpoint at once;
    # ignore: rely on the periodic checkpoints only (the behaviour before the notice was used).
    preemption_notice: str = field(
        default="checkpoint", metadata=_flag("what a preemption notice does", choices=NOTICE_POLICIES)
    )
    steps: int = 200
    checkpoint_every: int = 20
    max_failures: int = 3
    batch_size: int = field(default=64, metadata=_flag("rows per host per step"))  # a multiple of chips/host on TPU
    learning_rate: float = 1e-2
    hidden: tuple[int, ...] = field(default=(32, 32), metadata={"flag": False})  # the model's layers: no flag
    seed: int = 0
    data_format: str | None = field(default=None, metadata=_flag(choices=("parquet", "jsonl")))
    fail_once_at_step: int | None = field(
        default=None, metadata=_flag("fault injection: raise once at this step", type=int)
    )
    stall_once_at_step: int | None = field(
        default=None, metadata=_flag("fault injection: one rank hangs here once", type=int)
    )
    stall_rank: int = field(default=0, metadata=_flag("the rank --stall-once-at-step hangs"))
    # The step watchdog (ray_apps.watchdog): no step within max(factor x median, floor) (before
    # an attempt's first step: startup) fails the attempt. Same defaults as tpuray:observability.
    watchdog_factor: float = field(default=10.0, metadata=_flag("a step may take this many median steps"))
    watchdog_floor_s: float = field(default=900.0, metadata=_flag("... but never less than this"))
    watchdog_startup_s: float = field(default=1800.0, metadata=_flag("limit before an attempt's first step"))
    # The emulator's MLP steps in milliseconds, a real model's TPU step in about a second: a floor
    # on the step time lets an emulated run show the goodput of a real one (benchmarks, tests).
    min_step_s: float = field(default=0.0, metadata=_flag("emulation: each step takes at least this long"))
    address: str | None = field(
        default=None, metadata=_flag("Ray address (default: RAY_ADDRESS, else local 127.0.0.1)")
    )
    # tpu/emulated: how long a (re)start may wait for enough fully free slices before it
    # fails loudly with ray_apps.slices.SliceUnavailableError.
    slice_deadline_s: float = field(
        default=600.0,
        metadata=_flag(
            "tpu/emulated: how long one step of the capacity chain (and a restart) may wait for whole free slices; "
            "once hosts of the shape join, up to this long after the first of them (ray_apps/chain.py)"
        ),
    )
    # The later steps of the slice pool's capacity chain: other shapes the driver asks for, in
    # order, when the first gets no whole slice within --slice-deadline-s (ray_apps/chain.py).
    fallback_shapes: str | None = field(
        default=None,
        metadata=_flag("tpu/emulated: later chain steps, 'ACCELERATOR:TOPOLOGY:HOSTS:CHIPS' separated by ','"),
    )

    def validate(self) -> None:
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {DEVICES}, got {self.device!r}")
        if self.device in ("tpu", "emulated"):
            missing = [n for n in ("accelerator_type", "topology") if not getattr(self, n)] + (
                ["chips_per_host"] if self.chips_per_host <= 0 else []
            )
            if missing:
                raise ValueError(f"device={self.device} needs {', '.join(flag(m) for m in missing)}")
            if self.batch_size % self.chips_per_host and self.device == "tpu":
                # iter_jax_batches shards each host's batch over its local devices (chips).
                raise ValueError(
                    f"--batch-size {self.batch_size} must be a multiple of --chips-per-host {self.chips_per_host}"
                )
        if self.hosts_per_slice < 1 or self.slices < 1:
            raise ValueError("--hosts-per-slice and --slices must be >= 1")
        if self.steps < 1 or self.checkpoint_every < 1 or self.batch_size < 1:
            raise ValueError("--steps, --checkpoint-every and --batch-size must be >= 1")
        if self.slice_deadline_s <= 0:
            raise ValueError("--slice-deadline-s must be > 0")
        if self.min_slices is not None and not 1 <= self.min_slices <= self.slices:
            raise ValueError(f"--min-slices {self.min_slices} must be between 1 and --slices {self.slices}")
        if self.batch_policy not in (None, *BATCH_POLICIES):
            raise ValueError(f"--batch-policy must be one of {BATCH_POLICIES}, got {self.batch_policy!r}")
        if self.preemption_notice not in NOTICE_POLICIES:
            raise ValueError(f"--preemption-notice must be one of {NOTICE_POLICIES}, got {self.preemption_notice!r}")
        if self.min_step_s < 0:
            raise ValueError(f"--min-step-s {self.min_step_s:g} must be >= 0")
        if self.resize_interval_s < 0:
            raise ValueError(f"--resize-interval-s {self.resize_interval_s:g} must be >= 0")
        self.chain()  # a malformed --fallback-shapes fails here, naming the step

    @classmethod
    def on_shape(cls, step: ShapeStep, **fields: Any) -> TrainArgs:
        """The arguments of a run whose first shape is `step` (ShapeStep's fields are SHAPE_FLAGS,
        the same names as here); `fields` are the others."""
        return cls(**dataclasses.asdict(step), **fields)

    def primary_shape(self) -> ShapeStep:
        return ShapeStep(self.accelerator_type or "", self.topology or "", self.hosts_per_slice, self.chips_per_host)

    def chain(self) -> list[ShapeStep]:
        """The shapes of the capacity chain, in the order the driver asks for them."""
        return [self.primary_shape(), *parse_shapes(self.fallback_shapes or "")]

    @property
    def num_workers(self) -> int:
        # One Train worker per TPU VM host; on cpu the same count of plain workers.
        return self.hosts_per_slice * self.slices

    @property
    def elastic(self) -> bool:
        return self.min_slices is not None and self.min_slices < self.slices

    @property
    def fewest_slices(self) -> int:
        """The slices a run can start on: --min-slices when elastic, else --slices."""
        return self.min_slices if self.min_slices is not None else self.slices

    @property
    def worker_range(self) -> tuple[int, int]:
        """(min, max) Train workers: whole slices of hosts_per_slice workers each."""
        return self.hosts_per_slice * self.fewest_slices, self.num_workers

    def to_argv(self, names: tuple[str, ...] | None = None) -> list[str]:
        """["--flag", "value", ...] for the named fields (default: every field with a flag that is
        set), in that order. Floats print as %g (10.0 -> 10)."""
        argv: list[str] = []
        for name in names if names is not None else tuple(f.name for f in _flag_fields()):
            value = getattr(self, name)
            if value is not None:
                argv += [flag(name), f"{value:g}" if isinstance(value, float) else str(value)]
        return argv


# The flags a rendered RayJob passes, in this order; the rest keep their defaults.
RENDERED_TRAIN_FLAGS = (
    "accelerator_type",
    "topology",
    "hosts_per_slice",
    "chips_per_host",
    "slices",
    "steps",
    "checkpoint_every",
    "data_uri",
    "storage_uri",
    "run_name",
    "max_failures",
    "watchdog_factor",
    "watchdog_floor_s",
    "device",
    "fallback_shapes",
    "min_slices",  # the elastic ones: rendered only for a slice range
    "batch_policy",
)
# The flags that say which slice the job runs on (what the emulator rewrites to its own slice).
SHAPE_FLAGS = ("accelerator_type", "topology", "hosts_per_slice", "chips_per_host")


@dataclass(frozen=True)
class ShapeStep:
    """One shape of a capacity chain as the driver asks Ray for it: Ray's accelerator type, the
    topology, and the catalog's hosts per slice and chips per host (infra renders them from
    tpuray/catalog.py; this module does no TPU arithmetic)."""

    accelerator_type: str
    topology: str
    hosts_per_slice: int
    chips_per_host: int

    def to_flag(self) -> str:
        return f"{self.accelerator_type}:{self.topology}:{self.hosts_per_slice}:{self.chips_per_host}"

    def describe(self) -> str:
        return f"{self.accelerator_type} {self.topology} ({self.hosts_per_slice} hosts x {self.chips_per_host} chips)"


def parse_shapes(text: str) -> list[ShapeStep]:
    """'TPU-V5LITEPOD:4x4:4:4,TPU-V4:2x2x4:4:4' -> the steps; '' -> none."""
    steps = []
    for i, item in enumerate(x for x in text.split(",") if x.strip()):
        parts = item.strip().split(":")
        if len(parts) != 4 or not parts[0] or not parts[1] or not (parts[2].isdigit() and parts[3].isdigit()):
            raise ValueError(
                f"--fallback-shapes step {i + 1} is {item.strip()!r}; "
                "write ACCELERATOR:TOPOLOGY:HOSTS:CHIPS, e.g. TPU-V5LITEPOD:4x4:4:4"
            )
        if int(parts[2]) < 1 or int(parts[3]) < 1:
            raise ValueError(f"--fallback-shapes step {i + 1} is {item.strip()!r}; hosts and chips must be >= 1")
        steps.append(ShapeStep(parts[0], parts[1], int(parts[2]), int(parts[3])))
    return steps


def format_shapes(steps: list[ShapeStep]) -> str | None:
    return ",".join(s.to_flag() for s in steps) or None


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _flag_fields() -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(TrainArgs) if f.metadata.get("flag", True)]


def train_defaults() -> dict[str, Any]:
    """Every field's default (the required ones have none)."""
    return {f.name: f.default for f in dataclasses.fields(TrainArgs) if f.default is not dataclasses.MISSING}


def train_parser(description: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m {TRAIN_MODULE}", description=description)
    for f in _flag_fields():
        kwargs = {k: v for k, v in f.metadata.items() if k != "help"}
        if f.default is dataclasses.MISSING:
            kwargs["required"] = True
        else:
            kwargs["default"] = f.default
            base = type(f.default) if f.default is not None else None
            if base in (int, float):
                kwargs["type"] = base
        p.add_argument(flag(f.name), help=f.metadata.get("help") or None, **kwargs)
    return p


def parse_train_args(argv: list[str] | None = None, description: str | None = None) -> TrainArgs:
    return TrainArgs(**vars(train_parser(description).parse_args(argv)))
