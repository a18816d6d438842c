"""Elastic training and the preemption notice, without a cluster: the contract's slice range,
the batch policy, what the train RayJob renders for a slice range, and the preStop drain."""

from __future__ import annotations

import copy
import shlex

import numpy as np
import pytest

from ray_apps import elastic
from ray_apps.contracts import TrainArgs
from tpuray import notice
from tpuray.commands.local import goodput_line
from tpuray.config import StackConfig, read_stack_file, stacks_dir
from tpuray.config.checks import parse_stack_config
from tpuray.desired.state import RayObject, desire

DEV = read_stack_file(stacks_dir() / "Pulumi.dev.yaml")


def args(**fields: object) -> TrainArgs:
    base = {"data_uri": "d", "storage_uri": "s", "run_name": "r", "device": "cpu", "hosts_per_slice": 2}
    return TrainArgs(**{**base, **fields})  # type: ignore[arg-type]


def test_a_slice_range_asks_ray_train_for_whole_slices_of_workers() -> None:
    a = args(slices=2, min_slices=1)
    assert (a.elastic, a.worker_range, elastic.scaling_workers(a)) == (True, (2, 4), (2, 4))


def test_equal_min_and_max_slices_is_a_fixed_run() -> None:
    a = args(slices=2, min_slices=2)
    assert (a.elastic, elastic.scaling_workers(a)) == (False, 4)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"slices": 2, "min_slices": 3}, "--min-slices 3 must be between 1 and --slices 2"),
        ({"slices": 2, "min_slices": 0}, "--min-slices 0 must be between 1 and --slices 2"),
        ({"batch_policy": "both"}, "--batch-policy must be one of ('per-slice', 'global'), got 'both'"),
        ({"preemption_notice": "maybe"}, "--preemption-notice must be one of ('checkpoint', 'ignore'), got 'maybe'"),
        ({"min_step_s": -1.0}, "--min-step-s -1 must be >= 0"),
    ],
)
def test_a_bad_elastic_flag_is_one_line_naming_it(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as err:
        args(**fields).validate()
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("policy", "max_slices", "now", "micro"),
    [("global", 2, 1, 2), ("global", 4, 3, 2), ("global", 2, 2, 1), ("per-slice", 2, 1, 1), (None, 2, 1, 1)],
)
def test_the_global_batch_policy_accumulates_max_over_current_micro_batches(
    policy: str | None, max_slices: int, now: int, micro: int
) -> None:
    assert elastic.accumulation(policy, max_slices, now) == micro


def test_a_worker_group_of_four_on_two_host_slices_spans_two_slices() -> None:
    assert (elastic.slices_in(4, 2), elastic.slices_in(2, 2), elastic.slices_in(1, 2)) == (2, 1, 1)


def test_two_accumulated_half_batches_make_the_same_update_as_one_whole_batch() -> None:
    from ray_apps import model as m

    config = m.ModelConfig(hidden=(4,), learning_rate=0.1)
    optimizer = m.make_optimizer(config)
    params = m.init_params(config)
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(8, config.in_dim)).astype(np.float32), rng.normal(size=(8,)).astype(np.float32)
    whole, _, loss_whole = m.make_train_step(optimizer)(params, optimizer.init(params), x, y)
    halves, _, loss_halves = m.make_accumulating_step(optimizer)(
        params, optimizer.init(params), [(x[:4], y[:4]), (x[4:], y[4:])]
    )
    assert float(loss_halves) == pytest.approx(float(loss_whole), rel=1e-5)
    for a, b in zip(whole, halves, strict=True):
        np.testing.assert_allclose(a["w"], b["w"], rtol=1e-5, atol=1e-6)


def ray_object(cfg: StackConfig, role: str) -> RayObject:
    (obj,) = [o for o in desire(cfg).objects if o.role == role]
    return obj


def elastic_dev(**train: object) -> StackConfig:
    raw = copy.deepcopy(DEV)
    raw["slicePools"][0]["slices"] = 2
    raw["queues"]["teams"][0]["quotas"][0]["chips"] = 32  # the team's quota holds the run's most slices
    raw["workloads"]["train"].update(slices={"min": 1, "max": 2}, **train)
    return parse_stack_config(raw, "dev")


def test_an_elastic_train_job_starts_at_the_most_slices_and_may_shrink_to_the_fewest() -> None:
    job = ray_object(elastic_dev(), "train")
    group = job.cluster["workerGroupSpecs"][0]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (2, 1, 2)
    argv = shlex.split(job.entrypoint)
    assert argv[argv.index("--slices") + 1] == "2"
    assert argv[argv.index("--min-slices") + 1] == "1"
    assert argv[argv.index("--batch-policy") + 1] == "per-slice"


def test_the_global_batch_policy_reaches_the_entrypoint() -> None:
    argv = shlex.split(ray_object(elastic_dev(batchPolicy="global"), "train").entrypoint)
    assert argv[argv.index("--batch-policy") + 1] == "global"


def test_a_fixed_train_job_renders_no_range() -> None:
    job = ray_object(parse_stack_config(copy.deepcopy(DEV), "dev"), "train")
    assert "--min-slices" not in job.entrypoint and "--batch-policy" not in job.entrypoint
    assert job.cluster["workerGroupSpecs"][0]["minReplicas"] == 0


def test_train_worker_pods_drain_their_ray_node_on_the_termination_notice() -> None:
    pod = ray_object(elastic_dev(), "train").cluster["workerGroupSpecs"][0]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 30
    (container,) = pod["containers"]
    assert container["lifecycle"]["preStop"]["exec"]["command"] == [
        "/bin/sh",
        "-c",
        "ray drain-node --reason DRAIN_NODE_REASON_PREEMPTION --reason-message 'pod terminating (GKE preemption or "
        "maintenance notice)' --deadline-remaining-seconds 25 || true; sleep 25",
    ]


def test_the_prestop_command_parses_as_ray_drain_node_of_the_pinned_ray() -> None:
    """Ray's own click command accepts the arguments (reason among its DrainNodeReason choices)."""
    from ray.scripts.scripts import drain_node

    script = notice.drain_command(30)[2]
    words = shlex.split(script.split("||")[0])
    assert words[:2] == ["ray", "drain-node"]
    ctx = drain_node.make_context("drain-node", words[2:])
    assert ctx.params["reason"] == "DRAIN_NODE_REASON_PREEMPTION"
    assert ctx.params["deadline_remaining_seconds"] == 25
    assert ctx.params["node_id"] is None  # the node the hook runs on


def test_serve_worker_pods_get_no_drain_hook() -> None:
    groups = ray_object(parse_stack_config(copy.deepcopy(DEV), "dev"), "serve").cluster["workerGroupSpecs"]
    assert groups
    for group in groups:
        assert "terminationGracePeriodSeconds" not in group["template"]["spec"]


def test_status_prints_a_run_s_goodput_and_its_badput_causes() -> None:
    line = goodput_line(
        "dev-train",
        {
            "goodput": 0.42,
            "allocated_slice_s": 300.4,
            "badput_slice_s": {"waiting_for_capacity": 0.0, "startup": 120.2, "redone": 10.0, "checkpoint": 0.4},
        },
    )
    assert line == "run dev-train: goodput 42% of 300 slice-s held; badput (slice-s): startup 120, redone 10"


def test_an_elastic_run_walks_the_capacity_chain_for_its_fewest_slices() -> None:
    assert (args(slices=2, min_slices=1).fewest_slices, args(slices=2).fewest_slices) == (1, 2)
