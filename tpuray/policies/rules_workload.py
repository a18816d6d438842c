"""Images, Ray versions, Serve topology and deadlines of KubeRay workloads."""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterator
from typing import Any

import yaml

from tpuray import catalog, labels
from tpuray.labels import RAY_TPU_TOPOLOGY
from tpuray.policies.core import GKE, MANDATORY, PROJECT, Profile, Resource, Rule
from tpuray.policies.kube import (
    RAY_TYPES,
    RayClusterSpec,
    as_dict,
    as_int,
    as_list,
    cluster_spec,
    groups,
    multi_host_slices,
    show,
    tpu_groups,
)

# rayproject/ray:2.60.0-py312-tpu, docker.io/rayproject/ray:nightly-tpu ...
_RAY_IMAGE = re.compile(r"^(?:docker\.io/)?rayproject/ray(?:-ml)?:(?P<tag>[^@\s]+)(?:@sha256:[0-9a-f]{64})?$")
_RAY_VERSION = re.compile(r"^(?P<version>\d+\.\d+\.\d+)(?:-|$)")
# This project's images (images/<name>/Dockerfile, tpuray/images.py) in Artifact Registry,
# pinned by digest: REGION-docker.pkg.dev/PROJECT/REPO/ray-tpu@sha256:<64 hex>. A tag there
# (ray-tpu:latest, :main) floats and is not accepted.
_BUILT_IMAGE = re.compile(r"^[a-z0-9-]+-docker\.pkg\.dev/[^/@\s]+/[^/@\s]+/(?:ray-tpu|serve-llm)@sha256:[0-9a-f]{64}$")


def built_base(image: Any, annotations: dict[str, Any]) -> str | None:
    """The pinned -tpu base of a built image (pod annotation tpuray.dev/base-image), else None."""
    base = annotations.get(labels.BASE_IMAGE)
    if not (isinstance(image, str) and _BUILT_IMAGE.match(image) and isinstance(base, str)):
        return None
    match = _RAY_IMAGE.match(base)
    return base if match and match.group("tag").endswith("-tpu") else None


def _allowed(image: str, config: dict[str, Any]) -> bool:
    return any(fnmatch.fnmatchcase(image, str(p)) for p in config.get("allowedTpuImages", []))


def _tpu_image(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    for g in tpu_groups(res.props):
        for i, c in g.tpu_containers():
            image = c.get("image")
            match = _RAY_IMAGE.match(image) if isinstance(image, str) else None
            if (match and match.group("tag").endswith("-tpu")) or (isinstance(image, str) and _allowed(image, config)):
                continue
            if built_base(image, g.annotations):
                continue
            yield (
                f"{res.label}: {g.where}.template.spec.containers[{i}].image is {show(image)}; TPU hosts need "
                "an image with jax[tpu] and libtpu: use rayproject/ray:<ray version>-py3XX-tpu, this project's "
                f"image by digest (REPO/ray-tpu@sha256:...) with its -tpu base in the {labels.BASE_IMAGE} "
                "annotation, or add the image to the allowedTpuImages list of this policy's config"
            )


def pinned_ray_version(config: dict[str, Any]) -> str:
    """The Ray version the stack pins: policy config, then stack config (under the CLI), then the project default."""
    if isinstance(config.get("rayVersion"), str):
        return config["rayVersion"]
    try:
        import pulumi

        raw = pulumi.Config("tpuray").get("ray")
        if raw:
            version = json.loads(raw).get("version")
            if isinstance(version, str):
                return version
    except Exception:  # noqa: BLE001 - no engine, no stack config: fall through to the default
        pass
    from tpuray.config import RayConfig

    return RayConfig().version


def ray_version_of(image: Any) -> str | None:
    match = _RAY_IMAGE.match(image) if isinstance(image, str) else None
    version = _RAY_VERSION.match(match.group("tag")) if match else None
    return version.group("version") if version else None


def _group_images(cluster: RayClusterSpec) -> dict[str, Any]:
    """The Ray image of each group (KubeRay runs Ray in the first container), by where it sits;
    a built image stands for the -tpu base it records (its Ray version)."""
    images: dict[str, Any] = {}
    for g in groups(cluster):
        if g.containers:
            image = g.containers[0].get("image")
            images[f"{g.where}.template.spec.containers[0].image"] = built_base(image, g.annotations) or image
    return images


def _ray_version(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    cluster = cluster_spec(res.props)
    if cluster is None:
        return
    pin = pinned_ray_version(config)
    declared = cluster.spec.get("rayVersion")
    if declared is not None and str(declared) != pin:
        yield f"{res.label}: {cluster.path}.rayVersion is {show(declared)}; the stack pins Ray {pin}: set rayVersion: {show(pin)}"
    for where, image in _group_images(cluster).items():
        version = ray_version_of(image)
        if version is None:
            if isinstance(image, str) and _allowed(image, config):
                continue
            yield (
                f"{res.label}: {where} is {show(image)}, which names no Ray version; the stack pins Ray {pin}: "
                f"use rayproject/ray:{pin}-py3XX(-tpu)"
            )
        elif version != pin:
            yield f"{res.label}: {where} is {show(image)} (Ray {version}); the stack pins Ray {pin}: use rayproject/ray:{pin}-..."


def _ray_version_consistent(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    """Head and workers on one Ray version: a node whose Ray differs from the head's fails to join
    ("Version mismatch: The cluster was started with ...", ray/_private/utils.py check_version_info,
    called by ray/_private/node.py on every node start). Only versions the images name are compared."""
    cluster = cluster_spec(res.props)
    images = _group_images(cluster) if cluster else {}
    head = next((w for w in images if ".headGroupSpec." in w), None)
    head_version = ray_version_of(images[head]) if head else None
    if head is None or head_version is None:
        return
    for where, image in images.items():
        version = ray_version_of(image)
        if version is not None and version != head_version:
            yield (
                f"{res.label}: {where} is {show(image)} (Ray {version}) but the head runs {show(images[head])} "
                f"(Ray {head_version}); Ray refuses a node whose version differs from the head's: run one Ray "
                "version in every group"
            )


# ---------------------------------------------------------------------------- Serve


def _declared_topologies(app: dict[str, Any]) -> list[str]:
    """Where a Serve application can carry its TPU topology."""
    found: list[str] = []
    args = as_dict(app.get("args"))
    if isinstance(args.get("topology"), str):
        found.append(args["topology"])
    for llm in as_list(args.get("llm_configs")):
        topo = as_dict(as_dict(llm).get("accelerator_config")).get("topology")
        if isinstance(topo, str):
            found.append(topo)
    for dep in as_list(app.get("deployments")):
        dep = as_dict(dep)
        topo = as_dict(as_dict(dep.get("ray_actor_options")).get("label_selector")).get(RAY_TPU_TOPOLOGY)
        if isinstance(topo, str):
            found.append(topo)
        for selector in as_list(dep.get("placement_group_bundle_label_selector")):
            topo = as_dict(selector).get(RAY_TPU_TOPOLOGY)
            if isinstance(topo, str):
                found.append(topo)
    return found


def _accelerator_types(app: dict[str, Any]) -> list[str]:
    args = as_dict(app.get("args"))
    found = [args["accelerator_type"]] if isinstance(args.get("accelerator_type"), str) else []
    found += [as_dict(c)["accelerator_type"] for c in as_list(args.get("llm_configs"))
              if isinstance(as_dict(c).get("accelerator_type"), str)]  # fmt: skip
    return found


def _cpu_only(app: dict[str, Any]) -> bool:
    """An application that says where it runs and never mentions TPUs."""
    deployments = [as_dict(d) for d in as_list(app.get("deployments"))]
    if not deployments or any(t.startswith("TPU") for t in _accelerator_types(app)):
        return False
    for dep in deployments:
        options = as_dict(dep.get("ray_actor_options"))
        if not options or "TPU" in as_dict(options.get("resources")):
            return False
        if any("TPU" in as_dict(b) for b in as_list(dep.get("placement_group_bundles"))):
            return False
    return True


def _serve_findings(res: Resource) -> Iterator[tuple[Profile, str]]:
    """(profile, message) of every Serve topology finding: GKE where the application can never
    start or its gang can split over two slices, PROJECT where only this project's rule that the
    topology be declared (checkable against the cluster) is broken."""
    if res.props.get("kind") != "RayService":
        return
    tpu = tpu_groups(res.props)
    if not tpu:
        return
    shapes = {g.topology: g.shape() for g in tpu if g.topology}
    multi_host = any(s is not None and s.multi_host for s in shapes.values()) or len(shapes) > 1
    # A gang splits only where it has two slices (or two shapes) to land on.
    may_split = len(shapes) > 1 or multi_host_slices(res.props) > 1
    field = "spec.serveConfigV2"
    raw = as_dict(res.props.get("spec")).get("serveConfigV2")
    if not isinstance(raw, str):
        if multi_host:
            yield (
                PROJECT,
                (
                    f"{res.label}: {field} is {show(raw)}; a RayService on multi-host TPU slices must say which slice "
                    "topology each application needs: add serveConfigV2 with the topology per application"
                ),
            )
        return
    try:
        doc = yaml.safe_load(raw)
    except yaml.YAMLError as err:
        yield GKE, f"{res.label}: {field} is not valid YAML ({str(err).splitlines()[0]}): fix the Serve config"
        return
    offered = ", ".join(sorted(shapes))
    gens = {s.generation for s in shapes.values() if s is not None}
    for i, app in enumerate(as_list(as_dict(doc).get("applications"))):
        app = as_dict(app)
        name = app.get("name", i)
        where = f"{field} applications[{i}] ({name!r})"
        declared = _declared_topologies(app)
        for topo in declared:
            if topo not in shapes:
                yield (
                    GKE,
                    (
                        f"{res.label}: {where} asks TPU topology {show(topo)} but the cluster's TPU groups run {offered}; "
                        "no host will ever match and the deployment stays DEPLOYING: use one of those"
                    ),
                )
        for accel in _accelerator_types(app):
            try:
                gen = catalog.by_ray_accelerator_type(accel)
            except catalog.CatalogError as err:
                yield GKE, f"{res.label}: {where} accelerator_type is {show(accel)}: {err}"
                continue
            if gens and gen.name not in gens:
                wanted = ", ".join(catalog.GENERATIONS[g].ray_accelerator_type for g in sorted(gens))
                yield (
                    GKE,
                    f"{res.label}: {where} accelerator_type is {show(accel)} but the cluster runs {wanted}: use {wanted}",
                )
        if declared or not multi_host or _cpu_only(app):
            continue
        example = next(iter(sorted(shapes)))
        fix = (
            f"set Ray Serve LLM accelerator_config {{kind: tpu, topology: {example}}} (or args accelerator_type + "
            f"topology), or a placement_group_bundle_label_selector with {RAY_TPU_TOPOLOGY}: {example}"
        )
        if may_split:
            yield (
                GKE,
                (
                    f"{res.label}: {where} carries no TPU topology while the cluster runs multi-host slices ({offered}); "
                    f"its replicas never gang onto one slice and stay DEPLOYING: {fix}"
                ),
            )
        else:
            yield (
                PROJECT,
                (
                    f"{res.label}: {where} carries no TPU topology; the cluster runs one {offered} slice, so no gang can "
                    "split today, but the shape lives only in the application's code, unchecked against the cluster, "
                    f"and a second slice would split it: {fix}"
                ),
            )


def _serve_topology(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    return (message for profile, message in _serve_findings(res) if profile == GKE)


def _serve_topology_declared(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    return (message for profile, message in _serve_findings(res) if profile == PROJECT)


# ---------------------------------------------------------------------------- deadlines


def _job_deadlines(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    if res.props.get("kind") != "RayJob" or not tpu_groups(res.props):
        return
    spec = as_dict(res.props.get("spec"))
    deadline = spec.get("activeDeadlineSeconds")
    if as_int(deadline) is None or as_int(deadline) <= 0:
        yield (
            f"{res.label}: spec.activeDeadlineSeconds is {show(deadline)}; a TPU job without a deadline can hold "
            "whole slices forever: set it, e.g. activeDeadlineSeconds: 14400"
        )
    backoff = spec.get("backoffLimit")
    if as_int(backoff) is None or as_int(backoff) < 0:
        yield (
            f"{res.label}: spec.backoffLimit is {show(backoff)}; say how often a failed TPU job is retried: "
            "set it, e.g. backoffLimit: 2"
        )


RULES = (
    Rule(
        "tpu-image",
        "TPU worker containers run a rayproject/ray -tpu image, this project's build of one by digest, or an allowed image.",
        MANDATORY,
        RAY_TYPES,
        _tpu_image,
        kubernetes=True,
        config={"allowedTpuImages": {"type": "array", "items": {"type": "string"}, "default": []}},
        profile=PROJECT,
    ),
    Rule(
        "ray-version-pinned",
        "Ray images and rayVersion match the stack's pinned Ray version.",
        MANDATORY,
        RAY_TYPES,
        _ray_version,
        kubernetes=True,
        config={
            "rayVersion": {"type": "string"},
            "allowedTpuImages": {"type": "array", "items": {"type": "string"}, "default": []},
        },
        profile=PROJECT,
    ),
    Rule(
        "ray-version-consistent",
        "Head and worker images run the same Ray version (Ray refuses a node of another version).",
        MANDATORY,
        RAY_TYPES,
        _ray_version_consistent,
        kubernetes=True,
        profile=GKE,
    ),
    Rule(
        "serve-tpu-topology",
        "TPU applications of a RayService ask a topology and accelerator the cluster provides, and carry one where "
        "their gang could split over two slices.",
        MANDATORY,
        RAY_TYPES,
        _serve_topology,
        topology=True,
        kubernetes=True,
        profile=GKE,
    ),
    Rule(
        "serve-tpu-topology-declared",
        "TPU applications of a RayService on multi-host slices declare their topology in serveConfigV2, even on "
        "one slice.",
        MANDATORY,
        RAY_TYPES,
        _serve_topology_declared,
        kubernetes=True,
        profile=PROJECT,
    ),
    Rule(
        "rayjob-deadlines",
        "TPU RayJobs set activeDeadlineSeconds and backoffLimit.",
        MANDATORY,
        RAY_TYPES,
        _job_deadlines,
        kubernetes=True,
        profile=PROJECT,
    ),
)
