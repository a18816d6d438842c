"""Ray Train v2 JaxTrainer program: the MLP of ray_apps.model on the ray_apps.data pipeline.

CLI (the RayJob entrypoint the Pulumi program renders; hosts/chips come from the catalog):
    python -m ray_apps.train --accelerator-type TPU-V6E --topology 4x4 --hosts-per-slice 4 \
        --chips-per-host 4 --slices 1 --steps 200 --checkpoint-every 20 \
        --data-uri gs://b/data --storage-uri gs://b/runs --run-name NAME --max-failures 3 \
        --device {tpu,emulated,cpu}

Devices:
- tpu:      ScalingConfig(use_tpu=True, topology, accelerator_type,
            num_workers=hosts_per_slice*slices, resources_per_worker={"TPU": chips_per_host}).
- emulated: the same request on raylets that look like GKE TPU hosts (see the local
            emulator), with JAX on CPU and gloo collectives in the workers.
- cpu:      plain Ray, use_tpu=False, num_workers=hosts_per_slice*slices, JAX on CPU; the
            program itself brings up jax.distributed (gloo) because JaxTrainer only does so
            for TPU/GPU.

Checkpoints every --checkpoint-every steps under <storage-uri>/<run-name>/checkpoint_step_N
(see ray_apps.model for the files). Running again with the same run name, or a restart by
FailureConfig(max_failures), resumes from the latest checkpoint at its step + 1. Each
checkpoint carries the per-step history (step, loss, attempt) and the attempts list, so a
test can prove no step ran twice in the persisted history and no step is missing.

Output: per-window lines 'step N loss L samples/s S' and one final
'TPURAY_RESULT {json}' line.

Length (about 600 lines, over the ~400 rule): the driver and the per-worker loop (checkpoints,
resume, watchdog, placement records, the notice and goodput hooks); the flags moved to ray_apps/contracts.py,
the elastic and notice logic to ray_apps/elastic.py, the accounting to ray_apps/goodput.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ray_apps import checkpoints, code_identity, contracts, elastic, goodput
from ray_apps.contracts import RESULT_PREFIX, Device
from ray_apps.runtime import custom_filesystem, ensure_ray, filesystem, join
from ray_apps.watchdog import StepMetrics, StepWatchdog, WatchdogConfig, create_board

DATASET_NAME = "train"
PLACEMENT_DIR = "placement"


@dataclass
class TrainArgs(contracts.TrainArgs):
    """The contract's arguments (ray_apps/contracts.py) with what running them needs."""

    def validate(self) -> None:
        super().validate()
        self.watchdog.validate()

    @property
    def watchdog(self) -> WatchdogConfig:
        return WatchdogConfig(self.watchdog_factor, self.watchdog_floor_s, self.watchdog_startup_s)

    @property
    def run_uri(self) -> str:
        return join(storage_path(self.storage_uri), self.run_name)


def storage_path(uri: str) -> str:
    # Ray Train wants an absolute local path or a URI.
    return uri if "://" in uri else os.path.abspath(uri)


def worker_env(device: Device) -> dict[str, str]:
    """Environment of the Train workers.

    On real TPU hosts JaxConfig sets JAX_PLATFORMS=tpu itself. Emulated hosts and cpu runs
    must keep JAX on the CPU and use gloo for cross-process collectives (the default CPU
    client has none, so the data-parallel gradient all-reduce would fail).
    """
    if device == "tpu":
        return {}
    return {"JAX_PLATFORMS": "cpu", "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo"}


def build_scaling_config(args: TrainArgs) -> Any:
    from ray.train import ScalingConfig

    # Elastic: (min, max) workers, whole slices only (ray_apps/elastic.py).
    interval = {"elastic_resize_monitor_interval_s": args.resize_interval_s} if args.elastic else {}
    if args.device == "cpu":
        return ScalingConfig(
            num_workers=elastic.scaling_workers(args), use_tpu=False, resources_per_worker={"CPU": 1}, **interval
        )
    return ScalingConfig(
        num_workers=elastic.scaling_workers(args),
        use_tpu=True,
        topology=args.topology,
        accelerator_type=args.accelerator_type,
        resources_per_worker={"TPU": args.chips_per_host},
        **interval,
    )


def build_run_config(args: TrainArgs) -> Any:
    from ray.train import CheckpointConfig, FailureConfig, RunConfig

    fs, path = custom_filesystem(storage_path(args.storage_uri))
    return RunConfig(
        name=args.run_name,
        storage_path=path,
        storage_filesystem=fs,
        # A preemption (a drained node) restarts on the preemption budget, SETTLE_S after its
        # deadline so the restart no longer counts the drained slice (ray_apps/elastic.py).
        failure_config=FailureConfig(max_failures=args.max_failures, preemption_grace_s=elastic.SETTLE_S),
        # Keep a few: Serve and resumption only need the latest; older ones help debugging.
        checkpoint_config=CheckpointConfig(num_to_keep=5),
        worker_runtime_env={"env_vars": worker_env(args.device)},
        callbacks=[] if args.device == "cpu" else [slice_guard(args)],
    )


def slice_guard(args: TrainArgs) -> Any:
    """The Train callback that makes every (re)start of the gang land on fully free slices."""
    from ray_apps.train_slices import SliceGuardCallback

    assert args.topology and args.accelerator_type
    return SliceGuardCallback(
        topology=args.topology,
        accelerator_type=args.accelerator_type,
        hosts_per_slice=args.hosts_per_slice,
        chips_per_host=args.chips_per_host,
        deadline_s=args.slice_deadline_s,
    )


def loop_config(args: TrainArgs, stats: dict[str, Any], board: Any = None, recorder: Any = None) -> dict[str, Any]:
    return {
        "hosts_per_slice": args.hosts_per_slice,
        "max_slices": args.slices,
        "batch_policy": args.batch_policy,
        "preemption_notice": args.preemption_notice,
        "recorder": recorder,
        "min_step_s": args.min_step_s,
        "device": args.device,
        "steps": args.steps,
        "checkpoint_every": args.checkpoint_every,
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "hidden": list(args.hidden),
        "seed": args.seed,
        "stats": stats,
        "fail_once_marker": (
            join(args.run_uri, f".fail_once_at_step_{args.fail_once_at_step}") if args.fail_once_at_step else None
        ),
        "fail_once_at_step": args.fail_once_at_step,
        "stall_once_at_step": args.stall_once_at_step,
        "stall_rank": args.stall_rank,
        "stall_marker": join(args.run_uri, ".stall_once") if args.stall_once_at_step else None,
        "watchdog": {
            "factor": args.watchdog_factor,
            "floor_s": args.watchdog_floor_s,
            "startup_s": args.watchdog_startup_s,
        },
        "run_name": args.run_name,
        "board": board,
        "placement_uri": join(args.run_uri, PLACEMENT_DIR),
        "run_uri": args.run_uri,
    }


# ---------------------------------------------------------------- inside the Train workers


def _init_cpu_distributed(rank: int, world: int) -> None:
    """jax.distributed over gloo for device=cpu (JaxTrainer skips it when use_tpu=False)."""
    import jax
    import ray
    from ray.train.collective import broadcast_from_rank_zero

    address = None
    if rank == 0:
        ip = ray.util.get_node_ip_address()
        with socket.socket() as s:  # a free port for the coordinator service
            s.bind((ip, 0))
            address = f"{ip}:{s.getsockname()[1]}"
    address = broadcast_from_rank_zero(address)
    jax.distributed.initialize(coordinator_address=address, num_processes=world, process_id=rank)


def _maybe_inject_failure(config: dict[str, Any], step: int, rank: int) -> None:
    """Fail once at the configured step (the marker file in storage makes it once per run)."""
    if rank != 0 or config.get("fail_once_at_step") != step:
        return
    fs, path = filesystem(config["fail_once_marker"])
    import pyarrow.fs as pafs

    if fs.get_file_info(path).type != pafs.FileType.NotFound:
        return
    with fs.open_output_stream(path) as out:
        out.write(str(step).encode())
    raise RuntimeError(f"tpuray: injected failure at step {step} (fail_once_at_step)")


def _maybe_stall(config: dict[str, Any], step: int, rank: int) -> None:
    """Hang once (a host that stops answering): the stall_rank sleeps at the configured step."""
    if rank != config.get("stall_rank") or config.get("stall_once_at_step") != step:
        return
    fs, path = filesystem(config["stall_marker"])
    import pyarrow.fs as pafs

    if fs.get_file_info(path).type != pafs.FileType.NotFound:
        return
    with fs.open_output_stream(path) as out:
        out.write(str(step).encode())
    print(f"[rank{rank}] tpuray: injected stall at step {step} (stall_once_at_step)", flush=True)
    time.sleep(24 * 3600)


def _start_watchdog(
    config: dict[str, Any], rank: int, world: int, attempt: int, placement: dict[str, Any], step: int
) -> StepWatchdog:
    metrics = None
    try:
        metrics = StepMetrics(config.get("run_name", ""), rank, placement["slice"], placement["tpu_worker_id"])
    except Exception as err:  # metrics are for people; the watchdog works without them
        print(f"[rank{rank}] no step metrics: {err}", file=sys.stderr)
    watchdog = StepWatchdog(
        WatchdogConfig(**config["watchdog"]),
        rank=rank,
        world=world,
        attempt=attempt,
        slice_name=placement["slice"],
        worker_id=placement["tpu_worker_id"],
        board=config.get("board"),
        metrics=metrics,
    )
    watchdog.begin(step)
    return watchdog.start()


def _placement(rank: int) -> dict[str, Any]:
    """Where this Train worker runs: TPU_NAME / TPU_WORKER_ID are the slice and host the node
    belongs to (set by GKE's TPU webhook, or by the emulator, on the raylet we inherit from)."""
    import ray

    return {
        "rank": rank,
        "slice": os.environ.get("TPU_NAME"),
        "pod_type": os.environ.get("TPU_ACCELERATOR_TYPE"),  # the shape: v6e-16, v5litepod-16...
        # Multi-slice: what JaxTrainer gives each worker for MXLA over DCN (coordinator, slices, slice id).
        "megascale": {k: v for k, v in sorted(os.environ.items()) if k.startswith("MEGASCALE_")},
        "tpu_worker_id": os.environ.get("TPU_WORKER_ID"),
        "kubernetes_node": os.environ.get(contracts.NODE_NAME_ENV),  # GKE: the node, which names the tier
        "node_id": ray.get_runtime_context().get_node_id(),
        "pid": os.getpid(),
    }


def _record_placement(config: dict[str, Any], attempt: int, placement: dict[str, Any]) -> None:
    """<run>/placement/attempt_NNN_rank_R.json: one file per rank and attempt, so a test (or
    an operator) can see every rank's slice, not only rank 0's. Best effort."""
    uri = config.get("placement_uri")
    if not uri:
        return
    try:
        fs, path = filesystem(join(uri, f"attempt_{attempt:03d}_rank_{placement['rank']}.json"))
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        # Written aside, then moved: a reader never sees a half-written record.
        partial = path + ".partial"
        with fs.open_output_stream(partial) as out:
            out.write(json.dumps({"attempt": attempt, "time": time.time(), **placement}).encode())
        fs.move(partial, path)
    except OSError as e:  # never fail training over bookkeeping
        print(f"[rank{placement['rank']}] could not record placement: {e}", file=sys.stderr)


def read_placements(run_uri: str) -> list[dict[str, Any]]:
    """Every recorded (attempt, rank) placement of a run, sorted by attempt and rank."""
    import pyarrow.fs as pafs

    fs, path = filesystem(join(run_uri, PLACEMENT_DIR))
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return []
    found = []
    for info in fs.get_file_info(pafs.FileSelector(path)):
        if info.path.endswith(".json"):
            with fs.open_input_stream(info.path) as f:
                found.append(json.loads(f.read()))
    return sorted(found, key=lambda p: (p["attempt"], p["rank"]))


def _epochs(shard: Any, batch_size: int, iterate: Any) -> Iterator[tuple[int, Any]]:
    """(epoch, batch) forever: steps, not epochs, bound the run, so re-iterate the shard.

    Every rank gets the same number of full batches per epoch (streaming_split(equal=True)
    plus drop_last), so all ranks start a new epoch at the same step.
    """
    epoch = 0
    while True:
        epoch += 1
        empty = True
        for batch in iterate(shard, batch_size):
            empty = False
            yield epoch, batch
        if empty:
            raise ValueError(f"the dataset shard has fewer than batch_size={batch_size} rows")


def train_loop_per_worker(config: dict[str, Any]) -> None:
    # JAX is imported here, not at module level: on TPU hosts the process that imports JAX
    # first claims the chips, and the driver must never do that.
    import jax
    import numpy as np
    import ray.train
    from jax.sharding import NamedSharding, PartitionSpec
    from ray.train import Checkpoint

    from ray_apps import data as data_lib
    from ray_apps import model as m
    from ray_apps.features import FeatureStats

    started_at = time.time()
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    # First, before anything touches a JAX backend: the shard call waits until every rank has
    # asked (one streaming_split for all), while creating the JAX client of a distributed run
    # waits until every rank has created its own. A rank blocked in one of them while another
    # waits in the other never returns.
    shard = ray.train.get_dataset_shard(DATASET_NAME)
    own_distributed = config["device"] == "cpu" and world > 1
    if own_distributed:
        _init_cpu_distributed(rank, world)
    model_config = m.ModelConfig(
        hidden=tuple(config["hidden"]), learning_rate=config["learning_rate"], seed=config["seed"]
    )
    optimizer = m.make_optimizer(model_config)
    restored = ray.train.get_checkpoint()
    latest = checkpoints.find_latest(config["run_uri"]) if config.get("run_uri") else None
    if restored is not None:
        with restored.as_directory() as d:
            state = m.load_checkpoint(d)
        resumed_from: int | None = state.step
        if latest is not None and latest[1] > state.step:
            state = m.load_checkpoint(checkpoints.fetch(latest[0]))
            resumed_from = state.step
    elif latest is not None:
        # Ray Train registers a checkpoint only once every rank's report reached the
        # controller; a host that dies right after rank 0 uploaded one loses that report, and
        # the restart would begin from nothing. Storage is the record: resume from its latest
        # complete checkpoint.
        state = m.load_checkpoint(checkpoints.fetch(latest[0]))
        resumed_from = state.step
    else:
        state = m.TrainingState(
            step=0,
            params=m.init_params(model_config),
            opt_state_leaves=None,
            model_config=model_config,
            stats=FeatureStats.from_dict(config["stats"]),
        )
        resumed_from = None
    attempt = len(state.attempts) + 1
    placement = {**_placement(rank), "jax_processes": jax.process_count()}
    slices_now = elastic.slices_in(world, config.get("hosts_per_slice", world))
    accumulate = elastic.accumulation(config.get("batch_policy"), config.get("max_slices", slices_now), slices_now)
    state.attempts.append(
        {
            "attempt": attempt,
            "start_step": state.step + 1,
            "resumed_from": resumed_from,
            "slice": placement["slice"],  # rank 0's; every rank's is in placement/
            "slices": slices_now,
            "accumulation": accumulate,
            "started_at": started_at,
        }
    )
    _record_placement(config, attempt, {**placement, "start_step": state.step + 1})
    if rank == 0:
        print(
            f"[rank0] attempt {attempt}: start at step {state.step + 1} (resumed_from={resumed_from}), world={world}, devices={jax.device_count()}"
        )

    watchdog = _start_watchdog(config, rank, world, attempt, placement, state.step + 1)
    train_step = m.make_train_step(optimizer) if accumulate == 1 else m.make_accumulating_step(optimizer)
    global_batch = config["batch_size"] * jax.process_count() * accumulate
    progress = elastic.Progress(config.get("recorder") if rank == 0 else None, attempt, slices_now, started_at)
    progress.span("attempt", started_at, started_at)
    notice = elastic.Notice(config.get("preemption_notice", "checkpoint") == "checkpoint")
    params = opt_state = None
    batches = _epochs(shard, config["batch_size"], data_lib.iterate)
    window_t0, window_first = time.perf_counter(), state.step + 1
    loss_value = float("nan")

    try:
        while state.step < config["steps"]:
            step_t0 = time.time()
            epoch, batch = next(batches)
            micro = [batch] + [next(batches)[1] for _ in range(accumulate - 1)]
            _maybe_stall(config, state.step + 1, rank)
            # Entering the step (and its all-reduce): a rank that never gets here is the straggler.
            watchdog.started(state.step + 1)
            if params is None:
                # Replicate params/optimizer state on the mesh Ray Data shards batches over,
                # so jit sees one mesh and inserts the gradient all-reduce.
                replicated = NamedSharding(batch["x"].sharding.mesh, PartitionSpec())

                def put(a: Any, sharding: NamedSharding = replicated) -> Any:
                    host = np.asarray(a)
                    return jax.make_array_from_callback(host.shape, sharding, lambda idx, h=host: h[idx])

                params = jax.tree_util.tree_map(put, state.params)
                opt_state = jax.tree_util.tree_map(put, state.opt_state(optimizer))
            if accumulate == 1:
                params, opt_state, loss = train_step(params, opt_state, batch["x"], batch["y"])
            else:
                params, opt_state, loss = train_step(params, opt_state, [(b["x"], b["y"]) for b in micro])
            loss_value = float(loss)
            if (pad := config.get("min_step_s", 0.0) - (time.time() - step_t0)) > 0:
                time.sleep(pad)  # --min-step-s: an emulated step as long as a real one
            state.step += 1
            state.history.append({"step": state.step, "loss": loss_value, "attempt": attempt, "time": time.time()})
            progress.span("step", step_t0, time.time(), state.step)
            _maybe_inject_failure(config, state.step, rank)
            # Every rank asks (a barrier): a drained node of this group means save now.
            noticed = notice.due()

            if noticed or state.step % config["checkpoint_every"] == 0 or state.step == config["steps"]:
                ckpt_t0 = time.time()
                elapsed = time.perf_counter() - window_t0
                n_steps = state.step - window_first + 1
                metrics = {
                    "step": state.step,
                    "loss": loss_value,
                    "samples_per_s": global_batch * n_steps / elapsed if elapsed > 0 else 0.0,
                    "window": [window_first, state.step],
                    "epoch": epoch,
                    "attempt": attempt,
                    "slices": slices_now,
                }
                name = checkpoints.checkpoint_dir_name(state.step)
                if rank == 0:
                    print(
                        f"step {state.step} loss {loss_value:.5f} samples/s {metrics['samples_per_s']:.0f}", flush=True
                    )
                    state.params = m.to_host(params)
                    if noticed:  # recorded before the save, so the checkpoint carries it
                        state.attempts[-1]["notice"] = {**(notice.seen or {}), "step": state.step}
                    with tempfile.TemporaryDirectory(prefix="tpuray-ckpt-") as tmp:
                        m.save_checkpoint(tmp, state, opt_state)
                        ray.train.report(metrics, checkpoint=Checkpoint.from_directory(tmp), checkpoint_dir_name=name)
                    if watchdog.metrics is not None:
                        watchdog.metrics.checkpointed(time.time())
                else:
                    ray.train.report(metrics, checkpoint_dir_name=name)
                ckpt_t1 = time.time()
                progress.span("checkpoint", ckpt_t0, ckpt_t1, state.step, reason="notice" if noticed else "periodic")
                if noticed:
                    record = notice.saved(state.step, ckpt_t0, ckpt_t1)
                    progress.span("notice", record.pop("detected_at"), ckpt_t1, record.pop("step"), **record)
                    if rank == 0:
                        print(f"tpuray notice: checkpoint at step {state.step} saved {record}", flush=True)
                window_t0, window_first = time.perf_counter(), state.step + 1
            watchdog.completed(state.step)
    finally:
        # A failed step leaves no watchdog behind to fire in a process Ray Train may reuse.
        watchdog.stop()

    if own_distributed:
        # Only on success: shutdown is a barrier over all ranks. After an error the other
        # ranks sit in the step's all-reduce waiting for this one, so a shutdown here would
        # hang until the barrier times out (minutes) instead of letting Ray Train see the
        # error, kill the worker group and restart it from the latest checkpoint.
        jax.distributed.shutdown()


# ---------------------------------------------------------------- driver


def take_chain_step(args: TrainArgs, choice: Any) -> TrainArgs:
    """The arguments for the chain step the driver got: JaxTrainer asks for that shape."""
    step = choice.step
    return dataclasses.replace(
        args,
        accelerator_type=step.accelerator_type,
        topology=step.topology,
        hosts_per_slice=step.hosts_per_slice,
        chips_per_host=step.chips_per_host,
    )


def walk_chain(args: TrainArgs) -> Any:
    """The first shape of the pool's capacity chain with whole free slices in time (ray_apps/chain.py)."""
    from ray_apps import chain, slices

    return chain.walk(
        args.chain(),
        # An elastic run starts on the first shape with its fewest slices; Ray Train's elastic
        # policy asks the autoscaler for the most and grows into them (ray_apps/elastic.py).
        num_slices=args.fewest_slices,
        deadline_s=args.slice_deadline_s,
        inventory=slices.slice_inventory,
        demand=chain.WholeSliceDemand(),
        log=lambda line: print(line, flush=True),
    )


def run(args: TrainArgs) -> dict[str, Any]:
    """Fit and return the summary (what the CLI prints after 'TPURAY_RESULT ')."""
    from ray.train.v2.jax import JaxTrainer

    from ray_apps import data as data_lib
    from ray_apps import model as m
    from ray_apps import train_slices

    args.validate()
    if args.device != "cpu" and (problems := train_slices.one_vm_problems(args.chain())):
        raise ValueError("; ".join(problems))  # before any slice is reserved
    # A local cluster needs logical CPUs beyond the Train workers, or the Ray Data read
    # tasks that feed them never get scheduled (2 workers on a 2-core machine hang).
    ensure_ray(args.address, num_cpus=max(os.cpu_count() or 1, args.num_workers + 2))
    capacity = None
    if args.device != "cpu":
        # GKE walks the tiers of a shape; the driver walks the shapes (docs/capacity.md).
        choice = walk_chain(args)
        args = take_chain_step(args, choice)
        capacity = choice.record()
    latest = checkpoints.find_latest(args.run_uri)
    stats = None
    if latest is not None:
        # Resuming: normalise with the stats the model was trained with, not refitted ones.
        meta_dir = checkpoints.fetch(latest[0])
        stats = m.load_checkpoint(meta_dir).stats
        print(f"resuming run {args.run_name} from {latest[0]} (step {latest[1]})")
    ds, stats = data_lib.build_dataset(args.data_uri, args.data_format, stats)  # type: ignore[arg-type]
    board = create_board(args.run_name)  # every rank's progress, for the step watchdog
    # Rank 0's steps and checkpoints and the run's whole slices over time (ray_apps/goodput.py).
    recorder = goodput.start_recorder(args.run_name, elastic.whole_slice_counter(args))
    trainer = JaxTrainer(
        train_loop_per_worker,
        train_loop_config=loop_config(args, stats.to_dict(), board, recorder),
        scaling_config=build_scaling_config(args),
        run_config=build_run_config(args),
        datasets={DATASET_NAME: ds},
    )
    t0 = time.perf_counter()
    result = trainer.fit()
    wall = time.perf_counter() - t0
    import ray

    accounting = ray.get(recorder.stop.remote(), timeout=60)
    summary: dict[str, Any] = {
        "run_name": args.run_name,
        "device": args.device,
        "num_workers": args.num_workers,
        "wall_s": round(wall, 2),
        "metrics": result.metrics,
        "error": None if result.error is None else repr(result.error),
        "capacity": capacity,  # the chain step, shape and tier it ran on, and the steps tried
        "elastic": {"min_slices": args.fewest_slices, "max_slices": args.slices} if args.elastic else None,
        # Productive slice time / slice time held, badput by cause, slices over time, recoveries.
        "goodput": accounting,
        "slices_over_time": accounting["slices_over_time"],
    }
    if result.checkpoint is not None:
        with result.checkpoint.as_directory() as d:
            final = m.load_checkpoint(d)
        summary.update(
            # With a custom filesystem (the GCS emulator) Ray's path has no scheme: give it back.
            checkpoint=checkpoints.uri_of(args.run_uri, result.checkpoint.path),
            final_step=final.step,
            final_loss=final.history[-1]["loss"] if final.history else None,
            attempts=final.attempts,
            history_problems=m.step_history_problems(final.history) + m.attempt_problems(final.attempts),
        )
    summary["placements"] = read_placements(args.run_uri)
    summary["code"] = code_identity()  # which bundle this ran from (tpuray bundle)
    return summary


def parse_args(argv: list[str] | None = None) -> TrainArgs:
    ns = contracts.train_parser(__doc__.split("\n")[0]).parse_args(argv)
    return TrainArgs(**vars(ns))


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        args.validate()
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        summary = run(args)
    except Exception as e:  # Train raises TrainingFailedError once max_failures is spent
        print(RESULT_PREFIX + json.dumps({"run_name": args.run_name, "error": f"{type(e).__name__}: {e}"}))
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(RESULT_PREFIX + json.dumps(summary, default=str))
    return 0 if summary["error"] is None and not summary.get("history_problems") else 1


if __name__ == "__main__":
    sys.exit(main())
