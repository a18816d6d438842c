"""`desire(cfg)` (tpuray/desired/state.py): the stack's Ray objects, built once, Pulumi-free, and
exactly what the program renders."""

from __future__ import annotations

import dataclasses

import pytest

from tests.conftest import mocked
from tpuray import images
from tpuray.config.checks import load_stack
from tpuray.desired import llm_stack, state
from tpuray.desired.state import desire
from tpuray.preview.mockrun import run_stack


def test_prod_desires_a_train_job_and_a_service_named_after_the_cluster() -> None:
    desired = desire(load_stack("prod"))
    assert [(o.kind, o.name, o.role, o.pool.name) for o in desired.objects] == [
        ("RayJob", "tpuray-prod-train", "train", "v6e-train"),
        ("RayService", "tpuray-prod-serve", "serve", "v5e-serve"),
    ]


def test_the_train_entrypoint_is_the_contracts_train_args_of_the_pools_shape() -> None:
    job = desire(load_stack("prod")).of_kind("RayJob")
    assert job is not None and job.train_args is not None
    args = job.train_args
    assert (args.accelerator_type, args.topology, args.hosts_per_slice, args.chips_per_host) == (
        "TPU-V6E",
        "4x4",
        4,
        4,
    )
    assert (args.slices, args.device, args.fallback_shapes) == (2, "tpu", "TPU-V5LITEPOD:4x4:4:4")
    assert args.run_name == "tpuray-prod-train"


def test_the_rendered_objects_are_the_desired_ones() -> None:
    desired = desire(load_stack("prod"))
    rendered = {r.manifest()["metadata"]["name"]: r.manifest() for r in mocked("prod").kubernetes_objects()}
    job, service = desired.of_kind("RayJob"), desired.of_kind("RayService")
    assert job is not None and service is not None
    assert rendered[job.name]["spec"]["entrypoint"] == job.entrypoint
    assert rendered[job.name]["spec"]["rayClusterSpec"] == job.cluster
    assert rendered[service.name]["spec"]["rayClusterConfig"] == service.cluster


def test_a_worker_group_of_the_desired_job_is_one_shape_of_the_pools_chain() -> None:
    job = desire(load_stack("prod")).of_kind("RayJob")
    assert job is not None
    assert [(g.name, g.start_slices, g.most_slices) for g in job.worker_groups] == [
        ("train-v6e-16", 0, 2),
        ("train-v5litepod-16", 0, 2),
    ]
    assert job.autoscaling is True


def test_a_train_args_change_is_a_field_change_not_a_text_edit() -> None:
    job = desire(load_stack("dev")).of_kind("RayJob")
    assert job is not None and job.train_args is not None
    changed = dataclasses.replace(job, train_args=dataclasses.replace(job.train_args, steps=7))
    assert "--steps 7 " in changed.entrypoint
    assert changed.entrypoint.replace("--steps 7 ", "") == job.entrypoint.replace(
        f"--steps {job.train_args.steps} ", ""
    )


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_a_stack_run_reads_the_workload_images_and_the_token_version_once(
    stack: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = {"images": 0, "token": 0}
    real_images, real_token = images.workload_images, llm_stack.hf_token_version

    def counting_images(cfg):  # type: ignore[no-untyped-def]
        calls["images"] += 1
        return real_images(cfg)

    def counting_token(cfg):  # type: ignore[no-untyped-def]
        calls["token"] += 1
        return real_token(cfg)

    monkeypatch.setattr(state.images, "workload_images", counting_images)
    monkeypatch.setattr(state.llm_stack, "hf_token_version", counting_token)
    run_stack(stack)
    assert calls == {"images": 1, "token": 1}
