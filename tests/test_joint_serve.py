"""The rendered dev RayService on the joint substrate (issue 33, "Done when"): the real KubeRay
operator creates its cluster, deploys its serveConfigV2 through the head's dashboard (by the
service proxy, as it reaches a dashboard on GKE), waits for the application to be healthy and
creates the serve Service; a request through that Service is answered by the replica on the
one whole v6e 2x2 slice the emulated GKE nodes hold.

Departures from the rendered object: none. The GCS emulator holds its bundle and a checkpoint
(written by the training code's own save_checkpoint, as a dev training run would have).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from conftest import mocked

from ray_apps import checkpoints, features, model
from tests.control_plane import CRD_FILES, require_tools, tools_missing
from tests.substrate import JointSubstrate, apply_stack, custom, publish_bundle, require_namespaces, storage_env
from tpuray import capacity, catalog
from tpuray.local import storage_emulator
from tpuray.local.localrun import SAMPLE_REQUEST
from tpuray.local.substrate import nodes
from tpuray.preview.render import manifests

pytestmark = [pytest.mark.controlplane, pytest.mark.slow, pytest.mark.joint_e2e]

NS = "ray"
SERVICE = "tpuray-dev-serve"
CLASS = "v6e-serve-dev"
V6E_2X2 = catalog.lookup("v6e", "2x2")


def _rayservice() -> dict[str, Any]:
    return next(o for o in manifests(mocked("dev")) if o["kind"] == "RayService")


def _publish_checkpoint(host: str, run_uri: str) -> None:
    stats = features.fit_stats(features.engineer(features.generate_rows(256)))
    cfg = model.ModelConfig()
    with tempfile.TemporaryDirectory() as tmp, storage_env(host):
        folder = model.save_checkpoint(Path(tmp), model.TrainingState(1, model.init_params(cfg), None, cfg, stats))
        target = f"{run_uri.rstrip('/')}/{checkpoints.checkpoint_dir_name(1)}"
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            storage_emulator.upload(host, f"{target}/{path.relative_to(folder)}", path.read_bytes())


@pytest.fixture(scope="module")
def substrate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JointSubstrate]:
    require_tools(tools_missing())
    require_namespaces()
    joint = JointSubstrate.start(CRD_FILES, tmp_path_factory.mktemp("joint-serve"), storage=True)
    try:
        joint.add_nodes([nodes.SlicePool(CLASS, V6E_2X2, capacity.SPOT, 1)], system=True)
        apply_stack(joint, manifests(mocked("dev")), NS)
        service = _rayservice()
        (app,) = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"]
        publish_bundle(joint, app["runtime_env"]["working_dir"])
        _publish_checkpoint(joint.storage_host, app["args"]["checkpoint_uri"])
        joint.start_loop()
        joint.plane.apply(service)
        yield joint
    finally:
        joint.stop()


def _serve(joint: JointSubstrate, method: str, path: str, **kwargs: Any) -> requests.Response:
    """Through the serve Service KubeRay creates (`<name>-serve-svc`, port 8000)."""
    url = f"http://{SERVICE}-serve-svc.{NS}.svc.cluster.local:8000{path}"
    return requests.request(method, url, proxies={"http": joint.proxy.url}, timeout=30, **kwargs)


def test_the_dev_rayservice_answers_through_its_serve_service_from_one_whole_slice(substrate: JointSubstrate) -> None:
    status = substrate.wait(
        "the RayService Ready",
        lambda: any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in custom(substrate, "rayservices", NS, SERVICE).get("status", {}).get("conditions", [])
        ),
        600,
    )
    assert status is True
    answer = substrate.wait("an answer", lambda: _serve(substrate, "POST", "/predict", json=SAMPLE_REQUEST).json(), 120)
    assert len(answer["predictions"]) == 2
    health = _serve(substrate, "GET", "/healthz").json()
    assert (health["status"], health["model_step"]) == ("ready", 1)
    # The replica's host is the slice's one host: TPU_NAME from the webhook stand-in, the group's labels.
    assert (health["placement"]["slice"], health["placement"]["generation"]) == ("serve-v6e-4-0", "v6e")
    workers = substrate.pods(NS, "ray.io/group=serve-v6e-4")
    assert [p["spec"]["nodeName"] for p in workers] == [f"gke-{CLASS}-v6e-4-spot-0-0"]
