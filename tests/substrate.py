"""The joint substrate (issue 33): the real API server and KubeRay operator of tests/control_plane.py,
with the stand-ins of tpuray/local/substrate/ around them: emulated GKE nodes, the scheduler step, the TPU
webhook (served as a mutating admission webhook), the pod runner, the Job controller and GC, and
the service proxy the operator reaches Ray dashboards through. `step()` runs every loop once;
`start_loop()` runs them every `period_s` in a thread until `stop()`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.control_plane import ControlPlane
from tests.leftovers import SESSION_ENV
from tpuray.local.substrate import controllers, nodes, scheduler
from tpuray.local.substrate.kube import Kube
from tpuray.local.substrate.netns import PodNetwork
from tpuray.local.substrate.pod_runner import PodRunner
from tpuray.local.substrate.service_proxy import ServiceProxy
from tpuray.local.substrate.webhook_server import WebhookServer

SYSTEM_POOL = "ray-system"  # the stacks' CPU pool for Ray heads (tpuray.dev/pool)


def require_namespaces() -> None:
    """The pods' network and mount namespaces need root, unshare(1) and nsenter(1)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("nsenter") is None:
        pytest.skip("needs root, unshare(1) and nsenter(1) for the pods' network and mount namespaces")


class JointSubstrate:
    def __init__(self, plane: ControlPlane, workdir: Path):
        self.plane = plane
        self.kube = Kube(plane.url, plane.session)
        self.webhook = WebhookServer(self.kube, workdir).start()
        self.webhook.register()
        self.network = PodNetwork()
        api_port = int(plane.url.rsplit(":", 1)[1])
        marks = {SESSION_ENV: os.environ[SESSION_ENV]} if SESSION_ENV in os.environ else {}
        self.runner = PodRunner(self.kube, workdir, self.network, api_port, Path(plane.serving_cert), marks)
        self.proxy = ServiceProxy(self.network, self.runner.resolve)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def start(cls, crd_files: list[Path], workdir: Path) -> JointSubstrate:
        plane = ControlPlane().start(crd_files, operator=False)
        try:
            self = cls(plane, workdir)
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
        for name, fn in (("scheduler", scheduler.step), ("jobs", controllers.jobs_step), ("gc", controllers.gc_step)):
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


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True)
