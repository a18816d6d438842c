"""RayWorkloads: the KubeRay RayJob (train), RayService (serve) and RayCluster (interactive).

The Ray cluster inside each object (TPU worker groups from the catalog, the head group) is
built by tpuray/desired/ray_cluster.py. Ray token auth is on, heads stay behind ClusterIP
services, and each object carries deadlines so nothing hangs silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from infra.components import hf_secret, identities, network, pod_egress
from ray_apps import contracts, health
from tpuray import labels
from tpuray.config import ConfigError, StackConfig
from tpuray.desired import llm_stack, pod_security, queues
from tpuray.desired.state import RayObject, StackDesire


def train_job(desired: StackDesire, job: RayObject) -> dict[str, Any]:
    train = desired.config.workloads.train
    assert train is not None
    return {
        "entrypoint": job.entrypoint,
        "runtimeEnvYAML": yaml.safe_dump(desired.runtime_env, sort_keys=True),
        "submissionMode": "K8sJobMode",
        "shutdownAfterJobFinishes": True,
        "ttlSecondsAfterFinished": train.ttl_seconds_after_finished,
        # A job that cannot get its slices, or hangs on a broken collective, is stopped.
        "activeDeadlineSeconds": train.active_deadline_seconds,
        "backoffLimit": train.backoff_limit,
        "rayClusterSpec": dict(job.cluster),
        # KubeRay's default submitter pod would not pass Pod Security `restricted`; its own account,
        # no token, no Google identity (identities.py).
        "submitterPodTemplate": pod_security.submitter_template(job.image.image, identities.SUBMITTER, job.name),
    }


SERVE_APP = "tpuray-serve"


def serve_app_args(cfg: StackConfig) -> dict[str, Any]:
    """The Serve app's args (ray_apps/serve.py): the pool's shape from the catalog, the backend's inputs."""
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
        args["checkpoint_wait_s"] = serve.checkpoint_wait_seconds
        # A CPU replica on this service's own slice hosts (Ray node labels): the pool's shape
        # first, then each fallback shape of its chain, through Ray's fallback_strategy.
        pool = cfg.pool(serve.pool)
        args["label_selector"] = {labels.SLICE_POOL: serve.pool, labels.GENERATION: shape.generation}
        if pool.fallback_shapes:
            args["fallback_label_selectors"] = [
                {labels.SLICE_POOL: serve.pool, labels.GENERATION: s.generation} for s in pool.fallback_shapes
            ]
    return args


def serve_config(desired: StackDesire) -> dict[str, Any]:
    cfg = desired.config
    args = serve_app_args(cfg)
    if args["backend"] == "llm":
        # Ray's own OpenAI app with the stack's LLMConfig, validated by Ray (tpuray/desired/llm_stack.py);
        # the image carries vLLM for TPU, no code of this repo runs in the LLM app.
        entry = {
            "name": SERVE_APP,
            "route_prefix": "/",
            "import_path": llm_stack.OPENAI_APP_IMPORT_PATH,
            "args": {"llm_configs": [llm_stack.llm_config_data(cfg)]},
        }
        # Ray Serve LLM's OpenAI app has no /healthz of ours: a tiny CPU app beside it reports
        # the LLM app's state (waiting / loading / ready / failed, with Serve's reason).
        return {"applications": [entry, health.app_entry(SERVE_APP, args["model_id"], desired.runtime_env)]}
    apps = [
        {
            "name": SERVE_APP,
            "route_prefix": "/",
            "import_path": contracts.SERVE_IMPORT_PATH,
            "runtime_env": desired.runtime_env,
            "args": args,
        }
    ]
    return {"applications": apps}


def serve_service(desired: StackDesire, service: RayObject) -> dict[str, Any]:
    return {
        "serveConfigV2": yaml.safe_dump(serve_config(desired), sort_keys=False),
        # serviceUnhealthySecondThreshold / deploymentUnhealthySecondThreshold are not set: KubeRay
        # removed the recreate-on-unhealthy behaviour they drove in late 2023 (ray-project/kuberay
        # PRs 1664, 1665; the CRD still accepts them as no-ops). What KubeRay honours instead: a
        # spec change rolls out on a new cluster, switched over only once Serve reports it healthy;
        # Serve's own replica health checks restart a stuck replica; the stuck-deploy alert
        # (tpuray.observe, serviceUnhealthySecondThreshold) pages a person.
        "upgradeStrategy": {"type": "NewCluster"},
        "rayClusterConfig": dict(service.cluster),
    }


def object_spec(desired: StackDesire, obj: RayObject) -> dict[str, Any]:
    """The spec of one KubeRay object: a RayCluster is its cluster spec alone."""
    if obj.kind == "RayJob":
        return train_job(desired, obj)
    if obj.kind == "RayService":
        return serve_service(desired, obj)
    return dict(obj.cluster)


@dataclass(frozen=True)
class RayWorkloadsArgs:
    desired: StackDesire  # tpuray/desired/state.py: the stack's Ray objects, built once
    provider: k8s.Provider
    # The cluster's workload_identity_config.workload_pool (PROJECT.svc.id.goog), an output.
    workload_pool: pulumi.Input[str]


class RayWorkloads(pulumi.ComponentResource):
    """The namespace, a service account per role (identities.py) and the stack's KubeRay objects."""

    def __init__(self, name: str, args: RayWorkloadsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpuray:index:RayWorkloads", name, None, opts)
        desired = args.desired
        cfg, wl = desired.config, desired.config.workloads
        gcp_opts = pulumi.ResourceOptions(parent=self)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)
        ns = wl.namespace
        unbuilt = desired.unbuilt_images
        if unbuilt and not cfg.ray.image and not pulumi.runtime.is_dry_run():
            # A preview may show the -tpu base; a deployment must run the image that was built.
            key = f"tpuray:images.digests.{unbuilt[0]}"
            raise ConfigError(
                [f"{key}: missing; `pulumi up` deploys images by digest: build and push images/{unbuilt[0]} first"]
            )
        object_labels = {**labels.RENDERED_BY_TPURAY, "app.kubernetes.io/part-of": cfg.cluster.name}

        # Pods reach GCS (data, checkpoints, code, the model mirror) as their role's GSA, through
        # Workload Identity; the Hugging Face token's grant goes to the serving GSA only.
        gsas = identities.declare(name, cfg, desired.hf_token_version, args.workload_pool, gcp_opts)

        namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata={"name": ns, "labels": {**object_labels, **pod_security.namespace_labels()}},
            opts=k8s_opts,
        )
        in_ns = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[namespace])
        identities.service_accounts(name, cfg, gsas, object_labels, in_ns)

        def declare(manifest: dict[str, Any]) -> pulumi.Resource:
            """A namespaced object of another API group (NetworkPolicy, Gateway API, GKE policies)."""
            meta = {**manifest["metadata"], "namespace": ns, "labels": object_labels}
            body = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind", "metadata")}
            if manifest["kind"] == "NetworkPolicy":
                return k8s.networking.v1.NetworkPolicy(
                    f"{name}-netpol-{meta['name']}", metadata=meta, opts=in_ns, **body
                )
            return k8s.apiextensions.CustomResource(
                f"{name}-{manifest['kind'].lower()}-{meta['name']}",
                api_version=manifest["apiVersion"],
                kind=manifest["kind"],
                metadata=meta,
                opts=in_ns,
                **body,
            )

        def custom(kind: str, object_name: str, spec: dict[str, Any], after: list[pulumi.Resource]) -> None:
            # Queued in Kueue where the stack has queues: its LocalQueue's label, created suspended (queues.py).
            pool = {"RayJob": wl.train, "RayService": wl.serve, "RayCluster": wl.interactive}[kind].pool
            k8s.apiextensions.CustomResource(
                f"{name}-{object_name}",
                api_version="ray.io/v1",
                kind=kind,
                metadata={
                    "name": object_name,
                    "namespace": ns,
                    "labels": {**object_labels, **queues.queue_labels(cfg, kind, pool, spec)},
                },
                spec=queues.suspended(cfg, kind, pool, spec),
                opts=pulumi.ResourceOptions.merge(in_ns, pulumi.ResourceOptions(depends_on=after)),
            )

        # The token's SecretProviderClass exists before a serve pod mounts it (hf_secret.py).
        service = desired.of_kind("RayService")
        provider_class = hf_secret.secret_provider_class(desired.hf_token_version, service.name) if service else None
        token_class = [declare(provider_class)] if provider_class else []
        for obj in desired.objects:
            custom(obj.kind, obj.name, object_spec(desired, obj), token_class if obj.kind == "RayService" else [])
        # Default-deny ingress and egress, per-object Ray policies (network.py, pod_egress.py) and
        # the Serve Gateway.
        for obj in desired.objects:
            for manifest in [
                *network.object_policies(cfg, obj.kind, obj.name),
                *pod_egress.object_policies(cfg, obj.kind, obj.name, obj.autoscaling),
            ]:
                declare(manifest)
        gateway = network.gateway_objects(cfg, service.name) if service else []
        for manifest in [*network.default_deny(ns), *gateway]:
            declare(manifest)
        self.register_outputs({"namespace": ns, "serviceAccounts": {k: g.email for k, g in gsas.items()}})
