"""Every stack's rendered objects applied to a real kube-apiserver and reconciled by the real
KubeRay operator (tests/control_plane.py; binaries from `make cluster-tools`).

Without the built tools these tests skip with the reason, except under CI=true, where a
missing tool is a failure.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import STACKS, mocked

from tests.control_plane import (
    CRD_FILES,
    STAND_INS,
    ApplyRejected,
    ControlPlane,
    dropped_fields,
    require_tools,
    tools_missing,
    wait_for,
)
from tpuray.config import stacks_dir
from tpuray.labels import KUEUE_QUEUE_NAME
from tpuray.preview.mockrun import run_stack
from tpuray.preview.render import manifests
from tpuray.shared import shared_path

# Slow too: starting the control plane takes tens of seconds, so `make test-fast` leaves it out.
pytestmark = [pytest.mark.controlplane, pytest.mark.slow]

# CRD_FILES (every CRD the control plane serves) lives in tests/control_plane.py.


@pytest.fixture(scope="session")
def control_plane() -> ControlPlane:
    require_tools(tools_missing())
    plane = ControlPlane().start(CRD_FILES)
    print(f"\ncontrol plane up: {plane.startup_seconds}; stand-ins: {sorted(STAND_INS)}")
    yield plane
    plane.stop()


def _stack_objects(plane: ControlPlane, stack: str) -> list[dict[str, Any]]:
    """The stack's rendered objects, with their namespaces (and default accounts) in place."""
    objects = manifests(mocked(stack))
    for obj in objects:
        if obj["kind"] == "Namespace":
            plane.ensure_namespace(obj["metadata"]["name"])
    return objects


def _apply_stack(plane: ControlPlane, stack: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(sent, stored) for every rendered object of the stack, namespaces first. A queued object
    (created suspended, tpuray/desired/queues.py) goes in as Kueue leaves it once it admitted it:
    there is no Kueue here (tests/test_kueue_control_plane.py runs it)."""
    return [(obj, plane.apply(_as_admitted(obj))) for obj in _stack_objects(plane, stack)]


def _as_admitted(obj: dict[str, Any]) -> dict[str, Any]:
    """A queued Ray object with what Kueue changes when it admits it: suspend false."""
    if KUEUE_QUEUE_NAME not in obj.get("metadata", {}).get("labels", {}):
        return obj
    out = copy.deepcopy(obj)
    spec = out["spec"]["rayClusterConfig"] if out["kind"] == "RayService" else out["spec"]
    spec["suspend"] = False
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_every_rendered_object_is_accepted_by_the_api_server_with_no_field_dropped(
    control_plane: ControlPlane, stack: str
) -> None:
    rejected, dropped = [], []
    objects = _stack_objects(control_plane, stack)
    for obj in objects:
        try:
            stored = control_plane.apply(obj)
        except ApplyRejected as err:
            rejected.append(str(err))
            continue
        lost = dropped_fields(obj, stored)
        if lost:
            dropped.append(f"{obj['kind']} {obj['metadata']['name']}: {lost}")
    assert rejected == []
    assert dropped == []
    assert len(objects) >= 4


def test_a_misspelled_field_is_refused_by_the_api_server_not_silently_pruned(control_plane: ControlPlane) -> None:
    obj = next(o for o in manifests(mocked("dev")) if o["kind"] == "RayJob")
    obj = yaml.safe_load(yaml.safe_dump(obj))
    obj["metadata"]["name"] = "misspelled"
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHost"] = 4
    control_plane.ensure_namespace(obj["metadata"]["namespace"])
    with pytest.raises(
        ApplyRejected, match=r"\.spec\.rayClusterSpec\.workerGroupSpecs\[0\]\.numOfHost: field not declared in schema"
    ):
        control_plane.apply(obj, dry_run=True)


def test_a_pod_breaking_the_namespace_pod_security_level_is_refused_by_admission(
    control_plane: ControlPlane,
) -> None:
    control_plane.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "pss-restricted", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}},
        }
    )
    control_plane.ensure_namespace("pss-restricted")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "privileged", "namespace": "pss-restricted"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": True}}]},
    }
    with pytest.raises(ApplyRejected, match="violates PodSecurity"):
        control_plane.apply(pod, dry_run=True)


def _wait_for(fetch, done, timeout: float = 60.0):
    return wait_for(fetch, done, timeout)


def _owned_cluster_name(plane: ControlPlane, obj: dict[str, Any]) -> str:
    """The RayCluster the operator made for a RayJob or RayService (or the RayCluster itself)."""
    kind, meta = obj["kind"], obj["metadata"]
    if kind == "RayCluster":
        return meta["name"]
    field = "rayClusterName" if kind == "RayJob" else "activeServiceStatus"

    def status() -> dict[str, Any]:
        return plane.get(obj["apiVersion"], kind, meta["name"], meta["namespace"]).get("status", {})

    def name(s: dict[str, Any]) -> str:
        if kind == "RayJob":
            return s.get(field, "")
        pending = s.get("pendingServiceStatus", {}).get("rayClusterName", "")
        return s.get(field, {}).get("rayClusterName", "") or pending

    got = _wait_for(status, name)
    assert name(got), f"the operator made no RayCluster for {kind} {meta['name']}; status {got}"
    return name(got)


def _warning_events(plane: ControlPlane, namespace: str, name: str) -> list[str]:
    events = plane.list("v1", "Event", namespace)
    return [
        f"{e['reason']}: {e['message']}"
        for e in events
        if e.get("type") == "Warning" and e["involvedObject"].get("name", "").startswith(name)
    ]


# The TPU worker pods each stack's shape groups start with (replicas x numOfHosts), from the
# stack files: dev 1 v6e 4x4 slice (4 hosts) for training and one 1-host serve replica; prod 2
# v6e 4x4 slices and 2 v5e 2x4 (1-host) serve replicas. The v5e training group (the chain's
# cross-generation shape) starts empty: the driver asks for it (docs/capacity.md).
WORKER_PODS = {
    "dev": {"tpuray-dev-train/train-v6e-16": 4, "tpuray-dev-serve/serve-v6e-4": 1},
    "staging": {
        "tpuray-staging-interactive/interactive-v6e-4": 1,
        "tpuray-staging-train/train-v6e-16": 4,
        "tpuray-staging-serve/serve-v5litepod-8": 1,
    },
    "prod": {"tpuray-prod-serve/serve-v5litepod-8": 2},  # prod's training chain starts empty
}


@pytest.mark.parametrize("stack", STACKS)
def test_the_operator_creates_every_worker_group_pod_with_the_stack_labels_and_selectors(
    control_plane: ControlPlane, stack: str
) -> None:
    applied = _apply_stack(control_plane, stack)
    ray_objects = [sent for sent, _ in applied if sent["apiVersion"] == "ray.io/v1"]
    started: dict[str, int] = {}
    for obj in ray_objects:
        namespace = obj["metadata"]["namespace"]
        cluster = _owned_cluster_name(control_plane, obj)
        spec = {"RayCluster": obj["spec"], "RayJob": obj["spec"].get("rayClusterSpec")}.get(
            obj["kind"], obj["spec"].get("rayClusterConfig")
        )
        for group in spec["workerGroupSpecs"]:
            expected = group.get("replicas", 0) * group.get("numOfHosts", 1)
            selector = f"ray.io/cluster={cluster},ray.io/group={group['groupName']}"
            pods = _wait_for(
                lambda s=selector, ns=namespace: control_plane.list("v1", "Pod", ns, s),
                lambda p, n=expected: len(p) >= n,
            )
            assert len(pods) == expected, f"{obj['kind']} {cluster} group {group['groupName']}"
            if pods:
                started[f"{obj['metadata']['name']}/{group['groupName']}"] = len(pods)
            template = group["template"]["spec"]
            for pod in pods:
                assert pod["spec"].get("nodeSelector") == template.get("nodeSelector")
                container = pod["spec"]["containers"][0]
                sent = template["containers"][0]
                assert container["resources"]["limits"] == sent["resources"]["limits"]
                assert container["image"] == sent["image"]
            if expected:
                worker_ids = sorted(
                    e["value"]
                    for p in pods
                    for e in p["spec"]["containers"][0].get("env", [])
                    if e["name"] == "TPU_WORKER_ID"
                )
                assert worker_ids in ([], sorted(str(i) for i in range(group.get("numOfHosts", 1))) * group["replicas"])
        assert _warning_events(control_plane, namespace, cluster) == []
    assert started == WORKER_PODS[stack]


def test_the_hugging_face_token_volume_reaches_the_serve_pods_past_pod_security_admission(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """prod with hfTokenSecret, in a namespace of its own: the SecretProviderClass is stored
    as sent, and the operator's serve pods (admitted under Pod Security `restricted`) carry
    the add-on's CSI volume, mounted read-only where HF_TOKEN_PATH points."""
    doc = yaml.safe_load((stacks_dir() / "Pulumi.prod.yaml").read_text())
    doc["config"]["tpuray:cluster"]["name"] = "tpuray-hf"
    doc["config"]["tpuray:workloads"]["namespace"] = "ray-hf"
    doc["config"]["tpuray:workloads"]["serve"]["hfTokenSecret"] = "projects/acme-ml-prod/secrets/hf-token"
    doc["config"]["tpuray:workloads"].pop("train")
    doc["config"].pop("tpuray:queues")  # the queues' objects and team namespace are not this test's
    path = tmp_path / "Pulumi.prod-hf.yaml"
    path.write_text(yaml.safe_dump(doc))
    kinds = ("Namespace", "ServiceAccount", "SecretProviderClass", "RayService")
    objects = [o for o in manifests(run_stack(str(path))) if o["kind"] in kinds]
    # The serve head's and the serve workers' own accounts (infra/components/identities.py).
    assert [o["kind"] for o in objects] == ["Namespace", "ServiceAccount", "ServiceAccount", *kinds[2:]]
    control_plane.ensure_namespace("ray-hf")
    stored = {o["kind"]: control_plane.apply(o) for o in objects}
    assert dropped_fields(objects[3], stored["SecretProviderClass"]) == []
    assert stored["Namespace"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    cluster = _owned_cluster_name(control_plane, objects[4])
    pods = _wait_for(
        lambda: control_plane.list("v1", "Pod", "ray-hf", f"ray.io/cluster={cluster}"), lambda p: len(p) >= 3
    )
    # The head and the 2 one-host v5e 2x4 replicas of the serve group.
    events = [f"{e['reason']}: {e['message']}" for e in control_plane.list("v1", "Event", "ray-hf")]
    assert sorted(p["metadata"]["labels"]["ray.io/group"] for p in pods) == [
        "headgroup",
        "serve-v5litepod-8",
        "serve-v5litepod-8",
    ], events
    for pod in pods:
        (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "hf-token"]
        assert volume["csi"] == {
            "driver": "secrets-store-gke.csi.k8s.io",
            "readOnly": True,
            "volumeAttributes": {"secretProviderClass": "tpuray-hf-serve-hf-token"},
        }
        ray_container = pod["spec"]["containers"][0]
        assert {"name": "hf-token", "mountPath": "/var/run/secrets/huggingface", "readOnly": True} in ray_container[
            "volumeMounts"
        ]
    assert _warning_events(control_plane, "ray-hf", cluster) == []


# --- tpuray check's offline verdicts against the real API server and operator ------------
# Which of our rules stand for which real component's admission decision.
API_SERVER_RULES = {"crd-schema", "crd-validation-rules"}
REPO = Path(__file__).resolve().parent.parent


def _corpus() -> list[tuple[str, dict[str, Any]]]:
    """(label, object) for every conformance sample, policy fixture and stack object."""
    files = sorted(shared_path("conformance").rglob("*.yaml"))
    for kind in ("good", "bad", "branches", "cel"):
        files += sorted((REPO / "tests" / "fixtures" / "policies" / kind).glob("*.yaml"))
    out: list[tuple[str, dict[str, Any]]] = []
    for path in files:
        for i, doc in enumerate(d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)):
            out.append((f"{path.relative_to(path.parents[1])}#{i}", doc))
    for stack in STACKS:
        out += [(f"stack {stack} {o['kind']}/{o['metadata']['name']}", o) for o in manifests(mocked(stack))]
    return out


def _offline_rules(obj: dict[str, Any], tmp: Path, rules: set[str]) -> set[str]:
    """The named rules of `tpuray check` that fire on `obj` (only those run: the others, checkov's
    among them, would cost seconds per object and are not compared here)."""
    from tpuray.config import RayConfig
    from tpuray.policies.evaluate import check_manifests as check

    path = tmp / "object.yaml"
    path.write_text(yaml.safe_dump(obj))
    return {v.policy for v in check([str(path)], "prod", RayConfig().version, [], rules=rules)}


def test_tpuray_check_and_the_api_server_agree_on_every_object_of_the_corpus(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Server rejects <=> tpuray check reports crd-schema or crd-validation-rules.

    Every object goes in with a server-side dry run, so nothing is stored.
    """
    disagreements, compared = [], 0
    for label, obj in _corpus():
        try:
            control_plane.path(obj.get("apiVersion", ""), obj.get("kind", ""))
        except KeyError:
            continue  # a kind this control plane does not serve (no CRD installed for it)
        if "namespace" in obj.get("metadata", {}):
            control_plane.ensure_namespace(obj["metadata"]["namespace"])
        try:
            control_plane.apply(obj, dry_run=True)
            server = ""
        except ApplyRejected as err:
            server = str(err.status.get("message"))
        offline = _offline_rules(obj, tmp_path, API_SERVER_RULES)
        compared += 1
        if bool(server) != bool(offline):
            disagreements.append(
                f"{label}: server {'rejects: ' + server if server else 'accepts'}; offline {sorted(offline)}"
            )
    assert disagreements == [], "\n".join(disagreements)
    assert compared >= 60


def test_the_operator_submits_the_rendered_entrypoint_once_the_rayjob_pods_run(control_plane: ControlPlane) -> None:
    """With every pod of dev's RayJob marked running (the kubelet's part), the operator's
    submitter Job carries the entrypoint the stack rendered, unchanged."""
    applied = _apply_stack(control_plane, "dev")
    job = next(sent for sent, _ in applied if sent["kind"] == "RayJob")
    namespace = job["metadata"]["namespace"]
    cluster = _owned_cluster_name(control_plane, job)
    pods = _wait_for(
        lambda: control_plane.list("v1", "Pod", namespace, f"ray.io/cluster={cluster}"), lambda p: len(p) >= 5
    )
    for i, pod in enumerate(pods):
        control_plane.mark_running(pod, f"10.8.0.{i + 2}")
    submitters = _wait_for(
        lambda: control_plane.list(
            "batch/v1", "Job", namespace, f"ray.io/originated-from-cr-name={job['metadata']['name']}"
        ),
        bool,
        timeout=90,
    )
    assert len(submitters) == 1, control_plane.log("kuberay-operator")[-3000:]
    command = " ".join(
        [*submitters[0]["spec"]["template"]["spec"]["containers"][0].get("command", []),
         *submitters[0]["spec"]["template"]["spec"]["containers"][0].get("args", [])]
    )  # fmt: skip
    assert "ray job submit" in command
    assert job["spec"]["entrypoint"] in command


# --- who may call the API server (issue 36, item 4) ---------------------------------------
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def _may(plane: ControlPlane, namespace: str, account: str, verb: str, resource: str, group: str = "") -> bool:
    """The API server's own RBAC verdict for a service account (a SubjectAccessReview)."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{namespace}:{account}",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
            "resourceAttributes": {"namespace": namespace, "verb": verb, "group": group, "resource": resource},
        },
    }
    response = plane.session.post(
        f"{plane.url}/apis/authorization.k8s.io/v1/subjectaccessreviews", json=review, timeout=10
    )
    response.raise_for_status()
    return bool(response.json()["status"].get("allowed"))


def _token_volumes(pod_spec: dict[str, Any]) -> list[str]:
    """Volumes carrying a service account token (the ServiceAccount admission plugin's kube-api-access-*)."""
    return [
        v["name"]
        for v in pod_spec.get("volumes", [])
        if any("serviceAccountToken" in src for src in v.get("projected", {}).get("sources", []))
    ]


@pytest.fixture(scope="module")
def prod_pods(control_plane: ControlPlane) -> dict[str, dict[str, Any]]:
    """prod applied and reconciled: '<object>/<group>' -> one pod the operator created for it,
    once the operator has bound its autoscaler Role (prod's RayJob autoscales)."""
    applied = _apply_stack(control_plane, "prod")
    found: dict[str, dict[str, Any]] = {}
    for obj in (sent for sent, _ in applied if sent["apiVersion"] == "ray.io/v1"):
        cluster = _owned_cluster_name(control_plane, obj)
        pods = _wait_for(
            lambda c=cluster: control_plane.list("v1", "Pod", "ray", f"ray.io/cluster={c}"), lambda p: len(p) >= 2
        )
        for pod in pods:
            found.setdefault(f"{obj['metadata']['name']}/{pod['metadata']['labels']['ray.io/group']}", pod)
        if obj["kind"] == "RayJob":
            bound = _wait_for(
                lambda c=cluster: [
                    b
                    for b in control_plane.list("rbac.authorization.k8s.io/v1", "RoleBinding", "ray")
                    if b["metadata"]["name"] == c
                ],
                bool,
            )
            assert bound, control_plane.log("kuberay-operator")[-3000:]
    return found


def test_kuberay_binds_its_autoscaler_role_to_the_head_account_alone(
    control_plane: ControlPlane, prod_pods: dict[str, dict[str, Any]]
) -> None:
    head = prod_pods["tpuray-prod-train/headgroup"]["spec"]["serviceAccountName"]
    assert head == "ray-head"
    assert _may(control_plane, "ray", head, "patch", "pods")
    assert _may(control_plane, "ray", head, "patch", "rayclusters", "ray.io")


def test_the_serving_and_training_worker_pods_accounts_cannot_patch_a_pod_or_a_raycluster(
    control_plane: ControlPlane, prod_pods: dict[str, dict[str, Any]]
) -> None:
    accounts = {
        where: prod_pods[where]["spec"]["serviceAccountName"]
        for where in ("tpuray-prod-serve/serve-v5litepod-8", "tpuray-prod-serve/headgroup")
    }
    # prod's training chain starts empty (no worker pod yet): its groups' rendered account.
    accounts["tpuray-prod-train/train-v6e-16"] = _rendered_worker_account("prod", "RayJob")
    assert accounts == {
        "tpuray-prod-serve/serve-v5litepod-8": "ray-serve",
        "tpuray-prod-serve/headgroup": "ray-serve-head",
        "tpuray-prod-train/train-v6e-16": "ray-worker",
    }
    allowed = [
        f"{account} {verb} {resource}"
        for account in accounts.values()
        for verb, resource, group in (("patch", "pods", ""), ("patch", "rayclusters", "ray.io"), ("get", "secrets", ""))
        if _may(control_plane, "ray", account, verb, resource, group)
    ]
    assert allowed == []


def _rendered_worker_account(stack: str, kind: str) -> str:
    obj = next(o for o in manifests(mocked(stack)) if o["kind"] == kind)
    return obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["serviceAccountName"]


def test_a_patch_of_a_pod_impersonating_the_serving_account_is_refused(
    control_plane: ControlPlane, prod_pods: dict[str, dict[str, Any]]
) -> None:
    replica = prod_pods["tpuray-prod-serve/serve-v5litepod-8"]
    target = prod_pods["tpuray-prod-train/headgroup"]["metadata"]["name"]
    response = control_plane.session.patch(
        control_plane.path("v1", "Pod", target, "ray"),
        data=json.dumps({"metadata": {"labels": {"tpuray.dev/ray-object": "tpuray-prod-serve"}}}),
        headers={
            "Content-Type": "application/merge-patch+json",
            "Impersonate-User": f"system:serviceaccount:ray:{replica['spec']['serviceAccountName']}",
            "Impersonate-Group": "system:serviceaccounts",
        },
        timeout=10,
    )
    assert response.status_code == 403, response.text
    assert 'cannot patch resource "pods"' in response.json()["message"]


def test_no_pod_the_operator_creates_mounts_an_api_token_but_the_autoscaler_sidecar(
    prod_pods: dict[str, dict[str, Any]],
) -> None:
    """What the API server stored after its ServiceAccount admission plugin ran."""
    mounting = {
        f"{where}/{c['name']}": [m["name"] for m in c.get("volumeMounts", []) if m["mountPath"] == TOKEN_DIR]
        for where, pod in prod_pods.items()
        for c in pod["spec"]["containers"]
    }
    assert {k: v for k, v in mounting.items() if v} == {
        "tpuray-prod-train/headgroup/autoscaler": ["autoscaler-api-token"]
    }
    assert {where: _token_volumes(pod["spec"]) for where, pod in prod_pods.items() if _token_volumes(pod["spec"])} == {
        "tpuray-prod-train/headgroup": ["autoscaler-api-token"]
    }


def test_the_submitter_pod_has_no_token_at_all(
    control_plane: ControlPlane, prod_pods: dict[str, dict[str, Any]]
) -> None:
    """The operator's submitter Job (after the kubelet's part: every RayJob pod running), its pod
    created as the Job controller would, through admission, with a server-side dry run."""
    job = "tpuray-prod-train"
    cluster = prod_pods[f"{job}/headgroup"]["metadata"]["labels"]["ray.io/cluster"]
    pods = control_plane.list("v1", "Pod", "ray", f"ray.io/cluster={cluster}")
    for i, pod in enumerate(pods):
        control_plane.mark_running(pod, f"10.8.3.{i + 2}")
    submitters = _wait_for(
        lambda: control_plane.list("batch/v1", "Job", "ray", f"ray.io/originated-from-cr-name={job}"), bool, timeout=90
    )
    assert len(submitters) == 1, control_plane.log("kuberay-operator")[-3000:]
    template = submitters[0]["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{job}-submitter-probe", "namespace": "ray", "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
    }
    stored = control_plane.apply(pod, dry_run=True)
    assert stored["spec"]["serviceAccountName"] == "ray-submitter"
    assert stored["spec"]["automountServiceAccountToken"] is False
    assert _token_volumes(stored["spec"]) == []
    assert [
        m for c in stored["spec"]["containers"] for m in c.get("volumeMounts", []) if m["mountPath"] == TOKEN_DIR
    ] == []
    assert stored["metadata"]["labels"]["tpuray.dev/submitter-of"] == job
    assert not _may(control_plane, "ray", "ray-submitter", "get", "pods")


# Our rules that mirror the KubeRay operator's own validation (validation.go), decided by
# the operator's "Invalid..." Warning events on the real object.
OPERATOR_RULES = {
    "kuberay-object-name",
    "kuberay-group-containers",
    "kuberay-worker-replicas",
    "kuberay-group-params",
    "kuberay-token-auth-version",
    "kuberay-autoscaler",
    "rayjob-lifecycle",
    "rayservice-spec",
}


# Where tpuray check (mirroring validation.go of KubeRay v1.7.0, the CRDs' version) is
# stricter than the operator built here (v1.5.0, the newest ray-operator the Go module
# proxy serves). Each was read in ray-operator@v1.5.0/controllers/ray/utils/validation.go.
V150_LACKS = {
    "worker replica bounds": "has no minReplicas/maxReplicas/replicas check (added after v1.5.0)",
    "token auth": "has no authOptions validation: v1.5.0 does not know spec.authOptions at all",
    "idle timeout": "has no per-group idleTimeoutSeconds check (added after v1.5.0)",
    "backoff with selector": "has no backoffLimit-with-clusterSelector check (added after v1.5.0)",
    "incremental upgrade": "checks NewClusterWithIncrementalUpgrade options only behind the "
    "RayServiceIncrementalUpgrade feature gate, which is off by default",
}
OPERATOR_VERSION_GAPS = {
    "bad/kuberay-autoscaler.yaml#0": "idle timeout",
    "bad/kuberay-token-auth-version.yaml#0": "token auth",
    "bad/kuberay-worker-replicas.yaml#0": "worker replica bounds",
    "branches/kuberay-token-auth-version--k8s-auth-ray-too-old.yaml#0": "token auth",
    "branches/kuberay-token-auth-version--k8s-auth-rayjob.yaml#0": "token auth",
    "branches/kuberay-token-auth-version--k8s-auth-without-token.yaml#0": "token auth",
    "branches/kuberay-token-auth-version--ray-too-old.yaml#0": "token auth",
    "branches/kuberay-worker-replicas--negative.yaml#0": "worker replica bounds",
    "branches/rayjob-lifecycle--cluster-selector-backoff.yaml#0": "backoff with selector",
    "branches/rayservice-spec--incremental-without-options.yaml#0": "incremental upgrade",
}


def _operator_verdicts(plane: ControlPlane, corpus: list[tuple[str, dict[str, Any]]]) -> dict[str, list[str]]:
    """label -> the operator's Invalid* warnings, for each Ray object the API server stores."""
    placed: dict[str, tuple[str, str]] = {}
    for i, (label, obj) in enumerate(corpus):
        if obj.get("apiVersion") != "ray.io/v1":
            continue
        obj = {**_as_admitted(obj), "metadata": {**obj["metadata"], "namespace": f"op-{i}"}}
        plane.ensure_namespace(f"op-{i}")
        try:
            plane.apply(obj)
        except ApplyRejected:
            continue  # the API server's verdict, compared in the test above
        placed[label] = (f"op-{i}", obj["metadata"]["name"])
    events = _events_once_each_has_one(plane, set(placed.values()))
    return {
        label: sorted(
            f"{e['reason']}: {e['message']}" for e in events.get(where, []) if e["reason"].startswith("Invalid")
        )
        for label, where in placed.items()
    }


def _events_once_each_has_one(
    plane: ControlPlane, objects: set[tuple[str, str]], timeout_s: float = 30.0
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(namespace, name) -> the events about that object, once the operator has recorded one
    for each of `objects` (it reconciles one in a second or two). A reconciled Ray object gets
    one: an Invalid* warning when refused, since validation comes first in the reconcile
    (KubeRay ray-operator/controllers/ray/raycluster_controller.go `rayClusterReconcile`:
    `ValidateRayClusterSpec`, then `Recorder.Eventf(..., InvalidRayClusterSpec, ...)`), and a
    Created* event for the head service, pods or cluster it creates when accepted. The one
    exception there, a RayCluster whose `spec.managedBy` names another controller, is skipped
    without an event: such an object in the corpus fails here by name rather than reading as
    accepted. (This replaced a fixed 15 s wait: the 100 objects had their events after 4.8 s.)"""
    deadline = time.monotonic() + timeout_s
    while True:
        by_object: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for event in plane.list("v1", "Event", "*"):
            involved = event["involvedObject"]
            by_object.setdefault((involved.get("namespace", ""), involved.get("name", "")), []).append(event)
        missing = objects - set(by_object)
        if not missing:
            return by_object
        assert time.monotonic() < deadline, f"the operator recorded no event in {timeout_s:g} s for {sorted(missing)}"
        time.sleep(0.5)


def test_tpuray_check_and_the_kuberay_operator_agree_on_every_ray_object_of_the_corpus(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    corpus = _corpus()
    verdicts = _operator_verdicts(control_plane, corpus)
    disagreements = {}
    for label, obj in corpus:
        if label not in verdicts:
            continue
        offline = _offline_rules(obj, tmp_path, OPERATOR_RULES)
        if bool(verdicts[label]) != bool(offline):
            disagreements[label] = f"operator {verdicts[label] or 'accepts'}; offline {sorted(offline)}"
    unexplained = {k: v for k, v in disagreements.items() if k not in OPERATOR_VERSION_GAPS}
    assert unexplained == {}
    # Every recorded gap still shows: an operator that learns the rule makes this fail, and
    # the entry goes.
    assert sorted(disagreements) == sorted(OPERATOR_VERSION_GAPS)
    assert all(" offline []" not in v for v in disagreements.values())  # we are stricter, never laxer
    assert set(OPERATOR_VERSION_GAPS.values()) <= set(V150_LACKS)
    assert len(verdicts) >= 40
