"""Ray Serve LLM on emulated TPU slices: the rendered LLMConfig, Ray's own app graph and placement,
the CPU stand-in engine (tpuray/llm_emulator) in place of vLLM.

One emulated cluster (2 slices of v6e 4x4, 4 hosts each) is shared by the module's tests.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from tpuray.config import stacks_dir
from tpuray.errors import UserError
from tpuray.labels import RAY_TPU_SLICE_NAME as SLICE
from tpuray.local import emulator, localrun
from tpuray.local.llm_emulator import rewrite
from tpuray.preview.mockrun import run_stack

REPO = Path(__file__).resolve().parent.parent


def llm_stack_doc() -> dict[str, Any]:
    """dev with one serve pool of 2 v6e 4x4 slices and the llm backend at 2 replicas (no training)."""
    doc = copy.deepcopy(yaml.safe_load((stacks_dir() / "Pulumi.dev.yaml").read_text()))
    config = doc["config"]
    config["tpuray:slicePools"] = [
        {"name": "v6e-serve", "generation": "v6e", "topology": "4x4", "slices": 2, "capacity": [{"onDemand": True}]}
    ]
    config["tpuray:workloads"].pop("train")
    config.pop("tpuray:queues")  # its quota is on the training pool, and no job is left to queue
    config["tpuray:workloads"]["serve"] = {
        "pool": "v6e-serve",
        "backend": "llm",
        "modelId": "google/gemma-3-4b-it",
        "modelSource": "gs://acme-ml-dev-models/google/gemma-3-4b-it",
        "maxModelLen": 4096,
        "replicas": 2,
    }
    return doc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow  # ~5 s alone (importing Ray Serve LLM), more on a loaded machine
def test_the_rendered_llm_config_builds_rays_openai_app_with_the_stand_in_and_a_deferred_slice_pg(
    tmp_path: Path,
) -> None:
    path = tmp_path / "Pulumi.llm.yaml"
    path.write_text(yaml.safe_dump(llm_stack_doc()))
    service = localrun.rendered(run_stack(str(path)), "RayService")
    (app, _healthz) = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"]
    rewrite.rewrite_app(app)
    script = (
        "import json, sys\n"
        "from ray.serve.llm import LLMConfig, build_openai_app\n"
        "from ray.llm._internal.serve.core.server.llm_server import LLMServer\n"
        "app = json.loads(sys.argv[1])\n"
        "cfg = LLMConfig(**app['args']['llm_configs'][0])\n"
        "build_openai_app({'llm_configs': [cfg]})\n"
        "opts = LLMServer.get_deployment_options(cfg)\n"
        "print(json.dumps({'bundles': 'placement_group_bundles' in opts, 'replicas': opts['num_replicas'],\n"
        "  'engine': opts['ray_actor_options']['runtime_env']['env_vars']['RAYLLM_VLLM_ENGINE_CLS']}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(rewrite.STUBS), "RAY_AUTH_MODE": "disabled"}
    out = subprocess.run(
        [sys.executable, "-c", script, json.dumps(app)], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    # No bundles on the deployment: Ray defers the placement group to the replica (a whole slice).
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "bundles": False,
        "replicas": 2,
        "engine": "tpuray.local.llm_emulator.standin:StandInEngine",
    }


def test_an_llm_config_without_topology_on_multi_host_slices_is_named_before_deploying() -> None:
    app = {"name": "tpuray-serve", "import_path": rewrite.OPENAI_APP, "args": {"llm_configs": [{}]}}
    from tpuray import catalog

    assert rewrite.topology_problems(app, catalog.lookup("v6e", "4x4")) == [
        "application 'tpuray-serve' llm_configs[0]: accelerator_config.topology is missing; the emulated slices are "
        "v6e 4x4 (4 hosts): without a topology Ray Serve LLM reserves per-chip bundles that may straddle slices or "
        "stay DEPLOYING; set accelerator_config {kind: tpu, topology: 4x4}"
    ]


@pytest.fixture(scope="module")
def llm_cluster() -> Iterator[tuple[Any, Any]]:
    root = Path(tempfile.mkdtemp(prefix="tpl-", dir="/tmp"))
    saved = os.environ.get(emulator.LOCAL_DIR_ENV)
    os.environ[emulator.LOCAL_DIR_ENV] = str(root)
    path = root / "Pulumi.llm.yaml"
    path.write_text(yaml.safe_dump(llm_stack_doc()))
    run = run_stack(str(path))
    plan = emulator.plan_slices(run, start_only=True)
    cluster = emulator.EmulatedCluster.start(
        plan, state_dir=root / "state", name="test-llm", dashboard=True, delivery=True
    )
    try:
        yield cluster, run
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
        if saved is None:
            os.environ.pop(emulator.LOCAL_DIR_ENV, None)
        else:
            os.environ[emulator.LOCAL_DIR_ENV] = saved


@pytest.mark.slow
def test_two_replicas_each_hold_one_whole_slice_and_answer_openai_chat(llm_cluster: tuple[Any, Any]) -> None:
    cluster, run = llm_cluster
    assert [(s.shape.topology, s.shape.hosts) for s in cluster.slices] == [("4x4", 4), ("4x4", 4)]
    result = localrun.run_serve(cluster, run, Console(quiet=True), None, 600, http_port=free_port())
    answer = result["response"]
    assert answer["model"] == "google/gemma-3-4b-it"
    assert answer["choices"][0]["message"]["content"].startswith("stand-in engine on slice ")

    import ray

    ray.init(address=cluster.address, namespace="placement-check", log_to_driver=False)
    try:
        node_slice = {n["NodeID"]: n["Labels"].get(SLICE) for n in ray.nodes() if n["Alive"]}
        slice_pgs = [
            pg
            for pg in ray.util.placement_group_table().values()
            if pg["state"] == "CREATED" and any(b.get("TPU") == 4.0 for b in pg["bundles"].values())
        ]
    finally:
        ray.shutdown()
    # One placement group per replica: 4 bundles of 4 chips, on the 4 hosts of one slice.
    assert len(slice_pgs) == 2
    nodes = [set(pg["bundles_to_node_id"].values()) for pg in slice_pgs]
    slices = [{node_slice[n] for n in hosts} for hosts in nodes]
    assert [len(hosts) for hosts in nodes] == [4, 4]  # 4 bundles on 4 distinct hosts each
    assert [len(s) for s in slices] == [1, 1]  # ... all of one slice (never split)
    assert slices[0] != slices[1]  # ... and never the same slice (never shared)
    assert answer["choices"][0]["message"]["content"].removeprefix("stand-in engine on slice ") in slices[0] | slices[1]


@pytest.mark.slow
def test_run_serve_refuses_an_llm_config_without_topology_before_deploying(
    llm_cluster: tuple[Any, Any], tmp_path: Path
) -> None:
    cluster, run = llm_cluster
    service = localrun.rendered(run, "RayService")
    config = yaml.safe_load(service["spec"]["serveConfigV2"])
    config["applications"][0]["args"]["llm_configs"][0].pop("accelerator_config")
    service["spec"]["serveConfigV2"] = yaml.safe_dump(config)

    class _Run:
        stack = run.stack

        def kubernetes_objects(self) -> list[Any]:
            return [type("R", (), {"inputs": service, "manifest": lambda self: service})()]

    with pytest.raises(UserError, match="accelerator_config.topology is missing"):
        localrun.run_serve(cluster, _Run(), Console(quiet=True), None, 5, http_port=free_port())  # type: ignore[arg-type]
