"""The joint substrate (issue 33): the real API server and KubeRay operator of tests/control_plane.py,
with the stand-ins of tpuray/local/substrate/ around them: emulated GKE nodes, the scheduler step, the TPU
webhook (served as a mutating admission webhook), the pod runner, the Job controller and GC, and
the service proxy the operator reaches Ray dashboards through. `step()` runs every loop once;
`start_loop()` runs them every `period_s` in a thread until `stop()`.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.control_plane import ControlPlane
from tests.leftovers import SESSION_ENV
from tpuray.local import storage_emulator
from tpuray.local.emulator.processes import _free_port
from tpuray.local.substrate import controllers, nodes, scheduler
from tpuray.local.substrate.kube import Kube
from tpuray.local.substrate.netns import PodNetwork
from tpuray.local.substrate.pod_runner import PodRunner
from tpuray.local.substrate.service_proxy import ServiceProxy
from tpuray.local.substrate.webhook_server import WebhookServer

SYSTEM_POOL = "ray-system"  # the stacks' CPU pool for Ray heads (tpuray.dev/pool)


def require_namespaces() -> None:
    """The pods' network and mount namespaces need root, unshare(1) and nsenter(1): skipped
    without them, failed under CI=true (.ci/run runs the suite as root)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("nsenter") is None:
        reason = "needs root, unshare(1) and nsenter(1) for the pods' network and mount namespaces"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


class JointSubstrate:
    def __init__(self, plane: ControlPlane, workdir: Path, storage: bool = False):
        """`storage`: a GCS emulator stands for GCS (pod_spec.REWRITES "storage"); `storage_host`
        is its address, for this process too."""
        self.plane = plane
        self.storage_proc: Any = None
        self.storage_host = ""
        storage_port = None
        if storage:
            storage_port = _free_port()
            self.storage_proc, self.storage_host = storage_emulator.start(workdir / "gcs", storage_port)
        self.kube = Kube(plane.url, plane.session)
        self.webhook = WebhookServer(self.kube, workdir).start()
        self.webhook.register()
        self.network = PodNetwork()
        api_port = int(plane.url.rsplit(":", 1)[1])
        marks = {SESSION_ENV: os.environ[SESSION_ENV]} if SESSION_ENV in os.environ else {}
        self.runner = PodRunner(self.kube, workdir, self.network, api_port, Path(plane.serving_cert), marks,
                                storage_port)  # fmt: skip
        self.proxy = ServiceProxy(self.network, self.runner.resolve)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def start(cls, crd_files: list[Path], workdir: Path, storage: bool = False) -> JointSubstrate:
        plane = ControlPlane().start(crd_files, operator=False)
        try:
            self = cls(plane, workdir, storage)
            plane._start_operator({"HTTP_PROXY": self.proxy.url, "http_proxy": self.proxy.url})
        except BaseException:
            plane.stop()
            raise
        return self

    def add_nodes(self, pools: list[nodes.SlicePool], system: bool = False) -> list[str]:
        """Nodes of scripted slices (and, the first time, the system pool's node)."""
        return nodes.install(self.kube, pools, SYSTEM_POOL if system else None)

    def publish_root_ca(self, namespace: str) -> None:
        """kube-controller-manager's root-ca-cert-publisher: the kube-root-ca.crt ConfigMap."""
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt", "namespace": namespace},
              "data": {"ca.crt": Path(self.plane.serving_cert).read_text()}}  # fmt: skip
        with contextlib.suppress(Exception):
            self.kube.create("configmaps", cm, namespace)

    def step(self) -> None:
        for name, fn in (
            ("scheduler", scheduler.step),
            ("jobs", controllers.jobs_step),
            ("gc", controllers.gc_step),
            ("endpoints", controllers.endpoints_step),
        ):
            try:
                fn(self.kube)
            except Exception as err:  # noqa: BLE001 - recorded, the loop goes on as a controller would
                self.errors.append(f"{name}: {err}")
        try:
            self.runner.step()
        except Exception as err:  # noqa: BLE001
            self.errors.append(f"pod runner: {err}")

    def start_loop(self, period_s: float = 0.5) -> None:
        def loop() -> None:
            while not self._stop.is_set():
                self.step()
                self._stop.wait(period_s)

        self._thread = threading.Thread(target=loop, name="joint-substrate", daemon=True)
        self._thread.start()

    def dashboard(self, service: str, namespace: str, path: str, **kwargs: Any) -> Any:
        """GET/POST a Ray dashboard API through the service proxy, as the operator does."""
        import requests

        url = f"http://{service}.{namespace}.svc.cluster.local:8265{path}"
        method = "POST" if "json" in kwargs else "GET"
        proxies = {"http": self.proxy.url}
        return requests.request(method, url, proxies=proxies, timeout=30, **kwargs)

    def wait(self, what: str, check, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                got = check()
                if got:
                    return got
            time.sleep(1)
        raise AssertionError(f"{what} not within {timeout:g} s; substrate errors: {self.errors[-5:]}; "
                             f"operator log: {self.plane.log('kuberay-operator')[-1500:]}")  # fmt: skip

    def pods(self, namespace: str, selector: str = "") -> list[dict[str, Any]]:
        return self.kube.list("pods", namespace, selector)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.runner.stop()
        self.proxy.stop()
        self.webhook.stop()
        self.network.stop()
        self.plane.stop()
        if self.storage_proc is not None:
            self.storage_proc.kill()
            self.storage_proc.wait(timeout=30)


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True)


def apply_stack(joint: JointSubstrate, objects: list[dict[str, Any]], namespace: str) -> None:
    """Every rendered object but the Ray ones (namespaces, accounts, RBAC, policies...), as
    `pulumi up` applies them, and the namespace's kube-root-ca.crt."""
    for obj in objects:
        if obj["kind"] == "Namespace":
            joint.plane.ensure_namespace(obj["metadata"]["name"])
        if obj["apiVersion"] != "ray.io/v1":
            joint.plane.apply(obj)
    joint.publish_root_ca(namespace)


def rayjob_for_substrate(joint: JointSubstrate, rayjob: dict[str, Any], **train_changes: Any) -> dict[str, Any]:
    """The rendered RayJob as the joint substrate runs it, with its bundle, buckets and data on
    the GCS emulator. Departures, each a field of the train contract, never a text edit
    (LocalJob.set): `--device emulated` (JAX on CPU), and `train_changes` (fewer steps, a
    shorter deadline). `spec.suspend` becomes false: Kueue, which admits it on GKE, does not run
    here (tests/test_kueue_control_plane.py proves that admission on its own)."""
    from ray_apps.data import write_synthetic
    from tpuray.local.localrun import DATA_ROWS, LocalJob, gs_uris

    job = copy.deepcopy(rayjob)
    runtime_env = yaml.safe_load(job["spec"].get("runtimeEnvYAML") or "{}") or {}
    local = LocalJob.of_train_entrypoint(job["spec"]["entrypoint"], runtime_env)
    local.set("JAX on CPU, gloo collectives", device="emulated")
    if train_changes:
        local.set("a test's run", **train_changes)
    job["spec"]["entrypoint"] = local.entrypoint
    job["spec"]["suspend"] = False
    host = publish_bundle(joint, runtime_env["working_dir"], gs_uris(local.command))
    with storage_env(host):
        assert local.args is not None
        if not storage_emulator.exists(host, local.args.data_uri.rstrip("/") + "/part-00000.parquet"):
            write_synthetic(local.args.data_uri, DATA_ROWS)
    return job


def publish_bundle(joint: JointSubstrate, working_dir: str, other_uris: tuple[str, ...] | list[str] = ()) -> str:
    """The buckets of `working_dir` and `other_uris` on the GCS emulator, and the bundle built
    from ray_apps/ now at `working_dir` (the object the rendered URI names: same sources, same
    hash); returns the emulator's address."""
    from tpuray import bundle

    host = joint.storage_host
    assert host, "the substrate runs no GCS emulator: JointSubstrate.start(..., storage=True)"
    with storage_env(host):
        storage_emulator.create_buckets(host, [working_dir, *other_uris])
        if not storage_emulator.exists(host, working_dir):
            storage_emulator.upload(host, working_dir, bundle.current().data)
    return host


@contextlib.contextmanager
def storage_env(host: str):  # noqa: ANN201 - a context manager
    old = os.environ.get(storage_emulator.HOST_ENV)
    os.environ[storage_emulator.HOST_ENV] = host
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(storage_emulator.HOST_ENV, None)
        else:
            os.environ[storage_emulator.HOST_ENV] = old


def container_log(joint: JointSubstrate, namespace: str, pod_prefix: str, container: str, since: float = 0.0) -> str:
    """The log of `container` of every pod named `<pod_prefix>...` the runner started since
    `since` (time.time()), joined in start order."""
    folders = [p["dir"] for p in joint.runner.started
               if p["namespace"] == namespace and p["name"].startswith(pod_prefix) and p["at"] >= since]  # fmt: skip
    return "\n".join((f / f"{container}.log").read_text(errors="replace") for f in folders
                     if (f / f"{container}.log").exists())  # fmt: skip


def custom(joint: JointSubstrate, plural: str, namespace: str, name: str) -> dict[str, Any]:
    url = f"{joint.plane.url}/apis/ray.io/v1/namespaces/{namespace}/{plural}/{name}"
    return joint.kube.session.get(url, timeout=10).json()
