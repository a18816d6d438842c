"""Adapt a stack's rendered RayJob / RayService to the local emulator, visibly.

The emulator runs the very entrypoint, runtime env and Serve config the stack renders. The
runtime env is untouched: its working_dir is the bundle's gs:// URI, which `local run`
uploads to the emulator's GCS emulator and Ray's own runtime_env machinery downloads and
unpacks on the emulated hosts (tpuray/local/storage_emulator.py). Only what cannot exist on
this machine is rewritten, and every rewrite is listed with its reason
(`tpuray local run WORKLOAD STACK --explain`):
- the image: this virtualenv stands in for it (`python` is its interpreter);
- `--device tpu` becomes `--device emulated` (JAX on CPU with gloo collectives);
- nothing of the data and checkpoint gs:// URIs: they go to the same GCS emulator, whose
  address every emulated host has in STORAGE_EMULATOR_HOST (ray_apps.runtime.filesystem);
- when the emulator had to shrink a topology, the topology arguments follow the slice it
  actually emulates (from the catalog);
- Serve's HTTP proxy binds 127.0.0.1.

Length (about 490 lines, over the ~400 rule): every rewrite of a rendered object and the run
that uses it sit together, so that `--explain` (which lists the rewrites) and what a run
actually changes are read from the same functions and cannot drift apart.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import os
import re
import shlex
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from rich.console import Console

from ray_apps import contracts
from ray_apps.contracts import RESULT_PREFIX
from tpuray import bundle, labels, terminal
from tpuray.catalog import SliceShape
from tpuray.desired import worker_group
from tpuray.errors import UserError
from tpuray.local import storage_emulator
from tpuray.local.llm_emulator import rewrite as llm_rewrite
from tpuray.preview.mockrun import StackRun

if TYPE_CHECKING:
    from tpuray.local.emulator import EmulatedCluster

LOSS_LINE = re.compile(r"\bstep (\d+) loss ([0-9.eE+-]+)")  # ray_apps.train progress lines
# Milestones of a training job, in the order they happen, each the first line that matches:
# what `tpuray demo` and benchmarks/bench_demo.py report as the job's phases.
TRAIN_MILESTONES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("bundle fetched, driver started", re.compile(r"^Running entrypoint for job ")),
    ("driver connected to Ray", re.compile(r"Connected to Ray cluster")),
    ("data set ready, gang placed", re.compile(r"tpuray slice guard: start 1 ")),
    ("workers up, JAX distributed initialised", re.compile(r"\[rank0\] attempt 1: ")),
    ("first checkpoint", LOSS_LINE),
)
# POST /predict body (docs/apps.md): raw rows of sqft, rooms, age_years, distance_km, income_k.
SAMPLE_REQUEST: dict[str, Any] = {"instances": [[1450.0, 3.0, 12.0, 8.5, 95.0], [2600.0, 5.0, 3.0, 22.0, 160.0]]}

IMAGE_REASON = (
    "this virtualenv stands in for the image: Ray, JAX, optax at the lock's versions; ray_apps only from the bundle"
)
MISSING_IMPORT = "No module named 'ray_apps'"

# The train flags and Serve app args that say which slice a job runs on (ray_apps/contracts.py).
SHAPE_ARGS = contracts.SHAPE_FLAGS
SHAPE_FLAGS = tuple(contracts.flag(name) for name in SHAPE_ARGS)


@dataclass
class LocalJob:
    """A job for the emulator: `python -m MODULE ARGS`, the train job's arguments read back through
    their contract (ray_apps/contracts.py TrainArgs) and edited as fields, never as text."""

    module: str
    runtime_env: dict[str, Any]
    rewrites: list[str] = field(default_factory=list)
    args: contracts.TrainArgs | None = None  # the train contract's arguments
    flags: tuple[str, ...] = ()  # the TrainArgs fields the command passes, in its order
    argv: list[str] = field(default_factory=list)  # a module without a typed contract (ray_apps.data)
    python: str = "python"

    @classmethod
    def of_train_entrypoint(cls, entrypoint: str, runtime_env: dict[str, Any]) -> LocalJob:
        """The rendered RayJob's entrypoint, parsed by the train contract's own parser."""
        argv = shlex.split(entrypoint)
        if argv[1:3] != ["-m", contracts.TRAIN_MODULE]:
            raise UserError(f"the RayJob's entrypoint is {entrypoint!r}; expected python -m {contracts.TRAIN_MODULE}")
        flags = tuple(token[2:].replace("-", "_") for token in argv[3::2])
        args = contracts.parse_train_args(argv[3:])
        return cls(contracts.TRAIN_MODULE, runtime_env, args=args, flags=flags, python=argv[0])

    @property
    def command(self) -> list[str]:
        argv = self.args.to_argv(self.flags) if self.args is not None else self.argv
        return [self.python, "-m", self.module, *argv]

    @property
    def entrypoint(self) -> str:
        return shlex.join(self.command)

    def set(self, reason: str, **changes: Any) -> None:
        """Change train arguments, listing each change that alters the command with its reason."""
        assert self.args is not None
        changed = dataclasses.replace(self.args, **changes)
        for name in changes:
            before, after = _flag_text(self.args, name), _flag_text(changed, name)
            if name in self.flags and before == after:
                continue
            was = f"{before} -> " if name in self.flags else ""
            self.rewrites.append(f"{contracts.flag(name)}: {was}{after} ({reason})")
            self.flags = self.flags if name in self.flags else (*self.flags, name)
        self.args = changed

    def use_this_python(self) -> None:
        # The job driver runs in the emulator's environment: `python` there is this virtualenv's.
        if self.python == "python":
            self.python = sys.executable
            self.rewrites.append(f"python -> {sys.executable} (the image's interpreter is this virtualenv's)")


def _flag_text(args: contracts.TrainArgs, name: str) -> str:
    """A train argument as its flag's value text ("" when unset)."""
    return (args.to_argv((name,)) or ["", ""])[1]


def _shape_values(shape: SliceShape) -> tuple[str, ...]:
    """The shape's values in SHAPE_FLAGS / SHAPE_ARGS order, as text."""
    return tuple(str(value) for value in dataclasses.astuple(shape.shape_step))


def _image_rewrite(manifest: dict[str, Any]) -> str:
    head = labels.ray_cluster_spec(manifest).get("headGroupSpec", {})
    image = ((head.get("template") or {}).get("spec") or {}).get("containers", [{}])[0].get("image")
    return f"image: {image} -> {sys.prefix} ({IMAGE_REASON})"


def job_for_emulator(rayjob: dict[str, Any], emulated: SliceShape | None = None) -> LocalJob:
    """The RayJob's entrypoint and runtime env, rewritten for the emulator."""
    spec = rayjob["spec"]
    runtime_env = yaml.safe_load(spec.get("runtimeEnvYAML") or "{}") or {}
    job = LocalJob.of_train_entrypoint(spec["entrypoint"], runtime_env)
    assert job.args is not None
    if job.args.device == "tpu":
        job.set("JAX on CPU, gloo collectives", device="emulated")
    if emulated is not None:
        shape = dataclasses.asdict(emulated.shape_step)
        job.set("the emulated slice", **{name: shape[name] for name in SHAPE_ARGS if name in job.flags})
    job.rewrites.append(_image_rewrite(rayjob))
    return job


def serve_config_for_emulator(
    rayservice: dict[str, Any], emulated: SliceShape | None = None, http_port: int = 8000
) -> tuple[dict[str, Any], list[str]]:
    """The RayService's serveConfigV2 for Serve's REST API on the emulator (loopback only)."""
    config = yaml.safe_load(rayservice["spec"]["serveConfigV2"])
    rewrites: list[str] = [_image_rewrite(rayservice)]
    for app in config["applications"]:
        args = app.setdefault("args", {})
        if emulated is not None:
            for key, new in zip(SHAPE_ARGS, _shape_values(emulated), strict=True):
                if key in args and str(args[key]) != new:
                    rewrites.append(f"args.{key}: {args[key]} -> {new} (the emulated slice)")
                    args[key] = type(args[key])(new) if not isinstance(args[key], str) else new
    for app in config["applications"]:
        if llm_rewrite.is_llm_app(app):  # Ray Serve LLM: the CPU stand-in engine (tpuray/llm_emulator)
            rewrites += llm_rewrite.rewrite_app(app, emulated)
    config["http_options"] = {"host": "127.0.0.1", "port": http_port}
    rewrites.append(f"http_options: 127.0.0.1:{http_port} (addresses: loopback only on a shared machine)")
    return config, rewrites


# ---------------------------------------------------------------------------- running on the emulator

DATA_ROWS = 4096  # what `local run` generates when the job's data location is empty
SERVE_HTTP_PORT = 8000  # Serve's HTTP proxy on the emulator (127.0.0.1 only)


def gs_uris(values: list[Any]) -> list[str]:
    """The gs:// URIs among a job's arguments or an app's args."""
    return [v for v in values if isinstance(v, str) and v.startswith("gs://")]


def use_storage(cluster: EmulatedCluster, uris: list[str]) -> None:
    """Point this process at the cluster's GCS emulator and create the buckets `uris` name (on
    GCP the Terraform foundation creates them): `local run` writes and lists data here too."""
    host = cluster.state.storage_host
    if not host:
        raise UserError(
            "the emulated cluster runs without its GCS emulator (started by an older tpuray): "
            "`tpuray local down` and `tpuray local up` again"
        )
    os.environ[storage_emulator.HOST_ENV] = host
    storage_emulator.create_buckets(host, uris)


def rendered(run: StackRun, kind: str) -> dict[str, Any]:
    for resource in run.kubernetes_objects():
        if resource.inputs.get("kind") == kind:
            return resource.manifest()
    raise UserError(f"stack {run.stack!r} renders no {kind}; add one under tpuray:workloads in its stack file")


def emulated_shape(cluster: EmulatedCluster, manifest: dict[str, Any]) -> SliceShape:
    """The shape of the slices the emulator runs for the object's first (populated) TPU group."""
    groups = worker_group.of_object(manifest)
    group = next((g for g in groups if (g.replicas or 0) > 0), groups[0] if groups else None)
    if group is None:
        raise UserError(f"{manifest['kind']}/{manifest['metadata']['name']} has no TPU worker group")
    specs = [s for s in cluster.slices if group.owns_slice(s.name)]
    if not specs:
        raise UserError(
            f"the emulated cluster has no slice of worker group {group.name!r}; it was started for another "
            "stack or configuration: `tpuray local down` and `tpuray local up` again"
        )
    return specs[0].shape


def emulated_fallbacks(cluster: EmulatedCluster, manifest: dict[str, Any], primary: SliceShape) -> list[SliceShape]:
    """The emulated shapes of the object's other TPU groups, in the groups' order: what the
    chain's later steps ask for on the emulator (a reduced slice has a smaller shape)."""
    found: list[SliceShape] = []
    for group in worker_group.of_object(manifest):
        for spec in cluster.slices:
            if not group.owns_slice(spec.name):
                continue
            shape = spec.shape
            if shape != primary and shape not in found:
                found.append(shape)
    return found


def _rewrite_fallbacks(job: LocalJob, cluster: EmulatedCluster, manifest: dict[str, Any], primary: SliceShape) -> None:
    assert job.args is not None
    rendered = job.args.fallback_shapes
    if rendered is None:
        return
    steps = [s.shape_step for s in emulated_fallbacks(cluster, manifest, primary)]
    emulated = contracts.format_shapes(steps)
    # Groups the emulator started no slice for (`local up --without-fallbacks`) keep their step.
    if emulated and emulated != rendered and len(steps) == len(contracts.parse_shapes(rendered)):
        job.set("the emulated slices", fallback_shapes=emulated)


def _has_files(uri: str) -> bool:
    from ray_apps.data import list_files

    return bool(list_files(uri))


def deliver(cluster: EmulatedCluster, runtime_env: dict[str, Any], rewrites: list[str], bundle_zip: Path | None) -> str:
    """Put the bundle the runtime env names on the GCS emulator; return the working_dir URI.

    Without `bundle_zip`: the bundle built from ray_apps/ now, which is the object the
    rendered URI names (same sources, same bytes, same hash). With it: that zip, uploaded
    under its own content hash, and the working_dir rewrite is listed."""
    uri = runtime_env.get("working_dir")
    if not isinstance(uri, str) or not uri.startswith("gs://"):
        raise UserError(f"the rendered runtime_env.working_dir is {uri!r}; expected the bundle's gs:// URI")
    host = cluster.state.storage_host
    if not host:
        raise UserError(
            "the emulated cluster runs without its GCS emulator (started by an older tpuray): "
            "`tpuray local down` and `tpuray local up` again"
        )
    if bundle_zip is None:
        built = bundle.current()
        if not storage_emulator.exists(host, uri):  # content-addressed: an existing object is these bytes
            storage_emulator.upload(host, uri, built.data)
        return uri
    try:
        data = bundle_zip.read_bytes()
    except OSError as exc:
        raise UserError(f"--bundle {bundle_zip}: cannot read it ({exc.strerror})") from None
    name = f"{bundle.NAME_PREFIX}{hashlib.sha256(data).hexdigest()[: bundle.HASH_CHARS]}.zip"
    new_uri = f"{uri.rsplit('/', 1)[0]}/{name}"
    storage_emulator.upload(host, new_uri, data)
    rewrites.append(
        f"runtime_env.working_dir: {uri} -> {new_uri} (--bundle {bundle_zip} asked for on the command line)"
    )
    runtime_env["working_dir"] = new_uri
    return new_uri


def _import_hint(text: str, working_dir: str | None) -> str:
    if MISSING_IMPORT not in text:
        return ""
    return (
        f"; ModuleNotFoundError: {MISSING_IMPORT} in the working_dir {working_dir}: Ray strips a zip's single "
        f"top-level directory, so the bundle must hold {bundle.WRAPPER}/ray_apps/ (build it with `tpuray bundle`)"
    )


def submit_and_stream(cluster: EmulatedCluster, job: LocalJob, console: Console, timeout_s: float) -> dict[str, Any]:
    """Submit through the Ray Jobs API, stream the logs, return the TPURAY_RESULT summary."""
    from ray.job_submission import JobStatus, JobSubmissionClient

    # The SDK logs each closed log stream at INFO ("WebSocket closed for job ..."): not for the terminal.
    logging.getLogger("ray.dashboard.modules.job.sdk").setLevel(logging.WARNING)
    client = JobSubmissionClient(cluster.state.dashboard_url)
    job_id = client.submit_job(entrypoint=job.entrypoint, runtime_env=job.runtime_env)
    console.print(terminal.styled(("submitted", "bold"), f" {job_id} to {cluster.state.dashboard_url}"))
    console.print(f"working_dir {job.runtime_env.get('working_dir')} (GCS emulator {cluster.state.storage_host})")
    result: dict[str, Any] = {}

    losses: dict[int, float] = {}
    missing_import = False
    t0 = time.monotonic()
    milestones: dict[str, float] = {}

    async def stream() -> None:
        nonlocal missing_import
        async for chunk in client.tail_job_logs(job_id):
            for line in chunk.splitlines():
                missing_import = missing_import or MISSING_IMPORT in line
                for name, pattern in TRAIN_MILESTONES:
                    if name not in milestones and pattern.search(line):
                        milestones[name] = round(time.monotonic() - t0, 2)
                if line.startswith(RESULT_PREFIX):
                    result.update(json.loads(line[len(RESULT_PREFIX) :]))
                elif match := LOSS_LINE.search(line):
                    losses[int(match.group(1))] = float(match.group(2))
                console.print(line)

    try:
        asyncio.run(asyncio.wait_for(stream(), timeout=timeout_s))
    except TimeoutError:
        client.stop_job(job_id)
        raise UserError(f"job {job_id} did not finish within {timeout_s:.0f} s; stopped it") from None
    status = client.get_job_status(job_id)
    if status != JobStatus.SUCCEEDED:
        info = client.get_job_info(job_id)
        hint = _import_hint(
            f"{info.message} {MISSING_IMPORT if missing_import else ''}", job.runtime_env.get("working_dir")
        )
        raise UserError(f"job {job_id} ended {status.value}{hint}: {info.message}", code=1)
    if losses:
        result["loss_by_step"] = dict(sorted(losses.items()))
    # Seconds after submission; "job ended" once the logs stopped and the status was read.
    result["milestones"] = {**milestones, "job ended": round(time.monotonic() - t0, 2)}
    return result


def run_data(
    cluster: EmulatedCluster,
    stack: StackRun,
    console: Console,
    rows: int,
    timeout_s: float,
    bundle_zip: Path | None = None,
) -> dict:
    """Generate (when empty) and read the RayJob's data set, with the RayJob's runtime env."""
    job = job_for_emulator(rendered(stack, "RayJob"))
    deliver(cluster, job.runtime_env, job.rewrites, bundle_zip)
    use_storage(cluster, gs_uris(job.command))
    assert job.args is not None
    argv = ["--data-uri", job.args.data_uri]
    if not _has_files(job.args.data_uri):
        argv += ["--generate-rows", str(rows)]
    data_job = LocalJob("ray_apps.data", job.runtime_env, list(job.rewrites), argv=argv)
    data_job.use_this_python()
    _print_rewrites(console, "data", data_job.rewrites)
    return submit_and_stream(cluster, data_job, console, timeout_s)


def run_train(
    cluster: EmulatedCluster,
    stack: StackRun,
    console: Console,
    steps: int | None,
    timeout_s: float,
    bundle_zip: Path | None = None,
    slices: int | None = None,
) -> dict:
    rayjob = rendered(stack, "RayJob")
    primary = emulated_shape(cluster, rayjob)
    job = job_for_emulator(rayjob, primary)
    _rewrite_fallbacks(job, cluster, rayjob, primary)
    deliver(cluster, job.runtime_env, job.rewrites, bundle_zip)
    use_storage(cluster, gs_uris(job.command))
    if steps is not None:
        job.set("asked for on the command line", steps=steps)
    if slices is not None:
        # Multi-slice: JaxTrainer's num_workers = hosts x slices, MEGASCALE_* per worker.
        job.set("asked for on the command line", slices=slices)
    job.use_this_python()
    assert job.args is not None
    data_uri = job.args.data_uri
    if data_uri and not _has_files(data_uri):
        # Written from here, to the GCS emulator (use_storage), as a team would upload its data.
        from ray_apps.data import write_synthetic

        paths = write_synthetic(data_uri, DATA_ROWS)
        console.print(
            terminal.styled(
                (f"no data at {data_uri}", "bold"), f": wrote {DATA_ROWS} synthetic rows in {len(paths)} files"
            )
        )
    _print_rewrites(console, "train", job.rewrites)
    return submit_and_stream(cluster, job, console, timeout_s)


def _http(method: str, url: str, body: Any = None, timeout_s: float = 30) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 (loopback only)
        text = response.read().decode()
    return json.loads(text) if text else None


def run_serve(
    cluster: EmulatedCluster,
    stack: StackRun,
    console: Console,
    request: dict[str, Any] | None,
    timeout_s: float,
    http_port: int = SERVE_HTTP_PORT,
    bundle_zip: Path | None = None,
) -> dict[str, Any]:
    """Deploy the RayService's serveConfigV2 through Serve's REST API, wait, and query it."""
    rayservice = rendered(stack, "RayService")
    shape = emulated_shape(cluster, rayservice)
    raw_apps = yaml.safe_load(rayservice["spec"]["serveConfigV2"])["applications"]
    missing = [
        line for app in raw_apps if llm_rewrite.is_llm_app(app) for line in llm_rewrite.topology_problems(app, shape)
    ]
    if missing:  # fail before deploying, not after a deadline spent in DEPLOYING
        raise UserError(missing[0], code=1)
    config, rewrites = serve_config_for_emulator(rayservice, shape, http_port)
    for app in config["applications"]:
        if not llm_rewrite.is_llm_app(app):  # Ray's own LLM app runs no code of the bundle
            deliver(cluster, app.setdefault("runtime_env", {}), rewrites, bundle_zip)
        use_storage(cluster, gs_uris(list(app.get("args", {}).values())))
    _print_rewrites(console, "serve", rewrites)
    base = cluster.state.dashboard_url
    t0 = time.monotonic()
    milestones: dict[str, float] = {}
    _http("PUT", f"{base}/api/serve/applications/", config)
    milestones["config accepted"] = round(time.monotonic() - t0, 2)
    console.print(terminal.styled(("deployed", "bold"), f" serveConfigV2 through {base}/api/serve/applications/"))
    for app in config["applications"]:
        if "working_dir" in app.get("runtime_env", {}):
            console.print(f"{app['name']}: working_dir {app['runtime_env']['working_dir']} (GCS emulator)")
    names = [app["name"] for app in config["applications"]]
    # A checkpoint replica may wait for its training run (ray_apps.serve.wait_for_checkpoint).
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        apps = (_http("GET", f"{base}/api/serve/applications/") or {}).get("applications", {})
        statuses = {n: apps.get(n, {}).get("status", "NOT_STARTED") for n in names}
        line = ", ".join(f"{n}: {s}" for n, s in statuses.items())
        if line != last:
            console.print(f"  {line}")
            last = line
        failed = [n for n, s in statuses.items() if s == "DEPLOY_FAILED"]
        if failed:
            message = apps[failed[0]].get("message", "")
            hint = _import_hint(message, config["applications"][0].get("runtime_env", {}).get("working_dir"))
            raise UserError(f"Serve application {failed[0]!r} failed to deploy{hint}: {message}", code=1)
        if all(s == "RUNNING" for s in statuses.values()):
            milestones["applications RUNNING"] = round(time.monotonic() - t0, 2)
            break
        if time.monotonic() > deadline:
            raise UserError(f"Serve applications not RUNNING after {timeout_s:.0f} s (--timeout): {line}", code=1)
        time.sleep(0.5)
    endpoint = f"http://127.0.0.1:{http_port}"
    health = _http("GET", f"{endpoint}/healthz")
    console.print(f"GET {endpoint}/healthz -> {json.dumps(health)}")
    llm_app = next((app for app in config["applications"] if llm_rewrite.is_llm_app(app)), None)
    route = "/v1/chat/completions" if llm_app else "/predict"
    body = request if request is not None else (llm_rewrite.sample_chat(llm_app) if llm_app else SAMPLE_REQUEST)
    answer = _http("POST", f"{endpoint}{route}", body)
    console.print(f"POST {endpoint}{route} {json.dumps(body)} -> {json.dumps(answer)}")
    milestones["answered"] = round(time.monotonic() - t0, 2)
    return {"health": health, "request": body, "response": answer, "milestones": milestones}


def _print_rewrites(console: Console, what: str, rewrites: list[str]) -> None:
    console.print(terminal.styled((f"{what}: emulator rewrites of the rendered object", "bold")))
    for line in rewrites:
        console.print(f"  {line}")


def explain(stack: StackRun, workload: str, cluster: EmulatedCluster | None) -> list[str]:
    """Every rewrite `local run WORKLOAD` makes to the rendered object, each with its reason."""
    if workload == "serve":
        manifest = rendered(stack, "RayService")
        shape = emulated_shape(cluster, manifest) if cluster else None
        _, rewrites = serve_config_for_emulator(manifest, shape)
        kept = "import_path, runtime_env (working_dir: the bundle on the GCS emulator), every other app argument"
    else:
        manifest = rendered(stack, "RayJob")
        job = job_for_emulator(manifest, emulated_shape(cluster, manifest) if cluster else None)
        job.use_this_python()
        rewrites = job.rewrites
        kept = "the entrypoint's module and other arguments, runtime_env (working_dir: the bundle on the GCS emulator)"
        if workload == "data":
            kept = "runtime_env; the data job itself is `python -m ray_apps.data --data-uri` of the RayJob's data"
    name = f"{manifest['kind']}/{manifest['metadata']['name']}"
    lines = [f"{workload}: rewrites of the rendered {name} on the emulator"]
    lines += [f"  {line}" for line in rewrites]
    lines.append(f"kept as rendered: {kept}")
    if cluster is None:
        lines.append("(no emulated cluster is up: topology rewrites, if any, show once it is)")
    return lines
