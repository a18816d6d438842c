"""Every validation in tpuray/config/, one row each: an edit of the dev stack's `tpuray:`
config and the exact line it must produce (and only that line).

To cover a new validation, add one row to CASES: (id, edit, expected line). `edit` takes the
raw config (keys without the namespace, as read from stacks/Pulumi.dev.yaml) and changes it
in place; `pool(c)` is the first slice pool (v6e-dev, v6e 4x4), `pool(c, 1)` the second
(v6e-serve-dev, v6e 2x2). The branch-coverage gate in `make test` (config.py >= 95 %) tells
when a validation has no row.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tpuray.config import ConfigError, read_stack_file, resolve_stack_file, stacks_dir
from tpuray.config.checks import parse_stack_config

DEV = read_stack_file(stacks_dir() / "Pulumi.dev.yaml")
Edit = Callable[[dict[str, Any]], Any]


def pool(c: dict[str, Any], i: int = 0) -> dict[str, Any]:
    return c["slicePools"][i]


def rename(c: dict[str, Any], i: int, name: str) -> None:
    """Rename a pool and the workloads that use it, so that only the name is at fault."""
    for workload in c["workloads"].values():
        if isinstance(workload, dict) and workload.get("pool") == pool(c, i)["name"]:
            workload["pool"] = name
    pool(c, i)["name"] = name


def ranges_from_terraform_without_pods(c: dict[str, Any]) -> None:
    # The dev stack names both ranges itself (the foundation's): take them out first.
    del c["cluster"]["podsRangeName"], c["cluster"]["servicesRangeName"]
    c.update(terraform={**TF_LOCAL, "outputs": {"servicesRangeName": "services_range_name"}})


def tiers(*t: dict[str, Any]) -> Edit:
    return lambda c: pool(c).update(capacity=list(t))


TF_LOCAL = {"backend": "local", "path": "tests/fixtures/terraform/foundation.tfstate", "outputs": {"network": "vpc"}}

CASES: list[tuple[str, Edit, str]] = [
    # ------------------------------------------------------------------ top level and pydantic
    ("unknown top-level key", lambda c: c.update(clusters={}),
     "tpuray:clusters: unknown key; valid: tpuray:environment, tpuray:gcp, tpuray:cluster, tpuray:slicePools, "
     "tpuray:ray, tpuray:workloads, tpuray:prices, tpuray:terraform, tpuray:observability, tpuray:images, "
     "tpuray:queues"),
    ("unknown nested key", lambda c: pool(c).update(topolgy="4x4"),
     "tpuray:slicePools[0].topolgy: unknown key (value '4x4'); check the spelling in docs/configuration.md"),
    # A key the user wrote with brackets is shown as written (the location is the user's keys,
    # indexes as [i]; pydantic adds no segments of its own for this schema).
    ("unknown nested key with brackets", lambda c: pool(c).update({"capacity[1]": "spot"}),
     "tpuray:slicePools[0].capacity[1]: unknown key (value 'spot'); check the spelling in docs/configuration.md"),
    ("price of a generation key with brackets", lambda c: c.update(prices={"v6e[eu]": {"spot": "cheap"}}),
     "tpuray:prices.v6e[eu].spot: 'cheap' is invalid; input should be a valid number, unable to parse string as a number"),
    # Pydantic's lax mode would read `slices: true` as one slice.
    ("a boolean where a number goes", lambda c: pool(c).update(slices=True),
     "tpuray:slicePools[0].slices: true is invalid; input should be a number, not true or false"),
    ("required key missing", lambda c: c["gcp"].pop("project"),
     "tpuray:gcp.project: missing; this key is required"),
    ("reservation without a name", tiers({"reservation": {}}),
     "tpuray:slicePools[0].capacity[0].reservation.name: missing; a reservation tier needs the name of a Compute "
     "Engine reservation, e.g. {reservation: {name: prod-v6e-res}}"),
    ("environment not one of three", lambda c: c.update(environment="qa"),
     "tpuray:environment: 'qa' is invalid; input should be 'dev', 'staging' or 'prod'"),
    ("number below its minimum", lambda c: c["workloads"]["train"].update(steps=0),
     "tpuray:workloads.train.steps: 0 is invalid; input should be greater than or equal to 1"),
    ("ray python tag", lambda c: c["ray"].update(python="3.12"),
     "tpuray:ray.python: '3.12' is invalid; string should match pattern '^py3\\d+$'"),
    ("empty zone list", lambda c: c["gcp"].update(zones=[]),
     "tpuray:gcp.zones: [] is invalid; list should have at least 1 item after validation, not 0"),
    # ------------------------------------------------------------------ slice pools
    ("pool name not a DNS label", lambda c: rename(c, 0, "V6E_dev"),
     "tpuray:slicePools[0].name: 'V6E_dev' is invalid; use a lowercase DNS label of at most 30 characters "
     "(it names node pools and a ComputeClass)"),
    ("pool name over 30 characters", lambda c: rename(c, 1, "v6e-serve-dev-" + "x" * 17),
     "tpuray:slicePools[1].name: 'v6e-serve-dev-xxxxxxxxxxxxxxxxx' is invalid; use a lowercase DNS label of at most "
     "30 characters (it names node pools and a ComputeClass)"),
    ("pool name used twice", lambda c: c["slicePools"].append({**pool(c, 1), "name": "v6e-dev"}),
     "tpuray:slicePools[2].name: 'v6e-dev' is used twice; slice pool names must be unique"),
    ("no slice pools", lambda c: c.update(slicePools=[], workloads={}),
     "tpuray:slicePools: [] is empty; declare at least one slice pool"),
    ("unknown generation", lambda c: pool(c).update(generation="v6"),
     "tpuray:slicePools[0].generation: 'v6' is not a TPU generation; valid: v4, v5e, v5p, v6e, tpu7x"),
    ("topology of another generation", lambda c: pool(c).update(topology="2x2x2"),
     "tpuray:slicePools[0].topology: '2x2x2' is not a valid v6e topology; valid: 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, "
     "16x16"),
    ("machine type that does not fit", lambda c: pool(c).update(machineType="ct6e-standard-8t"),
     "tpuray:slicePools[0].machineType: 'ct6e-standard-8t' does not fit v6e 4x4; valid: ct6e-standard-4t"),
    ("machine type of another generation", lambda c: pool(c, 1).update(machineType="ct5lp-hightpu-4t"),
     "tpuray:slicePools[1].machineType: 'ct5lp-hightpu-4t' does not fit v6e 2x2; valid: ct6e-standard-4t"),
    ("zero slices", lambda c: pool(c, 1).update(slices=0),
     "tpuray:slicePools[1].slices: 0 is invalid; a pool needs at least 1 slice"),
    # ------------------------------------------------------------------ capacity tiers
    ("empty capacity chain", tiers(),
     "tpuray:slicePools[0].capacity: [] is empty; list at least one tier, in priority order, from spot, reservation, "
     "onDemand, flexStart"),
    ("tier naming nothing", tiers({"spot": True}, {}),
     "tpuray:slicePools[0].capacity[1]: {} names no capacity; set exactly one of spot, reservation, onDemand, "
     "flexStart"),
    ("tier with spot and on-demand", tiers({"spot": True, "onDemand": True}),
     "tpuray:slicePools[0].capacity[0]: combines spot and on-demand; set exactly one of spot, reservation, onDemand, "
     "flexStart per tier"),
    ("tier with a reservation and on-demand", tiers({"reservation": "dev-res", "onDemand": True}),
     "tpuray:slicePools[0].capacity[0]: combines reservation and on-demand; set exactly one of spot, reservation, "
     "onDemand, flexStart per tier"),
    ("tier with on-demand and flex-start", tiers({"onDemand": True, "flexStart": True}),
     "tpuray:slicePools[0].capacity[0]: combines on-demand and flex-start; set exactly one of spot, reservation, "
     "onDemand, flexStart per tier"),
    ("tier with spot and flex-start", tiers({"spot": True, "flexStart": True}),
     "tpuray:slicePools[0].capacity[0]: {spot: true, flexStart: true} is invalid; flex-start cannot be combined with "
     "spot in one tier (GKE rejects it): make them separate tiers"),
    ("reservation with an empty name", tiers({"reservation": " "}),
     "tpuray:slicePools[0].capacity[0].reservation.name: ' ' is empty; a reservation tier needs the name of a Compute "
     "Engine reservation, e.g. {reservation: {name: prod-v6e-res}}"),
    ("train pool on a 2-host slice Ray reads as one VM",
     lambda c: pool(c).update(topology="2x4", machineType="ct6e-standard-4t"),
     "tpuray:slicePools[0].machineType: 'ct6e-standard-4t' makes v6e 2x4 2 hosts of 4 chips: Ray's SlicePlacementGroup "
     "(JaxTrainer, Ray Serve LLM) reserves it as one 8-chip VM, so the JaxTrainer gang of workloads.train could span two slices; "
     "use ct6e-standard-8t (8 chips per pod, numOfHosts: 1) or a topology of more than 8 chips"),
    # ------------------------------------------------------------------ fallbacks
    ("fallback of an unknown generation", lambda c: pool(c).update(fallback=[{"generation": "v7", "topology": "4x4"}]),
     "tpuray:slicePools[0].fallback[0].generation: 'v7' is not a TPU generation; valid: v4, v5e, v5p, v6e, tpu7x"),
    ("fallback topology", lambda c: pool(c).update(fallback=[{"generation": "v5e", "topology": "4x4x4"}]),
     "tpuray:slicePools[0].fallback[0].topology: '4x4x4' is not a valid v5e topology; valid: 1x1, 2x2, 2x4, 4x4, "
     "4x8, 8x8, 8x16, 16x16"),
    ("fallback tier naming nothing",
     lambda c: pool(c).update(fallback=[{"generation": "v5e", "topology": "4x4", "capacity": [{}]}]),
     "tpuray:slicePools[0].fallback[0].capacity[0]: {} names no capacity; set exactly one of spot, reservation, "
     "onDemand, flexStart"),
    # ------------------------------------------------------------------ workloads
    ("workload on an unknown pool", lambda c: c["workloads"]["train"].update(pool="v5e-dev"),
     "tpuray:workloads.train.pool: 'v5e-dev' is not a slice pool of this stack; valid: v6e-dev, v6e-serve-dev"),
    ("more workload slices than the pool has", lambda c: c["workloads"]["train"].update(slices=2),
     "tpuray:workloads.train.slices: workloads on pool 'v6e-dev' need 2 slices (tpuray:workloads.train.slices) but "
     "the pool has 1; raise slicePools 'v6e-dev'.slices or move a workload to another pool"),
    # An elastic run (ray_apps/elastic.py): {min, max} whole slices, the pool holding the most.
    ("elastic slices with min above max", lambda c: c["workloads"]["train"].update(slices={"min": 2, "max": 1}),
     "tpuray:workloads.train.slices: min 2 is above max 1; write min <= max, e.g. {min: 1, max: 2}"),
    ("elastic slices with min below 1", lambda c: c["workloads"]["train"].update(slices={"min": 0, "max": 1}),
     "tpuray:workloads.train.slices.min: 0 is invalid; an elastic run keeps at least 1 slice"),
    ("no slices", lambda c: c["workloads"]["train"].update(slices=0),
     "tpuray:workloads.train.slices: 0 is invalid; a run needs at least 1 slice"),
    ("elastic max beyond the pool", lambda c: c["workloads"]["train"].update(slices={"min": 1, "max": 2}),
     "tpuray:workloads.train.slices: workloads on pool 'v6e-dev' need 2 slices (tpuray:workloads.train.slices) but "
     "the pool has 1; raise slicePools 'v6e-dev'.slices or move a workload to another pool"),
    ("two workloads on a one-slice pool", lambda c: c["workloads"].update(interactive={"pool": "v6e-serve-dev"}),
     "tpuray:workloads.interactive.slices: workloads on pool 'v6e-serve-dev' need 2 slices "
     "(tpuray:workloads.interactive.slices, tpuray:workloads.serve.replicas) but the pool has 1; raise slicePools "
     "'v6e-serve-dev'.slices or move a workload to another pool"),
    ("autoscaled serve beyond its pool", lambda c: c["workloads"]["serve"].update(autoscaling={"minReplicas": 1, "maxReplicas": 2}),
     "tpuray:workloads.serve.autoscaling.maxReplicas: workloads on pool 'v6e-serve-dev' need 2 slices "
     "(tpuray:workloads.serve.autoscaling.maxReplicas) but the pool has 1; raise slicePools 'v6e-serve-dev'.slices or "
     "move a workload to another pool"),
    ("token secret on the checkpoint backend",
     lambda c: c["workloads"]["serve"].update(hfTokenSecret="projects/acme-ml-dev/secrets/hf-token"),
     "tpuray:workloads.serve.hfTokenSecret: only the llm backend reads a Hugging Face token; the checkpoint "
     "backend would never use it: remove it"),
    ("checkpoint backend without a checkpoint", lambda c: c["workloads"]["serve"].pop("checkpointUri"),
     "tpuray:workloads.serve.checkpointUri: missing; the checkpoint backend needs the URI of a training run"),
    ("serve backend not one of two", lambda c: c["workloads"]["serve"].update(backend="vllm"),
     "tpuray:workloads.serve.backend: 'vllm' is invalid; input should be 'llm' or 'checkpoint'"),
    # ------------------------------------------------------------------ prices
    ("price for an unknown generation", lambda c: c.update(prices={"v6": {"spot": 1.0}}),
     "tpuray:prices.v6: 'v6' is not a TPU generation; valid: v4, v5e, v5p, v6e, tpu7x"),
    ("price for an unknown tier", lambda c: c.update(prices={"v6e": {"preemptible": 1.0}}),
     "tpuray:prices.v6e.preemptible: unknown capacity tier; valid: on-demand, spot, reservation, flex-start"),
    ("negative price", lambda c: c.update(prices={"v6e": {"spot": -0.5}}),
     "tpuray:prices.v6e.spot: -0.5 is invalid; a price per chip-hour is >= 0 (USD)"),
    # ------------------------------------------------------------------ terraform
    ("gcs backend without a bucket", lambda c: c.update(terraform={"backend": "gcs", "outputs": {"network": "vpc"}}),
     "tpuray:terraform.bucket: missing; the gcs backend needs the state bucket (and usually a prefix)"),
    ("local backend without a path", lambda c: c.update(terraform={"backend": "local", "outputs": {"network": "vpc"}}),
     "tpuray:terraform.path: missing; the local backend needs the path of a terraform.tfstate"),
    ("terraform outputs naming nothing", lambda c: c.update(terraform={**TF_LOCAL, "outputs": {}}),
     "tpuray:terraform.outputs: names no output; map at least one of network, subnetwork, podsRangeName, "
     "servicesRangeName, secretsKmsKey, imageRepository, reservations"),
    ("pods range without services range", lambda c: c["cluster"].pop("servicesRangeName"),
     "tpuray:cluster.servicesRangeName: missing; name both secondary ranges of the subnetwork (podsRangeName and "
     "servicesRangeName, in tpuray:cluster or tpuray:terraform.outputs) or neither"),
    ("services range from terraform without pods range", ranges_from_terraform_without_pods,
     "tpuray:cluster.podsRangeName: missing; name both secondary ranges of the subnetwork (podsRangeName and "
     "servicesRangeName, in tpuray:cluster or tpuray:terraform.outputs) or neither"),
    ("secrets key that is not a key resource name", lambda c: c["cluster"].update(secretsKmsKey="gke-secrets"),
     "tpuray:cluster.secretsKmsKey: 'gke-secrets' is invalid; use the key's full resource name, "
     "projects/PROJECT/locations/REGION/keyRings/RING/cryptoKeys/KEY"),
    ("secrets key outside the cluster's region",
     lambda c: c["cluster"].update(secretsKmsKey="projects/acme-ml-dev/locations/global/keyRings/r/cryptoKeys/k"),
     "tpuray:cluster.secretsKmsKey: key location 'global' is not the cluster's region 'us-east5'; use a key ring "
     "in us-east5"),
    ("terraform reservation no tier uses",
     lambda c: (c.update(terraform={**TF_LOCAL, "outputs": {"reservations": {"dev-res": "res_name"}}}),
                pool(c).update(capacity=[{"reservation": "other-res"}])),
     "tpuray:terraform.outputs.reservations.dev-res: no capacity tier uses reservation 'dev-res'; valid: other-res"),
    ("terraform reservation when no tier names one",
     lambda c: c.update(terraform={**TF_LOCAL, "outputs": {"reservations": {"dev-res": "res_name"}}}),
     "tpuray:terraform.outputs.reservations.dev-res: no capacity tier uses reservation 'dev-res'; valid: none: no "
     "capacity tier names a reservation"),
    # ------------------------------------------------------------------ hardening, network, versions
    ("binary authorization with an image override not pinned by digest",
     lambda c: (c["cluster"].update(binaryAuthorization={"enforce": True}),
                c["ray"].update(image="rayproject/ray:2.60.0-py312-tpu")),
     "tpuray:ray.image: 'rayproject/ray:2.60.0-py312-tpu' is not pinned by digest; Binary Authorization in enforce "
     "mode admits the project's images by digest: use <image>@sha256:<64 hex digits>"),
    ("maintenance window under four hours",
     lambda c: c["cluster"].update(maintenance={"window": {
         "start": "2026-01-03T04:00:00Z", "end": "2026-01-03T06:00:00Z", "recurrence": "FREQ=WEEKLY;BYDAY=SA,SU"}}),
     "tpuray:cluster.maintenance.window: 2026-01-03T04:00:00Z to 2026-01-03T06:00:00Z is shorter than 4 hours; GKE "
     "needs at least 4 contiguous hours: move end later"),
    ("admin network open to everyone", lambda c: c["workloads"].update(adminCidrs=["0.0.0.0/0"]),
     "tpuray:workloads.adminCidrs[0]: '0.0.0.0/0' opens the Ray dashboard to everyone; list your admin networks"),
    ("gateway proxy subnet that is not a CIDR block",
     lambda c: c["workloads"]["serve"].update(gateway={
         "className": "gke-l7-rilb", "hostname": "serve.ml.acme.internal", "tls": {"certificateManager": ["x"]},
         "proxyOnlySubnetCidr": "10.129.0.0/33"}),
     "tpuray:workloads.serve.gateway.proxyOnlySubnetCidr: '10.129.0.0/33' is not a CIDR block ('10.129.0.0/33' does "
     "not appear to be an IPv4 or IPv6 network); e.g. 10.128.0.0/16"),
    ("control plane version below the floor", lambda c: c["cluster"].update(minMasterVersion="1.20.0-gke.1"),
     "tpuray:cluster.minMasterVersion: '1.20.0-gke.1' is below 1.33.3-gke.1136000, the first GKE version with "
     "ComputeClass nodePoolAutoCreation without cluster-level node auto-provisioning; raise it or leave it unset"),
    ("codeUri was replaced by bundleUri", lambda c: c["workloads"].update(codeUri="gs://acme-ml-dev-ray/tpuray-apps.zip"),
     "tpuray:workloads.codeUri: was replaced by tpuray:workloads.bundleUri (gs://BUCKET[/PREFIX]); the zip is named "
     "by its content hash: see docs/apps.md"),
    ("bundleUri naming a zip", lambda c: c["workloads"].update(bundleUri="gs://acme-ml-dev-ray/tpuray-apps.zip"),
     "tpuray:workloads.bundleUri: 'gs://acme-ml-dev-ray/tpuray-apps.zip' is invalid; use gs://BUCKET[/PREFIX], the "
     "folder the deploy workflow uploads bundles to (tpuray adds the tpuray-apps-<sha256>.zip name)"),
    ("bundleUri not in GCS", lambda c: c["workloads"].update(bundleUri="s3://acme/bundles"),
     "tpuray:workloads.bundleUri: 's3://acme/bundles' is invalid; use gs://BUCKET[/PREFIX], the folder the deploy "
     "workflow uploads bundles to (tpuray adds the tpuray-apps-<sha256>.zip name)"),
    ("image repository not in Artifact Registry", lambda c: c.update(images={"repository": "gcr.io/acme-ml-dev"}),
     "tpuray:images.repository: 'gcr.io/acme-ml-dev' is invalid; use an Artifact Registry docker repository, "
     "REGION-docker.pkg.dev/PROJECT/REPO (the Terraform output imageRepository)"),
    ("image digest that is a tag",
     lambda c: c["images"].update(digests={"ray-tpu": "latest"}),
     "tpuray:images.digests.ray-tpu: 'latest' is invalid; use the pushed image's digest, sha256:<64 hex digits>"),
    ("digest of an image not built here",
     lambda c: c["images"].update(digests={"ray-gpu": "sha256:" + "0" * 64}),
     "tpuray:images.digests.ray-gpu: unknown image; valid: ray-tpu, serve-llm"),
    ("digests without a repository",
     lambda c: c.update(images={"digests": {"ray-tpu": "sha256:" + "0" * 64}}),
     "tpuray:images.repository: missing; digests need the repository the images were pushed to"),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "line"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_config_check_gives_exactly_its_line(edit: Edit, line: str) -> None:
    raw = copy.deepcopy(DEV)
    edit(raw)
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw, "dev")
    assert info.value.lines == [line]


def test_the_dev_stack_itself_passes_every_check() -> None:
    assert parse_stack_config(copy.deepcopy(DEV), "dev").stack == "dev"


def test_case_ids_are_unique() -> None:
    assert len({c[0] for c in CASES}) == len(CASES)


# ---------------------------------------------------------------------------- stack files


def _file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("Pulumi.bad.yaml", "config: {tpuray:gcp: [unclosed\n", "not valid YAML"),
        ("Pulumi.bad.yaml", "config: [a, b]\n", "'config' must be a mapping"),
        ("Pulumi.bad.yaml", "config:\n  tpuray:gcp:\n    secure: AAAB\n",
         "tpuray:gcp: secret values cannot be read offline; keep tpuray config in plain text"),
    ],
    ids=["invalid yaml", "config not a mapping", "secret value"],
)  # fmt: skip
def test_stack_file_problems_are_one_line(tmp_path: Path, name: str, text: str, line: str) -> None:
    path = _file(tmp_path, name, text)
    with pytest.raises(ConfigError) as info:
        read_stack_file(path)
    (got,) = info.value.lines
    assert got.endswith(line) if line.startswith("tpuray:") else got.startswith(f"stack file {str(path)!r}: {line}")


def test_stack_file_not_named_pulumi_stack_yaml(tmp_path: Path) -> None:
    path = _file(tmp_path, "dev.yaml", "config: {}\n")
    with pytest.raises(ConfigError) as info:
        resolve_stack_file(str(path))
    assert info.value.lines == [f"stack file {str(path)!r}: name must be Pulumi.<stack>.yaml"]


def test_stack_file_that_does_not_exist(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.gone.yaml"
    with pytest.raises(ConfigError) as info:
        resolve_stack_file(str(path))
    assert info.value.lines == [f"stack file {str(path)!r}: not found"]


def test_unknown_stack_name_lists_the_stacks_in_stacks() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_stack_file("qa")
    assert info.value.lines == ["stack 'qa': no stacks/Pulumi.qa.yaml; valid: dev, prod, staging"]


def test_a_stack_file_outside_stacks_resolves_to_its_name(tmp_path: Path) -> None:
    path = _file(tmp_path, "Pulumi.team-a.yaml", "config: {}\n")
    assert resolve_stack_file(str(path)) == ("team-a", path)
