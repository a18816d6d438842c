"""Every label key has one home: tpuray/labels.py for tpuray and infra/, ray_apps/slices.py for
ray_apps (which must not import tpuray), and the two agree."""

from __future__ import annotations

import ast
from pathlib import Path

from ray_apps import slices
from tpuray import labels

REPO = Path(__file__).resolve().parent.parent


def test_ray_apps_ray_label_keys_are_the_same_as_tpurays() -> None:
    assert {
        slices.SLICE_NAME: labels.RAY_TPU_SLICE_NAME,
        slices.WORKER_ID: labels.RAY_TPU_WORKER_ID,
        slices.TOPOLOGY: labels.RAY_TPU_TOPOLOGY,
        slices.POD_TYPE: labels.RAY_TPU_POD_TYPE,
        slices.ACCELERATOR_TYPE: labels.RAY_ACCELERATOR_TYPE,
        slices.MARKET_TYPE: labels.MARKET_TYPE,
        slices.CAPACITY_TIER: labels.CAPACITY_TIER,
        slices.GENERATION: labels.GENERATION,
        slices.SLICE_POOL: labels.SLICE_POOL,
        slices.GROUP_POD_TYPE: labels.TPU_POD_TYPE,
    } == {
        "ray.io/tpu-slice-name": "ray.io/tpu-slice-name",
        "ray.io/tpu-worker-id": "ray.io/tpu-worker-id",
        "ray.io/tpu-topology": "ray.io/tpu-topology",
        "ray.io/tpu-pod-type": "ray.io/tpu-pod-type",
        "ray.io/accelerator-type": "ray.io/accelerator-type",
        "ray.io/market-type": "ray.io/market-type",
        "tpuray.dev/capacity-tier": "tpuray.dev/capacity-tier",
        "tpuray.dev/generation": "tpuray.dev/generation",
        "tpuray.dev/tpu-pod-type": "tpuray.dev/tpu-pod-type",
        "tpuray.dev/slice-pool": "tpuray.dev/slice-pool",
    }


def _python_files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (REPO / folder).rglob("*.py"))


def test_ray_apps_never_imports_tpuray() -> None:
    offenders = []
    for path in _python_files("ray_apps"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(REPO)}: {n}" for n in names if n.split(".")[0] in ("tpuray", "infra")]
    assert offenders == []


def test_no_module_declares_a_label_key_of_labels_py_again() -> None:
    keys = {v for k, v in vars(labels).items() if k.isupper() and isinstance(v, str)}
    again = []
    for path in _python_files("tpuray", "infra"):
        if path == REPO / "tpuray" / "labels.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value in keys:
                again.append(f"{path.relative_to(REPO)}: {ast.unparse(node)}")
    assert again == []
