"""RayWorkloads: the KubeRay RayJob (train), RayService (serve) and RayCluster (interactive).

The Ray cluster inside each object (TPU worker groups from the catalog, the head group) is
built by tpuray/desired/ray_cluster.py. Ray token auth is on, heads stay behind ClusterIP
services, and each object carries deadlines so nothing hangs silently.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from infra.components import hf_secret, identities, network, pod_egress
from ray_apps import contracts, health
from tpuray import bundle, images, labels, llm_stack
from tpuray.config import ConfigError, StackConfig
from tpuray.desired import pod_security
from tpuray.desired.ray_cluster import ray_cluster_spec


def bundle_uri(cfg: StackConfig) -> str:
    """gs://<bundleUri>/tpuray-apps-<sha256[:16]>.zip: the bundle of ray_apps/ as it is now."""
    return bundle.current().uri(cfg.workloads.bundle_uri)


def _runtime_env(cfg: StackConfig) -> dict[str, Any]:
    # No pip: the image carries the apps' dependencies (images/ray-tpu), so pods install
    # nothing at start and private nodes need no egress to PyPI.
    return {"working_dir": bundle_uri(cfg)}


def train_entrypoint(cfg: StackConfig) -> str:
    train = cfg.workloads.train
    assert train is not None
    pool = cfg.pool(train.pool)
    shape = pool.shape
    args = contracts.TrainArgs(
        accelerator_type=shape.ray_accelerator_type,
        topology=shape.topology,
        hosts_per_slice=shape.hosts,
        chips_per_host=shape.chips_per_host,
        slices=train.slices,
        steps=train.steps,
        checkpoint_every=train.checkpoint_every,
        data_uri=train.data_uri,
        storage_uri=train.storage_uri,
        run_name=f"{cfg.cluster.name}-train",
        max_failures=train.max_failures,
        # The step watchdog fails a hung attempt at the TpurayHungGangStepStalled threshold.
        watchdog_factor=cfg.observability.hung_gang.step_factor,
        watchdog_floor_s=cfg.observability.hung_gang.floor_seconds,
        device="tpu",
        # The chain's other shapes: the driver asks for them in order when the first gets no
        # whole slice in time; GKE walks the capacity tiers of each shape (docs/capacity.md).
        fallback_shapes=contracts.format_shapes([s.shape_step for s in pool.fallback_shapes]),
    )
    return shlex.join(["python", "-m", contracts.TRAIN_MODULE, *args.to_argv(contracts.RENDERED_TRAIN_FLAGS)])


def train_job(cfg: StackConfig) -> dict[str, Any]:
    train = cfg.workloads.train
    assert train is not None
    return {
        "entrypoint": train_entrypoint(cfg),
        "runtimeEnvYAML": yaml.safe_dump(_runtime_env(cfg), sort_keys=True),
        "submissionMode": "K8sJobMode",
        "shutdownAfterJobFinishes": True,
        "ttlSecondsAfterFinished": train.ttl_seconds_after_finished,
        # A job that cannot get its slices, or hangs on a broken collective, is stopped.
        "activeDeadlineSeconds": train.active_deadline_seconds,
        "backoffLimit": train.backoff_limit,
        "rayClusterSpec": ray_cluster_spec(
            cfg.pool(train.pool), train.slices, cfg.ray, "train", train_name(cfg), images.workload_images(cfg)["train"]
        ),
        # KubeRay's default submitter pod would not pass Pod Security `restricted`; its own account,
        # no token, no Google identity (identities.py).
        "submitterPodTemplate": pod_security.submitter_template(
            images.workload_images(cfg)["train"].image, identities.SUBMITTER, train_name(cfg)
        ),
    }


SERVE_APP = "tpuray-serve"


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


def serve_config(cfg: StackConfig) -> dict[str, Any]:
    args = serve_app_args(cfg)
    if args["backend"] == "llm":
        # Ray's own OpenAI app with the stack's LLMConfig, validated by Ray (tpuray/llm_stack.py);
        # the image carries vLLM for TPU, no code of this repo runs in the LLM app.
        entry = {
            "name": SERVE_APP,
            "route_prefix": "/",
            "import_path": llm_stack.OPENAI_APP_IMPORT_PATH,
            "args": {"llm_configs": [llm_stack.llm_config_data(cfg)]},
        }
        # Ray Serve LLM's OpenAI app has no /healthz of ours: a tiny CPU app beside it reports
        # the LLM app's state (waiting / loading / ready / failed, with Serve's reason).
        return {"applications": [entry, health.app_entry(SERVE_APP, args["model_id"], _runtime_env(cfg))]}
    apps = [
        {
            "name": SERVE_APP,
            "route_prefix": "/",
            "import_path": contracts.SERVE_IMPORT_PATH,
            "runtime_env": _runtime_env(cfg),
            "args": args,
        }
    ]
    return {"applications": apps}


def serve_service(cfg: StackConfig) -> dict[str, Any]:
    serve = cfg.workloads.serve
    assert serve is not None
    cluster = ray_cluster_spec(
        cfg.pool(serve.pool),
        llm_stack.max_replicas(cfg) if serve.backend == "llm" else serve.replicas,
        cfg.ray,
        "serve",
        serve_name(cfg),
        images.workload_images(cfg)["serve"],
    )
    if llm_stack.hf_token_version(cfg):
        # HF_TOKEN_PATH of the LLMConfig is a file of the Secret Manager add-on (hf_secret.py).
        hf_secret.mount_token(cluster, serve_name(cfg))
    return {
        "serveConfigV2": yaml.safe_dump(serve_config(cfg), sort_keys=False),
        # serviceUnhealthySecondThreshold / deploymentUnhealthySecondThreshold are not set: KubeRay
        # removed the recreate-on-unhealthy behaviour they drove in late 2023 (ray-project/kuberay
        # PRs 1664, 1665; the CRD still accepts them as no-ops). What KubeRay honours instead: a
        # spec change rolls out on a new cluster, switched over only once Serve reports it healthy;
        # Serve's own replica health checks restart a stuck replica; the stuck-deploy alert
        # (tpuray.observe, serviceUnhealthySecondThreshold) pages a person.
        "upgradeStrategy": {"type": "NewCluster"},
        "rayClusterConfig": cluster,
    }


def interactive_cluster(cfg: StackConfig) -> dict[str, Any]:
    interactive = cfg.workloads.interactive
    assert interactive is not None
    image = images.workload_images(cfg)["interactive"]
    return ray_cluster_spec(
        cfg.pool(interactive.pool), interactive.slices, cfg.ray, "interactive", interactive_name(cfg), image
    )


def train_name(cfg: StackConfig) -> str:
    return f"{cfg.cluster.name}-train"


def serve_name(cfg: StackConfig) -> str:
    return f"{cfg.cluster.name}-serve"


def interactive_name(cfg: StackConfig) -> str:
    return f"{cfg.cluster.name}-interactive"


def ray_objects(cfg: StackConfig) -> list[tuple[str, str]]:
    """(kind, name) of each KubeRay object the stack declares."""
    wl = cfg.workloads
    found = [("RayJob", train_name(cfg))] if wl.train else []
    found += [("RayService", serve_name(cfg))] if wl.serve else []
    return found + ([("RayCluster", interactive_name(cfg))] if wl.interactive else [])


@dataclass(frozen=True)
class RayWorkloadsArgs:
    config: StackConfig
    provider: k8s.Provider
    # The cluster's workload_identity_config.workload_pool (PROJECT.svc.id.goog), an output.
    workload_pool: pulumi.Input[str]


class RayWorkloads(pulumi.ComponentResource):
    """The namespace, a service account per role (identities.py) and the stack's KubeRay objects."""

    def __init__(self, name: str, args: RayWorkloadsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpuray:index:RayWorkloads", name, None, opts)
        cfg, wl = args.config, args.config.workloads
        gcp_opts = pulumi.ResourceOptions(parent=self)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)
        ns = wl.namespace
        unbuilt = sorted({i.name for i in images.workload_images(cfg).values() if not i.built})
        if unbuilt and not cfg.ray.image and not pulumi.runtime.is_dry_run():
            # A preview may show the -tpu base; a deployment must run the image that was built.
            key = f"tpuray:images.digests.{unbuilt[0]}"
            raise ConfigError(
                [f"{key}: missing; `pulumi up` deploys images by digest: build and push images/{unbuilt[0]} first"]
            )
        object_labels = {**labels.RENDERED_BY_TPURAY, "app.kubernetes.io/part-of": cfg.cluster.name}

        # Pods reach GCS (data, checkpoints, code, the model mirror) as their role's GSA, through
        # Workload Identity; the Hugging Face token's grant goes to the serving GSA only.
        gsas = identities.declare(name, cfg, args.workload_pool, gcp_opts)

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
            k8s.apiextensions.CustomResource(
                f"{name}-{object_name}",
                api_version="ray.io/v1",
                kind=kind,
                metadata={"name": object_name, "namespace": ns, "labels": object_labels},
                spec=spec,
                opts=pulumi.ResourceOptions.merge(in_ns, pulumi.ResourceOptions(depends_on=after)),
            )

        # The token's SecretProviderClass exists before a serve pod mounts it (hf_secret.py).
        provider_class = hf_secret.secret_provider_class(cfg, serve_name(cfg)) if wl.serve else None
        token_class = [declare(provider_class)] if provider_class else []
        specs = {
            "RayJob": train_job(cfg) if wl.train else None,
            "RayService": serve_service(cfg) if wl.serve else None,
            "RayCluster": interactive_cluster(cfg) if wl.interactive else None,
        }
        for kind, object_name in ray_objects(cfg):
            custom(kind, object_name, specs[kind], token_class if kind == "RayService" else [])
        # Default-deny ingress and egress, per-object Ray policies (network.py, pod_egress.py) and
        # the Serve Gateway.
        for kind, object_name in ray_objects(cfg):
            autoscaling = labels.ray_cluster_spec({"kind": kind, "spec": specs[kind]})["enableInTreeAutoscaling"]
            for manifest in [
                *network.object_policies(cfg, kind, object_name),
                *pod_egress.object_policies(cfg, kind, object_name, autoscaling),
            ]:
                declare(manifest)
        for manifest in [*network.default_deny(ns), *network.gateway_objects(cfg, serve_name(cfg))]:
            declare(manifest)
        self.register_outputs({"namespace": ns, "serviceAccounts": {k: g.email for k, g in gsas.items()}})
