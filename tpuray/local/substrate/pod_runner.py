"""The pod runner: the part of a kubelet the joint substrate needs (docs/testing.md).

Each `step` reads the API server: a pod bound to one of its nodes is started, with its init
containers first, each container running the command, args and environment the operator wrote
(pod_spec.py does the kubelet's env work and the few REWRITES this machine needs, each named with
its reason); it is marked Running, and Ready once its readiness probe (run as written, against
its own ports) passes; a pod being deleted gets SIGTERM, then SIGKILL after its grace period, and
is then removed (the kubelet's final delete). A container that exits is restarted under
restartPolicy Always; otherwise the pod ends Succeeded or Failed.
Unlike kubelets on separate machines, it starts at most MAX_STARTING_WORKERS Ray worker pods at
a time (one counts until Ready, for at most STARTING_S): eight hosts starting at once on two
shared cores missed Ray's hard-coded 30 s raylet registration wait (ray/_private/node.py).
(Over 400 lines: starting, observing and stopping a pod share its RunningPod state.)
Not modelled: liveness and startup probes, resource limits (no cgroups), image pulls, CSI and
secret volumes (a pod using one is not started), probe timing (every probe runs each step).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from ray_apps.contracts import STORAGE_EMULATOR_ENV
from tpuray import catalog, labels
from tpuray.local.emulator.processes import _free_port
from tpuray.local.substrate import pod_spec
from tpuray.local.substrate.kube import Kube
from tpuray.local.substrate.netns import PodNetwork, Relay

VENV_BIN = str(Path(sys.executable).parent)  # the "image": this checkout's Python environment
IMAGE_TOOLS = ("ray", "python", "python3", "serve", "pip")  # on the image's PATH, /usr/local/bin here
IMAGE_HOME = "/home/ray"  # rayproject/ray's user home and working directory
MAX_STARTING_WORKERS = 2  # one per core
STARTING_S = 60.0
_CHECKOUT = Path(__file__).resolve().parents[3]  # the tree whose tpuray, ray_apps the pods import
_PREFIX = Path(sys.prefix).resolve()
IMAGE_PATHS = (_CHECKOUT,) if _PREFIX.is_relative_to(_CHECKOUT) else (_CHECKOUT, _PREFIX)


def _is_worker(pod: dict[str, Any]) -> bool:
    return (pod["metadata"].get("labels") or {}).get(labels.RAY_NODE_TYPE) == "worker"


class Unresolved(Exception):
    """A Service the container names has no started pod behind it yet."""


@dataclass
class RunningPod:
    uid: str
    namespace: str
    name: str
    ip: str
    dir: Path
    ports: pod_spec.PortMap = field(default_factory=pod_spec.PortMap)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    init: subprocess.Popen | None = None  # the init container running now
    restarts: dict[str, int] = field(default_factory=dict)
    exited_at: dict[str, float] = field(default_factory=dict)
    ready: bool = False
    phase: str = "Pending"
    reported: str = ""
    stopping: bool = False
    worker: bool = False  # a Ray worker pod (ray.io/node-type worker): its start is paced
    started_at: float = field(default_factory=time.monotonic)

    def starting(self) -> bool:
        return self.worker and not self.ready and not self.stopping and time.monotonic() - self.started_at < STARTING_S


def paced(pod: dict[str, Any], runs: Iterable[RunningPod]) -> bool:
    """Whether a bound Ray worker pod waits for a later step: MAX_STARTING_WORKERS are starting."""
    return _is_worker(pod) and sum(r.starting() for r in runs) >= MAX_STARTING_WORKERS


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class PodRunner:
    def __init__(
        self,
        kube: Kube,
        workdir: Path,
        network: PodNetwork,
        api_port: int,
        ca_file: Path,
        marks: dict[str, str] | None = None,
        storage_port: int | None = None,
    ):
        """`marks`: bookkeeping variables added to every container's environment, never read by a
        pod (the test session's token, which tests/leftovers.py looks for in processes left behind).
        `storage_port`: the GCS emulator on 127.0.0.1 that stands for GCS (REWRITES "storage")."""
        self.kube, self.workdir, self.network, self.ca_file = kube, workdir, network, ca_file
        self.marks = dict(marks or {})
        self.api_port = api_port
        self.relay = Relay(network, api_port, api_port)  # the `kubernetes` Service, inside
        self.storage: dict[str, str] = {}
        self.storage_relay: Relay | None = None
        if storage_port is not None:
            self.storage_relay = Relay(network, storage_port, storage_port)
            self.storage = {STORAGE_EMULATOR_ENV: f"http://127.0.0.1:{storage_port}"}
        self.pods: dict[str, RunningPod] = {}
        self.image_bin = workdir / "image-bin"  # bound on /usr/local/bin in every pod (REWRITES "image")
        self.image_bin.mkdir(parents=True, exist_ok=True)
        for tool in IMAGE_TOOLS:
            (self.image_bin / tool).write_text(f'#!/bin/sh\nexec {VENV_BIN}/{tool} "$@"\n')
            (self.image_bin / tool).chmod(0o755)
        # Every pod started, in order (the kubelet's "Started" events): namespace, name, its
        # ray.io/group, its node and the time, for tests and benchmarks after the pod is gone.
        self.started: list[dict[str, Any]] = []
        self._ips = 0
        self._services: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.RLock()

    # -- name resolution (the pods' DNS and kube-proxy, and service_proxy's resolver)
    def service_port(self, service: str, namespace: str, port: int) -> int:
        svc = self._services.get((namespace, service))
        if svc is None:
            with contextlib.suppress(Exception):
                svc = self.kube.session.get(f"{self.kube.url}/api/v1/namespaces/{namespace}/services/{service}",
                                            timeout=10).json()  # fmt: skip
        if not svc or "spec" not in svc:
            raise Unresolved(f"{service}.{namespace}")
        self._services[(namespace, service)] = svc
        selector = svc["spec"].get("selector") or {}
        service_port = next((sp for sp in svc["spec"].get("ports", []) if sp["port"] == port), {"port": port})
        for pod in self.kube.list("pods", namespace):
            run = self.pods.get(pod["metadata"]["uid"])
            if run and run.procs and pod_spec.selects(selector, pod):
                target = pod_spec.target_port(pod, service_port)
                if target is None:
                    break  # the pod has no container port of that name
                return run.ports.get(target, _free_port)
        raise Unresolved(f"{service}.{namespace}")

    def resolve(self, host: str, port: int) -> int | None:
        """service_proxy's resolver: a Service's DNS name or a pod IP, with a port."""
        with contextlib.suppress(Unresolved, StopIteration):
            for run in list(self.pods.values()):
                if run.ip == host:
                    return run.ports.ports.get(port, port)
            parts = host.split(".")
            if len(parts) >= 3 and parts[2] == "svc":
                return self.service_port(parts[0], parts[1], port)
        return None

    # -- the loop
    def step(self) -> None:
        pods = self.kube.list("pods")
        nodes = {n["metadata"]["name"] for n in self.kube.list("nodes")}
        self._services.clear()
        seen = set()
        for pod in pods:
            uid = pod["metadata"]["uid"]
            seen.add(uid)
            run = self.pods.get(uid)
            if pod["metadata"].get("deletionTimestamp"):
                if run is not None and not run.stopping:
                    run.stopping = True
                    grace = int(pod["metadata"].get("deletionGracePeriodSeconds", 30))
                    threading.Thread(target=self._terminate, args=(run, grace, True), daemon=True).start()
                elif run is None and pod["spec"].get("nodeName") in nodes:
                    self._final_delete(pod["metadata"]["namespace"], pod["metadata"]["name"])
                continue
            if run is None and pod["spec"].get("nodeName") in nodes and pod["status"].get("phase") == "Pending":
                if paced(pod, self.pods.values()):
                    continue  # a later step starts it
                with contextlib.suppress(Unresolved):
                    self._start(pod)
            elif run is not None and not run.stopping:
                self._observe(pod, run)
        for uid in [u for u in self.pods if u not in seen]:  # gone from the API server: stop now
            run = self.pods[uid]
            if not run.stopping:
                run.stopping = True
                threading.Thread(target=self._terminate, args=(run, 0, False), daemon=True).start()

    # -- starting
    def _start(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        if any("csi" in v or "secret" in v for v in pod["spec"].get("volumes", [])):
            return  # not provided here (see the module docstring)
        self._ips += 1
        run = RunningPod(meta["uid"], meta["namespace"], meta["name"], f"10.80.{self._ips // 250}.{self._ips % 250 + 2}",
                         self.workdir / "pods" / f"{meta['namespace']}_{meta['name']}_{meta['uid']}",
                         worker=_is_worker(pod))  # fmt: skip
        run.dir.mkdir(parents=True, exist_ok=True)
        volumes = self._volumes(pod, run)
        pod = {**pod, "status": {**pod.get("status", {}), "podIP": run.ip, "hostIP": "127.0.0.1"}}
        commands = [(c, self._command(pod, c, run, volumes)) for c in pod["spec"]["containers"]]
        inits = [(c, self._command(pod, c, run, volumes)) for c in pod["spec"].get("initContainers") or []]
        self.pods[run.uid] = run
        self.started.append({"namespace": meta["namespace"], "name": meta["name"], "node": pod["spec"]["nodeName"],
                             "group": (meta.get("labels") or {}).get(labels.RAY_GROUP, ""), "at": time.time(),
                             "dir": run.dir})  # fmt: skip
        threading.Thread(target=self._launch, args=(pod, run, inits, commands), daemon=True).start()

    def _launch(self, pod: dict[str, Any], run: RunningPod, inits: list, commands: list) -> None:
        for container, (argv, env) in inits:
            with self._lock:
                if run.stopping:
                    return
                run.init = self._spawn(run, container["name"], argv, env)
            if run.init.wait() != 0 or run.stopping:
                run.phase = "Failed"
                return
        run.init = None
        with self._lock:
            if run.stopping:
                return
            for container, (argv, env) in commands:
                run.procs[container["name"]] = self._spawn(run, container["name"], argv, env)
            run.phase = "Running"

    def _spawn(self, run: RunningPod, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = open(run.dir / f"{name}.log", "ab")  # noqa: SIM115 - closed below, the child keeps its copy
        try:
            return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()

    def _volumes(self, pod: dict[str, Any], run: RunningPod) -> dict[str, tuple[str, str]]:
        """volume name -> ("bind", folder) or ("tmpfs", size option)."""
        out: dict[str, tuple[str, str]] = {}
        for vol in pod["spec"].get("volumes", []):
            folder = run.dir / "volumes" / vol["name"]
            folder.mkdir(parents=True, exist_ok=True)
            if "emptyDir" in vol:
                if vol["emptyDir"].get("medium") == "Memory":
                    limit = vol["emptyDir"].get("sizeLimit")
                    out[vol["name"]] = ("tmpfs", f"size={int(pod_spec._quantity(limit))}" if limit else "")
                    continue
            elif "projected" in vol:
                self._project(pod, vol["projected"], folder)
            out[vol["name"]] = ("bind", str(folder))
        return out

    def _project(self, pod: dict[str, Any], projected: dict[str, Any], folder: Path) -> None:
        """A projected volume as the kubelet writes it: a bound token from the TokenRequest API for
        the pod's service account, ConfigMap keys, downward API fields."""
        meta = pod["metadata"]
        for source in projected.get("sources", []):
            if "serviceAccountToken" in source:
                sat = source["serviceAccountToken"]
                account = pod["spec"].get("serviceAccountName", "default")
                request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                           "spec": {"expirationSeconds": int(sat.get("expirationSeconds", 3600)),
                                    "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                                       "uid": meta["uid"]}}}  # fmt: skip
                if sat.get("audience"):
                    request["spec"]["audiences"] = [sat["audience"]]
                url = f"{self.kube.url}/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{account}/token"
                response = self.kube.session.post(url, data=json.dumps(request), timeout=10)
                response.raise_for_status()
                (folder / sat.get("path", "token")).write_text(response.json()["status"]["token"])
            elif "configMap" in source:
                cm = source["configMap"]
                data = self.kube.session.get(
                    f"{self.kube.url}/api/v1/namespaces/{meta['namespace']}/configmaps/{cm['name']}", timeout=10
                ).json().get("data", {})  # fmt: skip
                for item in cm.get("items") or [{"key": k, "path": k} for k in data]:
                    (folder / item["path"]).write_text(data.get(item["key"], ""))
            elif "downwardAPI" in source:
                for item in source["downwardAPI"]["items"]:
                    (folder / item["path"]).write_text(pod_spec._field(pod, item["fieldRef"]["fieldPath"]))

    def _command(self, pod: dict[str, Any], container: dict[str, Any], run: RunningPod, volumes: dict) -> tuple:
        base = {
            "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
            "HOME": IMAGE_HOME,
            "HOSTNAME": pod["spec"].get("hostname") or pod["metadata"]["name"],
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(self.api_port),
            "KUBERNETES_SERVICE_PORT_HTTPS": str(self.api_port),
            "KUBERNETES_PORT": f"tcp://127.0.0.1:{self.api_port}",
            **self._device_env(pod, container),
            **self.storage,
            **self.marks,
        }
        env = pod_spec.container_env(pod, container, base)
        if self._device_env(pod, container) and "tpu" in env.get("JAX_PLATFORMS", ""):
            env["JAX_PLATFORMS"] = "cpu"  # REWRITES "devices": libtpu finds no chip here
        args = pod_spec.argv(container, env)
        head = (pod["metadata"].get("labels") or {}).get(labels.RAY_NODE_TYPE) == "head"
        if any("ray start" in a for a in args):
            env.update(pod_spec.serve_proxy_env(run.ports, _free_port, head))
        args = [pod_spec.rewrite_ray_start(a, run.ports, _free_port, head) for a in args]
        args = [pod_spec.rewrite_services(a, self.service_port) for a in args]
        env = {k: pod_spec.rewrite_local(pod_spec.rewrite_services(v, self.service_port), run.ports)
               for k, v in env.items()}  # fmt: skip
        return [*self.network.prefix(), "unshare", "--mount", "sh", "-c", self._mounts(container, volumes, self.image_bin), "sh",
                *args], env  # fmt: skip

    @staticmethod
    def _device_env(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
        """What GKE gives a container that requests TPU chips (REWRITES "devices")."""
        limits = (container.get("resources") or {}).get("limits") or {}
        selector = pod["spec"].get("nodeSelector") or {}
        if labels.TPU_RESOURCE not in limits or labels.GKE_TPU_TOPOLOGY not in selector:
            return {}
        shape = catalog.by_gke_labels(selector[labels.GKE_TPU_ACCELERATOR], selector[labels.GKE_TPU_TOPOLOGY],
                                      int(limits[labels.TPU_RESOURCE]))  # fmt: skip
        return {"TPU_ACCELERATOR_TYPE": shape.pod_type, "TPU_TOPOLOGY": shape.topology}

    @staticmethod
    def _mounts(container: dict[str, Any], volumes: dict[str, tuple[str, str]], image_bin: Path) -> str:
        """The shell run in the container's private mount namespace before its command (REWRITES "volumes")."""
        lines = ["set -e", "mount -t tmpfs tmpfs /run", "mkdir -p /run/tpuray-volumes/image",
                 f"mount --bind '{image_bin}' /run/tpuray-volumes/image"]  # fmt: skip
        # The "image" (this checkout and its Python environment) stays visible where it is, even
        # under a path a volume or the /home tmpfs covers (a checkout under /tmp, as CI may clone).
        for j, path in enumerate(IMAGE_PATHS):
            lines.append(f"mkdir -p /run/tpuray-volumes/code{j} && mount --bind '{path}' /run/tpuray-volumes/code{j}")
        mounts = sorted(container.get("volumeMounts") or [], key=lambda m: m["mountPath"])
        for i, mount in enumerate(mounts):
            kind, source = volumes.get(mount["name"], ("bind", ""))
            if kind == "bind" and source:
                lines.append(f"mkdir -p /run/tpuray-volumes/{i} && mount --bind '{source}' /run/tpuray-volumes/{i}")
        lines += ["mount -t tmpfs tmpfs /home", f"mkdir -p {IMAGE_HOME}"]
        for i, mount in enumerate(mounts):
            kind, source = volumes.get(mount["name"], ("bind", ""))
            path = mount["mountPath"]
            if kind == "tmpfs":
                lines.append(f"mkdir -p '{path}' && mount -t tmpfs {'-o ' + source if source else ''} tmpfs '{path}'")
            elif source:
                lines.append(f"mkdir -p '{path}' && mount --bind /run/tpuray-volumes/{i} '{path}'")
        for j, path in enumerate(IMAGE_PATHS):
            lines.append(f"mkdir -p '{path}' && mount --bind /run/tpuray-volumes/code{j} '{path}'")
        lines += ["mount --bind /run/tpuray-volumes/image /usr/local/bin", f"cd {IMAGE_HOME}", 'exec "$@"']
        return "\n".join(lines)

    # -- status
    def _observe(self, pod: dict[str, Any], run: RunningPod) -> None:
        with self._lock:
            procs = dict(run.procs)
        if not procs:
            if run.phase == "Failed":
                self._report(pod, run)
            return
        policy = pod["spec"].get("restartPolicy", "Always")
        codes = {name: p.poll() for name, p in procs.items()}
        for name, code in codes.items():
            if code is not None and policy == "Always":
                # CrashLoopBackOff: 10 s, doubling, at most 300 s (the kubelet's defaults).
                exited = run.exited_at.setdefault(name, time.monotonic())
                if time.monotonic() - exited < min(10 * 2 ** run.restarts.get(name, 0), 300):
                    continue
                del run.exited_at[name]
                container = next(c for c in pod["spec"]["containers"] if c["name"] == name)
                volumes = self._volumes(pod, run)
                full = {**pod, "status": {**pod["status"], "podIP": run.ip}}
                run.procs[name] = self._spawn(run, name, *self._command(full, container, run, volumes))
                run.restarts[name] = run.restarts.get(name, 0) + 1
        if policy != "Always" and all(c is not None for c in codes.values()):
            run.phase = "Succeeded" if all(c == 0 for c in codes.values()) else "Failed"
        run.ready = run.phase == "Running" and all(self._probe(pod, c, run) for c in pod["spec"]["containers"])
        self._report(pod, run, codes)

    def _probe(self, pod: dict[str, Any], container: dict[str, Any], run: RunningPod) -> bool:
        probe = (container.get("readinessProbe") or {}).get("exec")
        if probe is None:
            return run.procs[container["name"]].poll() is None
        command = [pod_spec.rewrite_local(a, run.ports) for a in probe["command"]]
        try:
            done = subprocess.run([*self.network.prefix(), *command], capture_output=True, timeout=5)
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0

    def _report(self, pod: dict[str, Any], run: RunningPod, codes: dict[str, int | None] | None = None) -> None:
        codes = codes or {}
        key = json.dumps([run.phase, run.ready, codes, run.restarts], sort_keys=True)
        if key == run.reported:
            return
        now = _now()
        flag = "True" if run.ready else "False"
        statuses = []
        for c in pod["spec"]["containers"]:
            code = codes.get(c["name"])
            state = {"running": {"startedAt": now}} if code is None else {"terminated": {"exitCode": code}}
            statuses.append({"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": run.ready,
                             "started": code is None, "restartCount": run.restarts.get(c["name"], 0), "state": state})  # fmt: skip
        status = {
            "phase": run.phase, "podIP": run.ip, "podIPs": [{"ip": run.ip}], "hostIP": "127.0.0.1",
            "startTime": pod["status"].get("startTime") or now,
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                           {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                           {"type": "ContainersReady", "status": flag, "lastTransitionTime": now},
                           {"type": "Ready", "status": flag, "lastTransitionTime": now}],
            "containerStatuses": statuses,
        }  # fmt: skip
        with contextlib.suppress(Exception):
            self.kube.patch_status("pods", run.name, status, run.namespace)
            run.reported = key

    # -- stopping
    def _terminate(self, run: RunningPod, grace_s: int, final_delete: bool) -> None:
        """SIGTERM to every process of the pod, SIGKILL to those left after `grace_s`."""
        with self._lock:
            procs = [*run.procs.values(), *([run.init] if run.init else [])]
        tree = []
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                parent = psutil.Process(proc.pid)
                tree += [parent, *parent.children(recursive=True)]
        for p in tree:
            with contextlib.suppress(psutil.Error):
                p.send_signal(signal.SIGTERM)
        _, alive = psutil.wait_procs(tree, timeout=grace_s)
        for p in alive:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(alive, timeout=10)
        self.pods.pop(run.uid, None)
        if final_delete:
            self._final_delete(run.namespace, run.name)

    def _final_delete(self, namespace: str, name: str) -> None:
        with contextlib.suppress(Exception):
            self.kube.delete("pods", name, namespace, grace_s=0)

    def stop(self) -> None:
        """Every pod's processes killed at once (the end of a test)."""
        for run in list(self.pods.values()):
            run.stopping = True
            self._terminate(run, 5, False)
        self.relay.stop()
        if self.storage_relay is not None:
            self.storage_relay.stop()
