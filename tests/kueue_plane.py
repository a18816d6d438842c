"""Kueue's controller-manager on the local control plane (tests/control_plane.py), RayJob integration on.

The binary and its CRDs come from `make cluster-tools` (tools/cluster/build.sh builds
sigs.k8s.io/kueue/cmd/kueue at tools/cluster/kueue.version into .cluster-tools/kueue-<version>/,
beside the CRDs of the same module and the ProvisioningRequest CRD its go.mod pins).
`start_kueue(plane)` installs the CRDs as Kueue's own kustomization does (the conversion-webhook
patches of config/components/crd, on the kueue-system/kueue-webhook-service Service that
config/default's namePrefix and namespace make of them), the namespace and the empty Secret its
release manifests declare, then runs the manager with a Configuration of its own:
- internal certificate management on (Kueue's default), the certificates written to the
  harness's work folder, the webhook server on a loopback port;
- the integrations ray.io/rayjob, ray.io/raycluster and ray.io/rayservice;
- leader election off; metrics off; VisibilityOnDemand off (its API server needs the aggregation
  layer of a real cluster).
Not wired: Kueue's admission webhooks. The API server cannot call them: their certificate is for
kueue-webhook-service.kueue-system.svc, which no DNS resolves here. So nothing suspends or
validates a job at creation (the rendered objects are created suspended already, and the tests
create no job Kueue's webhook would refuse), and the CRDs' conversion webhook is never called
(every object is read and written in the storage version, v1beta2). docs/testing.md lists this.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import requests
import yaml

from tests import control_plane
from tests.control_plane import HARNESS_MANAGER, REPO_ROOT, TOOLS_SRC, ControlPlane, free_port

KUEUE_NAMESPACE = "kueue-system"
WEBHOOK_SERVICE = "kueue-webhook-service"
WEBHOOK_SECRET = "kueue-webhook-server-cert"
FRAMEWORKS = ["ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice"]

STAND_INS = {
    "the kubelet's Secret volume": (
        "the harness copies Kueue's webhook certificate Secret into the manager's certDir once the certificate "
        "rotator has filled it, as the Secret volume of Kueue's Deployment would"
    ),
    "Kueue's admission webhooks": (
        "not called (no DNS for their Service): the rendered Ray objects are created suspended, as Kueue's "
        "mutating webhook would make them; no validation of a job at creation"
    ),
    "GKE's provisioning of a ProvisioningRequest (queued-provisioning.gke.io)": (
        "the test sets the Provisioned condition Kueue waits for; no nodes, no capacity, no maxRunDuration"
    ),
}


def kueue_dir() -> Path:
    return REPO_ROOT / ".cluster-tools" / f"kueue-{(TOOLS_SRC / 'kueue.version').read_text().strip()}"


def kueue_missing() -> list[str]:
    crds = kueue_dir() / "crds"
    need = [kueue_dir() / "kueue", crds / "autoscaling.x-k8s.io_provisioningrequests.yaml"]
    return [str(p.relative_to(REPO_ROOT)) for p in need if not p.is_file()]


def _conversion_patches() -> dict[str, dict[str, Any]]:
    """CRD name -> spec.conversion, for the patches Kueue's kustomization applies (uncommented lines)."""
    folder = kueue_dir() / "crds" / "patches"
    listed = re.findall(r"^- path: patches/(webhook_in_\w+\.yaml)$", (folder / "kustomization.yaml").read_text(), re.M)
    out = {}
    for name in listed:
        patch = yaml.safe_load((folder / name).read_text())
        conversion = patch["spec"]["conversion"]
        service = conversion["webhook"]["clientConfig"]["service"]
        service.update(namespace=KUEUE_NAMESPACE, name=WEBHOOK_SERVICE)  # config/default: namespace, namePrefix
        out[patch["metadata"]["name"]] = conversion
    return out


def install_kueue_crds(plane: ControlPlane) -> None:
    patches = _conversion_patches()
    folder = plane.workdir / "kueue-crds"
    folder.mkdir(exist_ok=True)
    files = []
    for path in sorted((kueue_dir() / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        if crd["metadata"]["name"] in patches:
            crd["spec"]["conversion"] = patches[crd["metadata"]["name"]]
        files.append(folder / path.name)
        files[-1].write_text(yaml.safe_dump(crd))
    plane.install_crds(files)


def start_kueue(plane: ControlPlane, timeout: float = 180) -> None:
    """Kueue's CRDs, namespace and Secret, then the manager; returns once its /readyz passes."""
    install_kueue_crds(plane)
    plane.ensure_namespace(KUEUE_NAMESPACE)
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": WEBHOOK_SECRET, "namespace": KUEUE_NAMESPACE}}
    plane.apply(secret, manager=HARNESS_MANAGER)
    probe = free_port()
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": free_port(), "host": "127.0.0.1", "certDir": str(plane.workdir / "kueue-certs")},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": WEBHOOK_SERVICE,
            "webhookSecretName": WEBHOOK_SECRET,
        },
        "integrations": {"frameworks": FRAMEWORKS},
        "featureGates": {"VisibilityOnDemand": False},
    }
    path = plane.workdir / "kueue-config.yaml"
    path.write_text(yaml.safe_dump(config))
    plane._spawn(  # noqa: SLF001 - the harness's own process table, stopped by plane.stop()
        "kueue", [str(kueue_dir() / "kueue"), f"--config={path}"], env={"KUBECONFIG": str(plane.kubeconfig)}
    )
    plane._wait("kueue", lambda: _mount_certificate(plane, Path(config["webhook"]["certDir"])), timeout)  # noqa: SLF001
    plane._wait("kueue", lambda: requests.get(f"http://127.0.0.1:{probe}/readyz", timeout=1).ok, timeout)  # noqa: SLF001


def _mount_certificate(plane: ControlPlane, folder: Path) -> bool:
    """The kubelet's part (STAND_INS): Kueue's certificate rotator writes the webhook certificate
    into its Secret and waits for the files of the Secret volume its Deployment mounts at certDir."""
    data = plane.get("v1", "Secret", WEBHOOK_SECRET, KUEUE_NAMESPACE).get("data") or {}
    if not {"tls.crt", "tls.key"} <= data.keys():
        return False
    folder.mkdir(parents=True, exist_ok=True)
    for name, value in data.items():
        (folder / name).write_bytes(base64.b64decode(value))
    return True


KUEUE = "kueue.x-k8s.io/v1beta2"


def workloads(plane: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    return plane.list(KUEUE, "Workload", namespace)


def workload_of(plane: ControlPlane, namespace: str, owner: str) -> dict[str, Any] | None:
    """The Workload Kueue made for a job (its owner reference names the job)."""
    for wl in workloads(plane, namespace):
        if any(ref.get("name") == owner for ref in wl["metadata"].get("ownerReferences", [])):
            return wl
    return None


def condition(obj: dict[str, Any] | None, kind: str) -> str | None:
    for cond in (obj or {}).get("status", {}).get("conditions", []):
        if cond.get("type") == kind:
            return cond.get("status")
    return None


def wait_for(fetch: Any, done: Any, timeout: float = 90.0) -> Any:
    """control_plane.wait_for with Kueue's longer default (admission, then KubeRay's pods)."""
    return control_plane.wait_for(fetch, done, timeout)
