"""Serve replicas on the capacity chain (docs/capacity.md): Ray's fallback_strategy carries the
chain's later shapes, and /healthz says where a replica landed."""

from __future__ import annotations

from ray_apps import serve
from tests.conftest import mocked

V6E_HOST = {
    "ray.io/tpu-slice-name": "train-v6e-16-1",
    "ray.io/market-type": "on-demand",
    "tpuray.dev/capacity-tier": "on-demand",
    "tpuray.dev/generation": "v6e",
    "tpuray.dev/slice-pool": "v6e-train",
}
PRIMARY = {"tpuray.dev/slice-pool": "v6e-train", "tpuray.dev/generation": "v6e"}


def test_replica_options_carry_the_chains_later_shapes_as_rays_fallback_strategy() -> None:
    args = serve.AppArgs(
        checkpoint_uri="gs://b/ckpt",
        label_selector=PRIMARY,
        fallback_label_selectors=[{"tpuray.dev/slice-pool": "v6e-train", "tpuray.dev/generation": "v5e"}],
    )
    assert serve.checkpoint_actor_options(args) == {
        "num_cpus": 1.0,
        "label_selector": PRIMARY,
        "fallback_strategy": [
            {"label_selector": {"tpuray.dev/slice-pool": "v6e-train", "tpuray.dev/generation": "v5e"}}
        ],
    }


def test_a_replica_on_the_primary_shape_reports_its_slice_and_tier() -> None:
    assert serve.replica_placement(V6E_HOST, PRIMARY) == {
        "slice": "train-v6e-16-1",
        "generation": "v6e",
        "tier": "on-demand",
        "fallback": False,
    }


def test_a_replica_on_a_fallback_shape_says_so() -> None:
    v5e_host = {**V6E_HOST, "tpuray.dev/generation": "v5e", "ray.io/tpu-slice-name": "serve-v5litepod-16-0"}
    assert serve.replica_placement(v5e_host, PRIMARY)["fallback"] is True


def test_the_rendered_service_passes_the_pools_shape_selector_and_no_fallback_without_one() -> None:
    from infra.components.workloads import serve_app_args

    args = serve_app_args(mocked("dev").config)
    assert args["label_selector"] == {"tpuray.dev/slice-pool": "v6e-serve-dev", "tpuray.dev/generation": "v6e"}
    assert "fallback_label_selectors" not in args
