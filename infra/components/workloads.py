"""RayWorkloads: the KubeRay RayJob (train), RayService (serve) and RayCluster (interactive).

Every TPU worker group comes from the catalog: numOfHosts = hosts, replicas = slices,
google.com/tpu = chips per host, and the nodeSelectors that the KubeRay TPU webhook and
GKE need. Ray token auth is on, heads stay behind ClusterIP services, and each object
carries deadlines so nothing hangs silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
import yaml

from infra.components.cluster import SYSTEM_POOL_LABEL
from infra.components.slice_pool import COMPUTE_CLASS_LABEL
from tpuray.config import RayConfig, SlicePoolConfig, StackConfig
from tpuray.shared import REPO_ROOT

KSA_NAME = "ray-workload"
ACCELERATOR_SELECTOR = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_SELECTOR = "cloud.google.com/gke-tpu-topology"
TPU_RESOURCE = "google.com/tpu"
POOL_LABEL = "tpuray.dev/slice-pool"
GENERATION_LABEL = "tpuray.dev/generation"
MARKET_LABEL = "ray.io/market-type"
# Python packages the apps need on top of the -tpu image (which carries jax[tpu]).
APP_PACKAGES = ("optax",)


def pinned_packages(names: tuple[str, ...] = APP_PACKAGES) -> list[str]:
    """name==version for each package, read from the one lock file."""
    pins = {}
    for line in (REPO_ROOT / "requirements.lock").read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep:
            pins[name.strip().lower()] = version.strip()
    return [f"{n}=={pins[n]}" for n in names]


def _market_label(pool: SlicePoolConfig) -> dict[str, str]:
    # ray.io/market-type is only true for every node of the group when the whole
    # chain shares one market; a mixed chain (spot, then on-demand) leaves it unset.
    markets = {tier.market_type for tier in pool.capacity}
    return {MARKET_LABEL: markets.pop()} if len(markets) == 1 else {}


def tpu_worker_group(pool: SlicePoolConfig, slices: int, ray: RayConfig, group_name: str) -> dict[str, Any]:
    shape = pool.shape
    chips = str(shape.chips_per_host)
    return {
        "groupName": group_name,
        # One replica is one slice: KubeRay creates and deletes its numOfHosts pods together.
        "replicas": slices,
        "minReplicas": slices,
        "maxReplicas": slices,
        "numOfHosts": shape.hosts,
        "labels": {POOL_LABEL: pool.name, GENERATION_LABEL: shape.generation, **_market_label(pool)},
        "rayStartParams": {},
        "template": {
            "spec": {
                "serviceAccountName": KSA_NAME,
                "nodeSelector": {
                    ACCELERATOR_SELECTOR: shape.gke_accelerator,
                    TOPOLOGY_SELECTOR: shape.topology,
                    COMPUTE_CLASS_LABEL: pool.compute_class,
                },
                "tolerations": [
                    {"key": COMPUTE_CLASS_LABEL, "operator": "Equal", "value": pool.compute_class, "effect": "NoSchedule"},
                    {"key": TPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
                ],
                "containers": [
                    {
                        "name": "ray-worker",
                        "image": ray.tpu_image,
                        "resources": {
                            "requests": {TPU_RESOURCE: chips, "cpu": "8", "memory": "32Gi"},
                            "limits": {TPU_RESOURCE: chips, "memory": "32Gi"},
                        },
                        "env": [{"name": "JAX_PLATFORMS", "value": "tpu,cpu"}],
                        # MXLA (multi-slice DCN) traffic stays on the pod network.
                        "ports": [{"containerPort": 8081, "name": "mxla"}],
                        "securityContext": {"allowPrivilegeEscalation": False},
                    }
                ],
            }
        },
    }


def head_group(ray: RayConfig) -> dict[str, Any]:
    return {
        # num-cpus 0: no task or actor is ever scheduled on the head.
        "rayStartParams": {"num-cpus": "0"},
        "serviceType": "ClusterIP",
        "template": {
            "spec": {
                "serviceAccountName": KSA_NAME,
                "nodeSelector": {SYSTEM_POOL_LABEL: "ray-system"},
                "containers": [
                    {
                        "name": "ray-head",
                        "image": ray.tpu_image,
                        "resources": {
                            "requests": {"cpu": "2", "memory": "8Gi"},
                            "limits": {"memory": "8Gi"},
                        },
                        "ports": [
                            {"containerPort": 6379, "name": "gcs"},
                            {"containerPort": 8265, "name": "dashboard"},
                            {"containerPort": 10001, "name": "client"},
                            {"containerPort": 8000, "name": "serve"},
                        ],
                        "securityContext": {"allowPrivilegeEscalation": False},
                    }
                ],
            }
        },
    }


def ray_cluster_spec(pool: SlicePoolConfig, slices: int, ray: RayConfig, group_name: str) -> dict[str, Any]:
    return {
        "rayVersion": ray.version,
        "authOptions": {"mode": "token"},
        "enableInTreeAutoscaling": False,
        "headGroupSpec": head_group(ray),
        "workerGroupSpecs": [tpu_worker_group(pool, slices, ray, group_name)],
    }


def _runtime_env(code_uri: str) -> dict[str, Any]:
    return {"working_dir": code_uri, "pip": pinned_packages()}


def train_entrypoint(cfg: StackConfig) -> str:
    train = cfg.workloads.train
    assert train is not None
    shape = cfg.pool(train.pool).shape
    args = [
        "python -m ray_apps.train",
        f"--accelerator-type {shape.ray_accelerator_type}",
        f"--topology {shape.topology}",
        f"--hosts-per-slice {shape.hosts}",
        f"--chips-per-host {shape.chips_per_host}",
        f"--slices {train.slices}",
        f"--steps {train.steps}",
        f"--checkpoint-every {train.checkpoint_every}",
        f"--data-uri {train.data_uri}",
        f"--storage-uri {train.storage_uri}",
        f"--run-name {cfg.cluster.name}-train",
        f"--max-failures {train.max_failures}",
        "--device tpu",
    ]
    return " ".join(args)


def train_job(cfg: StackConfig) -> dict[str, Any]:
    train = cfg.workloads.train
    assert train is not None
    return {
        "entrypoint": train_entrypoint(cfg),
        "runtimeEnvYAML": yaml.safe_dump(_runtime_env(cfg.workloads.code_uri), sort_keys=True),
        "submissionMode": "K8sJobMode",
        "shutdownAfterJobFinishes": True,
        "ttlSecondsAfterFinished": train.ttl_seconds_after_finished,
        # A job that cannot get its slices, or hangs on a broken collective, is stopped.
        "activeDeadlineSeconds": train.active_deadline_seconds,
        "backoffLimit": train.backoff_limit,
        "rayClusterSpec": ray_cluster_spec(cfg.pool(train.pool), train.slices, cfg.ray, "tpu-train"),
    }


def serve_app_args(cfg: StackConfig) -> dict[str, Any]:
    serve = cfg.workloads.serve
    assert serve is not None
    shape = cfg.pool(serve.pool).shape
    args: dict[str, Any] = {
        "backend": serve.backend,
        "accelerator_type": shape.ray_accelerator_type,
        "topology": shape.topology,
        "hosts_per_slice": shape.hosts,
        "chips_per_host": shape.chips_per_host,
        "replicas": serve.replicas,
    }
    if serve.backend == "llm":
        args["model_id"] = serve.model_id
    else:
        args["checkpoint_uri"] = serve.checkpoint_uri
    return args


def serve_config(cfg: StackConfig) -> dict[str, Any]:
    return {
        "applications": [
            {
                "name": "tpuray-serve",
                "route_prefix": "/",
                "import_path": "ray_apps.serve:build_app",
                "runtime_env": _runtime_env(cfg.workloads.code_uri),
                "args": serve_app_args(cfg),
            }
        ]
    }


def serve_service(cfg: StackConfig) -> dict[str, Any]:
    serve = cfg.workloads.serve
    assert serve is not None
    return {
        "serveConfigV2": yaml.safe_dump(serve_config(cfg), sort_keys=False),
        # Give up (and recreate the cluster) instead of sitting in DEPLOYING forever.
        "serviceUnhealthySecondThreshold": serve.service_unhealthy_seconds,
        "deploymentUnhealthySecondThreshold": serve.deployment_unhealthy_seconds,
        "rayClusterConfig": ray_cluster_spec(cfg.pool(serve.pool), serve.replicas, cfg.ray, "tpu-serve"),
    }


def interactive_cluster(cfg: StackConfig) -> dict[str, Any]:
    interactive = cfg.workloads.interactive
    assert interactive is not None
    return ray_cluster_spec(cfg.pool(interactive.pool), interactive.slices, cfg.ray, "tpu-interactive")


def _buckets(*uris: str | None) -> list[str]:
    found = []
    for uri in uris:
        match = re.match(r"^gs://([^/]+)", uri or "")
        if match and match.group(1) not in found:
            found.append(match.group(1))
    return found


@dataclass(frozen=True)
class RayWorkloadsArgs:
    config: StackConfig
    provider: k8s.Provider


class RayWorkloads(pulumi.ComponentResource):
    """The namespace, a Workload Identity service account and the stack's KubeRay objects."""

    def __init__(self, name: str, args: RayWorkloadsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpuray:index:RayWorkloads", name, None, opts)
        cfg, wl = args.config, args.config.workloads
        gcp_opts = pulumi.ResourceOptions(parent=self)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)
        ns = wl.namespace
        labels = {"app.kubernetes.io/managed-by": "tpuray", "app.kubernetes.io/part-of": cfg.cluster.name}

        # Pods reach GCS (data, checkpoints, code) as this GSA, through Workload Identity.
        gsa = gcp.serviceaccount.Account(
            f"{name}-gsa",
            account_id=f"{cfg.cluster.name}-ray"[:30],
            display_name=f"Ray workloads of {cfg.cluster.name}",
            project=cfg.gcp.project,
            opts=gcp_opts,
        )
        gcp.serviceaccount.IAMMember(
            f"{name}-wi",
            service_account_id=gsa.name,
            role="roles/iam.workloadIdentityUser",
            member=f"serviceAccount:{cfg.gcp.project}.svc.id.goog[{ns}/{KSA_NAME}]",
            opts=gcp_opts,
        )
        writable = _buckets(wl.train.storage_uri if wl.train else None)
        readable = _buckets(
            wl.code_uri,
            wl.train.data_uri if wl.train else None,
            wl.serve.checkpoint_uri if wl.serve else None,
        )
        for bucket in writable + [b for b in readable if b not in writable]:
            gcp.storage.BucketIAMMember(
                f"{name}-{bucket}",
                bucket=bucket,
                role="roles/storage.objectUser" if bucket in writable else "roles/storage.objectViewer",
                member=gsa.email.apply(lambda email: f"serviceAccount:{email}"),
                opts=gcp_opts,
            )

        namespace = k8s.core.v1.Namespace(
            f"{name}-ns", metadata={"name": ns, "labels": labels}, opts=k8s_opts
        )
        in_ns = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[namespace])
        k8s.core.v1.ServiceAccount(
            f"{name}-ksa",
            metadata={
                "name": KSA_NAME,
                "namespace": ns,
                "labels": labels,
                "annotations": {"iam.gke.io/gcp-service-account": gsa.email},
            },
            opts=in_ns,
        )

        def custom(kind: str, object_name: str, spec: dict[str, Any]) -> None:
            k8s.apiextensions.CustomResource(
                f"{name}-{object_name}",
                api_version="ray.io/v1",
                kind=kind,
                metadata={"name": object_name, "namespace": ns, "labels": labels},
                spec=spec,
                opts=in_ns,
            )

        if wl.train:
            custom("RayJob", f"{cfg.cluster.name}-train", train_job(cfg))
        if wl.serve:
            custom("RayService", f"{cfg.cluster.name}-serve", serve_service(cfg))
        if wl.interactive:
            custom("RayCluster", f"{cfg.cluster.name}-interactive", interactive_cluster(cfg))
        self.register_outputs({"namespace": ns, "serviceAccount": gsa.email})
