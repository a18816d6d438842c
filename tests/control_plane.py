"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver and the KubeRay operator.

The binaries are built from pinned Go modules by `make cluster-tools` (tools/cluster/), into
.cluster-tools/<versions>/. `ControlPlane.start()` runs them as child processes of this
process, on loopback ports, with:
- etcd embedded in a one-member server (tools/cluster/cmd/etcd);
- kube-apiserver with RBAC, a static admin token, a throwaway service-account signing key
  and its own self-signed serving certificate; admission plugins are the default set
  (PodSecurity included), so namespace PSS labels are enforced as on GKE;
- the CRDs this project targets installed from the same files `tpuray check` reads;
- the KubeRay operator watching every namespace, authenticated as the admin.
There are no nodes, no kubelet, no scheduler and no controller-manager. What those would do
and a test needs is done by the test, and listed in STAND_INS.
`stop()` ends exactly the processes it started, by PID.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tpuray.checks.schemas import SCHEMA_DIR
from tpuray.shared import shared_path

# Every CRD the control plane serves: KubeRay's and GKE's from shared/, and those tpuray/data ships.
CRD_FILES = [
    *sorted(shared_path("schemas", "kuberay").glob("*.yaml")),
    *sorted(shared_path("schemas", "gke").glob("*.yaml")),
    # The Serve Gateway's kinds: Gateway API (standard channel) and GKE's networking.gke.io policies.
    *sorted((SCHEMA_DIR / "gateway-api").glob("*.yaml")),
    *sorted((SCHEMA_DIR / "gke-gateway").glob("*.yaml")),
    # The SecretProviderClass of an llm stack's Hugging Face token (infra/components/hf_secret.py).
    *sorted((SCHEMA_DIR / "secrets-store-csi-driver").glob("*.yaml")),
    # The Kueue kinds of a stack with tpuray:queues (tpuray/desired/queues.py), as `tpuray check` validates them.
    *sorted((SCHEMA_DIR / "kueue").glob("*.yaml")),
]


REPO_ROOT = Path(__file__).resolve().parent.parent
TOOLS_SRC = REPO_ROOT / "tools" / "cluster"
ADMIN_TOKEN = "tpuray-local-admin-token"  # loopback-only, throwaway cluster
APPLY_MANAGER = "tpuray"
HARNESS_MANAGER = "tpuray-test-harness"

# What the missing components would have done, done by the harness instead.
STAND_INS = {
    "kube-controller-manager's service-account controller": (
        "creates the `default` ServiceAccount of each namespace the tests use, so the ServiceAccount "
        "admission plugin admits pods that name no account"
    ),
    "kubelet": (
        "none by default: pods stay Pending with no node and tests read the pod specs the operator "
        "created; `mark_running` writes the status a kubelet would report for a started, ready pod"
    ),
}


def tools_dir() -> Path:
    def version(line_key: str) -> str:
        for line in (TOOLS_SRC / "go.mod").read_text().splitlines():
            parts = line.split()
            if parts[:1] == [line_key]:
                return parts[1]
        raise RuntimeError(f"{line_key} not pinned in tools/cluster/go.mod")

    kuberay = (TOOLS_SRC / "kuberay.version").read_text().strip()
    name = f"k8s-{version('k8s.io/kubernetes')}-etcd-{version('go.etcd.io/etcd/server/v3')}-kuberay-{kuberay}"
    return REPO_ROOT / ".cluster-tools" / name


def tools_missing() -> list[str]:
    missing = [b for b in ("etcd", "kube-apiserver", "kuberay-operator") if not (tools_dir() / b).is_file()]
    if not missing and not _stamped(tools_dir() / "kube-apiserver"):
        missing.append("kube-apiserver stamped with its version (built before build.sh stamped it)")
    return missing


def _stamped(binary: Path) -> bool:
    """kube-apiserver reports its release in GET /version (Kueue parses it; build.sh stamps it)."""
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    return out.startswith("Kubernetes v") and "$Format" not in out


def require_tools(missing: list[str]) -> None:
    """Skip a control-plane test whose built tools are missing, with the reason; under CI=true,
    where .ci/run builds them, fail it instead (never skip silently there)."""
    if not missing:
        return
    reason = f"control-plane tools not built ({', '.join(missing)}): run `make cluster-tools` (needs Go)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def wait_for(fetch: Any, done: Any, timeout: float) -> Any:
    """Poll `fetch()` every 0.5 s until `done(value)` or `timeout` seconds; the last value."""
    deadline = time.monotonic() + timeout
    value = fetch()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.5)
        value = fetch()
    return value


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ApplyRejected(Exception):
    """The API server refused an object: `status` is its Status response."""

    def __init__(self, obj: dict[str, Any], status: dict[str, Any]):
        self.obj = obj
        self.status = status
        meta = obj.get("metadata", {})
        super().__init__(f"{obj.get('kind')} {meta.get('namespace', '')}/{meta.get('name')}: {status.get('message')}")


@dataclass
class ControlPlane:
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="tpuray-k8s-")))
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    url: str = ""
    startup_seconds: dict[str, float] = field(default_factory=dict)
    _resources: dict[tuple[str, str], tuple[str, bool]] = field(default_factory=dict)

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self, crd_files: list[Path], operator: bool = True) -> ControlPlane:
        t0 = time.monotonic()
        try:
            self._start_etcd()
            self.startup_seconds["etcd"] = time.monotonic() - t0
            self._start_apiserver()
            self.startup_seconds["kube-apiserver"] = time.monotonic() - t0
            self.install_crds(crd_files)
            self.startup_seconds["crds"] = time.monotonic() - t0
            if operator:
                self._start_operator()
                self.startup_seconds["kuberay-operator"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for name in ("kueue", "kuberay-operator", "kube-apiserver", "etcd"):  # kueue: tests/kueue_plane.py
            proc = self.processes.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        log.close()
        self.processes[name] = proc
        return proc

    def _wait(self, name: str, ready, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self.processes[name]
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.log(name)[-3000:]}")
            try:
                if ready():
                    return
            except (requests.RequestException, OSError):
                pass
            time.sleep(0.25)
        raise RuntimeError(f"{name} not ready after {timeout:.0f} s:\n{self.log(name)[-3000:]}")

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        self._spawn(
            "etcd", [str(tools_dir() / "etcd"), str(self.workdir / "etcd"), self.etcd_url, f"http://127.0.0.1:{peer}"]
        )
        self._wait("etcd", lambda: requests.get(f"{self.etcd_url}/health", timeout=1).ok, 60)

    def _start_apiserver(self) -> None:
        key = self.workdir / "sa.key"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
        # A throwaway serving certificate for 127.0.0.1 that clients verify against.
        self.serving_cert = self.workdir / "serving.crt"
        serving_key = self.workdir / "serving.key"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(serving_key), "-out", str(self.serving_cert)],
            check=True, capture_output=True,
        )  # fmt: skip
        (self.workdir / "tokens.csv").write_text(f'{ADMIN_TOKEN},admin,admin,"system:masters"\n')
        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        self._spawn(
            "kube-apiserver",
            [
                str(tools_dir() / "kube-apiserver"),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--tls-cert-file={self.serving_cert}",
                f"--tls-private-key-file={serving_key}",
                f"--token-auth-file={self.workdir / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                "--allow-privileged=true",  # as on GKE: Pod Security admission decides, per namespace
                f"--service-account-key-file={key}",
                f"--service-account-signing-key-file={key}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range=10.96.0.0/16",
                # The `kubernetes` Service's endpoints cannot be a loopback address, and nothing
                # in-cluster needs them: no reconciler, so /readyz can pass on 127.0.0.1.
                "--endpoint-reconciler-type=none",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
            ],
        )
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        # trust_env off: a REQUESTS_CA_BUNDLE in the environment would override `verify`.
        self.session.trust_env = False
        self.session.verify = str(self.serving_cert)
        self._wait("kube-apiserver", lambda: self.session.get(f"{self.url}/readyz", timeout=2).ok, 180)
        self._write_kubeconfig()

    def _write_kubeconfig(self) -> None:
        self.kubeconfig = self.workdir / "kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "local", "cluster": {"server": self.url, "certificate-authority": str(self.serving_cert)}}
            ],
            "users": [{"name": "admin", "user": {"token": ADMIN_TOKEN}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
            "current-context": "local",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))

    def _start_operator(self, env: dict[str, str] | None = None) -> None:
        """`env` adds to the operator's environment (the joint substrate's HTTP_PROXY, tests/substrate.py)."""
        metrics, probe = free_port(), free_port()
        self._spawn(
            "kuberay-operator",
            [
                str(tools_dir() / "kuberay-operator"),
                f"--metrics-addr=127.0.0.1:{metrics}",
                f"--health-probe-bind-address=127.0.0.1:{probe}",
                "--enable-leader-election=false",
            ],
            env={"KUBECONFIG": str(self.kubeconfig), **(env or {})},
        )
        self._wait("kuberay-operator", lambda: requests.get(f"http://127.0.0.1:{probe}/readyz", timeout=1).ok, 120)

    # --- API ---------------------------------------------------------------------------------
    def install_crds(self, files: list[Path]) -> None:
        # Created, not server-side applied: the KubeRay CRDs are megabytes, and SSA's field
        # tracking on them costs minutes on 2 cores.
        for path in files:
            for crd in yaml.safe_load_all(path.read_text()):
                if crd:
                    url = self.path("apiextensions.k8s.io/v1", "CustomResourceDefinition")
                    response = self.session.post(url, data=json.dumps(crd), timeout=120,
                                                 headers={"Content-Type": "application/json"})  # fmt: skip
                    if response.status_code != 409 and not response.ok:
                        raise ApplyRejected(crd, response.json())
        deadline = time.monotonic() + 60
        for path in files:
            for crd in yaml.safe_load_all(path.read_text()):
                name = crd["metadata"]["name"]
                while True:
                    got = self.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
                    conditions = {c["type"]: c["status"] for c in got.get("status", {}).get("conditions", [])}
                    if conditions.get("Established") == "True":
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"CRD {name} not established: {conditions}")
                    time.sleep(0.2)
        self._resources.clear()

    def _resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """(collection path prefix, namespaced) from the server's discovery document."""
        key = (api_version, kind)
        if key not in self._resources:
            base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            listing = self.session.get(f"{self.url}{base}", timeout=10)
            if listing.status_code == 404:
                raise KeyError(f"the API server serves no {api_version}")
            listing.raise_for_status()
            for res in listing.json()["resources"]:
                if "/" not in res["name"]:
                    self._resources[(api_version, res["kind"])] = (f"{base}/{res['name']}", res["namespaced"])
        if key not in self._resources:
            raise KeyError(f"the API server serves no {kind} in {api_version}")
        return self._resources[key]

    def path(self, api_version: str, kind: str, name: str = "", namespace: str | None = None) -> str:
        collection, namespaced = self._resource(api_version, kind)
        if namespaced:
            base, _, plural = collection.rpartition("/")
            collection = f"{base}/namespaces/{namespace or 'default'}/{plural}"
        return f"{self.url}{collection}{'/' + name if name else ''}"

    def apply(self, obj: dict[str, Any], dry_run: bool = False, manager: str = APPLY_MANAGER) -> dict[str, Any]:
        """Server-side apply with strict field validation: an unknown field is a rejection."""
        meta = obj["metadata"]
        params = {"fieldManager": manager, "force": "true", "fieldValidation": "Strict"}
        if dry_run:
            params["dryRun"] = "All"
        response = self.session.patch(
            self.path(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")),
            params=params,
            data=yaml.safe_dump(obj).encode(),
            headers={"Content-Type": "application/apply-patch+yaml"},
            timeout=30,
        )
        if not response.ok:
            raise ApplyRejected(obj, response.json())
        return response.json()

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        response = self.session.get(self.path(api_version, kind, name, namespace), timeout=10)
        response.raise_for_status()
        return response.json()

    def list(self, api_version: str, kind: str, namespace: str | None = None, selector: str = "") -> list[dict]:
        """The objects of `kind` in `namespace` ('default' when None; every namespace when '*')."""
        params = {"labelSelector": selector} if selector else {}
        if namespace == "*":
            url = f"{self.url}{self._resource(api_version, kind)[0]}"
        else:
            url = self.path(api_version, kind, "", namespace)
        response = self.session.get(url, params=params, timeout=10)
        response.raise_for_status()
        return response.json()["items"]

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        self.session.delete(self.path(api_version, kind, name, namespace), timeout=10)

    def mark_running(self, pod: dict[str, Any], ip: str) -> None:
        """The status a kubelet reports once every container of `pod` runs and is ready."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        containers = pod["spec"]["containers"]
        status = {
            "phase": "Running",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "hostIP": "127.0.0.1",
            "startTime": now,
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": now}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c["image"],
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
                for c in containers
            ],  # fmt: skip
        }
        meta = pod["metadata"]
        response = self.session.patch(
            self.path("v1", "Pod", meta["name"], meta["namespace"]) + "/status",
            data=json.dumps({"status": status}),
            headers={"Content-Type": "application/merge-patch+json"},
            timeout=10,
        )
        response.raise_for_status()

    def ensure_namespace(self, name: str) -> None:
        """The namespace and its `default` ServiceAccount (the controller-manager's job, see STAND_INS).

        Applied by a field manager of its own, so the labels the rendered Namespace sets stay.
        """
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, manager=HARNESS_MANAGER)
        account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": name}}
        self.apply(account, manager=HARNESS_MANAGER)


def dropped_fields(sent: Any, stored: Any, path: str = "") -> list[str]:
    """Paths of `sent` that the server did not store as sent: pruned or rewritten fields.

    Numbers compare by value (YAML 4 vs 4.0); everything the server added (defaults,
    status, metadata) is ignored.
    """
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [path or "."]
        out: list[str] = []
        for key, value in sent.items():
            if key not in stored:
                out.append(f"{path}.{key}")
            else:
                out += dropped_fields(value, stored[key], f"{path}.{key}")
        return out
    if isinstance(sent, list):
        if not isinstance(stored, list) or len(stored) != len(sent):
            return [path]
        return [
            p for i, (a, b) in enumerate(zip(sent, stored, strict=True)) for p in dropped_fields(a, b, f"{path}[{i}]")
        ]
    if isinstance(sent, bool) or isinstance(stored, bool):
        return [] if sent == stored else [path]
    if isinstance(sent, (int, float)) and isinstance(stored, (int, float)):
        return [] if float(sent) == float(stored) else [path]
    return [] if sent == stored else [path]
