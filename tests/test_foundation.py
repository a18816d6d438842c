"""The Terraform foundation (terraform/) against what the Pulumi stacks read from it.

The contract: the foundation module has one root output per field of
tpuray.config.TerraformOutputs (same name) and nothing else but `github_variables` (the
repository variables the workflows read); each environment's root re-exports exactly
those; the fixture state the Terraform tests read has exactly those outputs. The HCL is
parsed with bc-python-hcl2 (checkov's `hcl2`); `terraform fmt` and checkov (offline) run over terraform/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import hcl2
import pytest
import yaml

from infra.components.cluster import NODE_ROLES
from tests.conftest import REPO
from tpuray.config import TerraformOutputs
from tpuray.config.checks import load_stack
from tpuray.policies.evaluate import check_stack as policy_violations
from tpuray.preview.mockrun import run_stack

TF = REPO / "terraform"
MODULE = TF / "modules" / "foundation"
ENVS = ("dev", "staging", "prod")
FIXTURE_STATE = REPO / "tests" / "fixtures" / "terraform" / "foundation.tfstate"
WORKFLOWS = REPO / ".github" / "workflows"
CI_OUTPUT = "github_variables"  # not a stack value: what `gh variable set` takes
# Not a stack value either: each environment's own variables (`gh variable set --env ENV`).
ENV_OUTPUT = "github_environment_variables"
CHECKOV = Path(sys.executable).parent / "checkov"
CLUSTER = "gcp:container/cluster:Cluster"
ROUTER_NAT = "gcp:compute/routerNat:RouterNat"


def _blocks(folder: Path, kind: str) -> dict[str, dict[str, Any]]:
    """name -> body of every `kind` block (output, module, variable) in folder/*.tf."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.tf")):
        with path.open() as f:
            for block in hcl2.load(f).get(kind, []):
                found.update(block)
    return found


def _one(value: Any) -> Any:
    # bc-python-hcl2 wraps attribute values in a one-element list.
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def _stack_fields() -> set[str]:
    return set(TerraformOutputs.model_fields)


def _state_outputs() -> dict[str, Any]:
    return json.loads(FIXTURE_STATE.read_text())["outputs"]


def test_every_field_a_stack_can_map_is_a_foundation_output() -> None:
    missing = _stack_fields() - set(_blocks(MODULE, "output"))
    assert not missing, f"TerraformOutputs fields without a foundation output: {sorted(missing)}"


def test_every_foundation_output_is_a_field_a_stack_can_map_or_the_ci_variables() -> None:
    extra = set(_blocks(MODULE, "output")) - _stack_fields() - {CI_OUTPUT, ENV_OUTPUT}
    assert not extra, f"foundation outputs no stack can read: {sorted(extra)}"


@pytest.mark.parametrize("env", ENVS)
def test_each_environment_root_re_exports_exactly_the_module_outputs(env: str) -> None:
    outputs = _blocks(TF / "foundation" / env, "output")
    assert set(outputs) == set(_blocks(MODULE, "output"))
    assert {name: _one(body["value"]) for name, body in outputs.items()} == {
        name: f"${{module.foundation.{name}}}" for name in outputs
    }


@pytest.mark.parametrize("env", ENVS)
def test_each_environment_root_builds_on_the_foundation_module_for_its_stack(env: str) -> None:
    (module,) = _blocks(TF / "foundation" / env, "module").values()
    cfg = load_stack(env)
    assert _one(module["source"]) == "../../modules/foundation"
    assert (_one(module["project_id"]), _one(module["region"]), _one(module["environment"])) == (
        cfg.gcp.project,
        cfg.gcp.region,
        env,
    )


def test_exactly_one_environment_hosts_the_ci_identity_and_state_bucket() -> None:
    homes = [env for env in ENVS if _one(_blocks(TF / "foundation" / env, "module")["foundation"]["ci"])["home"]]
    assert homes == ["prod"]


def test_fixture_state_has_exactly_the_foundation_outputs() -> None:
    assert set(_state_outputs()) == set(_blocks(MODULE, "output"))


def test_fixture_state_values_have_the_shapes_the_reader_takes() -> None:
    outputs = _state_outputs()
    maps = {"reservations", CI_OUTPUT, ENV_OUTPUT}
    for name, out in outputs.items():
        if name in maps:
            assert out["type"] == ["map", "string"], name
            assert all(isinstance(v, str) and v for v in out["value"].values()), name
        else:
            assert out["type"] == "string", name
            assert isinstance(out["value"], str) and out["value"], name


def test_github_variables_are_the_cloud_variables_the_workflows_read() -> None:
    read = set()
    for path in WORKFLOWS.glob("*.yml"):
        read |= set(re.findall(r"\bvars\.([A-Z][A-Z0-9_]*)", path.read_text()))
    read -= {"TPURAY_SHARED_REPO"}  # reference data for the tests, not a cloud resource
    outputs = _blocks(MODULE, "output")
    declared = {name for output in (CI_OUTPUT, ENV_OUTPUT)
                for name in re.findall(r"\b([A-Z][A-Z0-9_]+)['\"]?\s*[:=]", _one(outputs[output]["value"]))}  # fmt: skip
    assert declared == read
    assert set(_state_outputs()[CI_OUTPUT]["value"]) | set(_state_outputs()[ENV_OUTPUT]["value"]) == read


def test_prod_declares_its_reservation_in_the_shape_of_the_pool_that_consumes_it() -> None:
    module = _blocks(TF / "foundation" / "prod", "module")["foundation"]
    reservations = _one(module["tpu_reservations"])
    assert reservations == {
        "acme-v6e-4x4-prod": {"zone": "us-east5-b", "machine_type": "ct6e-standard-4t", "vm_count": 8}
    }
    # The catalog agrees: v6e 4x4 is 4 VMs of ct6e-standard-4t, and the pool has 2 slices.
    pool = load_stack("prod").pool("v6e-train")
    assert (pool.shape.machine_type, pool.shape.hosts * pool.slices) == ("ct6e-standard-4t", 8)
    assert any(t.reservation and t.reservation.name == "acme-v6e-4x4-prod" for t in pool.capacity)


def test_deploy_account_may_grant_every_role_the_program_grants_the_nodes() -> None:
    variables = _blocks(TF / "modules" / "ci-identity", "variable")
    grantable = _one(variables["grantable_roles"]["default"])
    assert set(NODE_ROLES) <= set(grantable)


def test_every_variable_is_typed_and_described() -> None:
    untyped = [
        f"{folder.name}.{name}"
        for folder in (TF / "modules").iterdir()
        for name, body in _blocks(folder, "variable").items()
        if "type" not in body or not _one(body.get("description", ""))
    ]
    assert untyped == []


def _terraform() -> str:
    found = shutil.which("terraform")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("terraform is not on the PATH (CI installs it with hashicorp/setup-terraform)")
        pytest.skip("terraform is not on the PATH")
    return found


def test_terraform_files_are_formatted() -> None:
    out = subprocess.run(
        [_terraform(), "fmt", "-check", "-recursive", "-diff", str(TF)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_terraform_fmt_check_fails_on_an_unformatted_file(tmp_path: Path) -> None:
    (tmp_path / "main.tf").write_text('output "x" {\nvalue="y"\n}\n')
    out = subprocess.run([_terraform(), "fmt", "-check", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode != 0


def _checkov(folder: Path) -> dict[str, Any]:
    if not CHECKOV.exists():
        pytest.fail(f"checkov not found at {CHECKOV}; it is pinned in requirements.lock")
    out = subprocess.run(
        [str(CHECKOV), "-d", str(folder), "--framework", "terraform", "--skip-download", "-o", "json"],
        capture_output=True,
        text=True,
    )
    doc = json.loads(out.stdout)
    return doc[0] if isinstance(doc, list) else doc


@pytest.mark.slow
def test_checkov_finds_nothing_unexplained_in_terraform() -> None:
    report = _checkov(TF)
    failed = [f"{c['check_id']} {c['resource']} ({c['file_path']})" for c in report["results"]["failed_checks"]]
    assert failed == []
    skipped = report["results"]["skipped_checks"]
    unexplained = [
        f"{c['check_id']} {c['resource']}"
        for c in skipped
        if len(c["check_result"].get("suppress_comment", "").strip()) < 20
    ]
    assert unexplained == []
    summary = report["summary"]
    print(
        f"checkov over terraform/: {summary['passed']} passed, {summary['failed']} failed, {summary['skipped']} skipped"
    )
    assert summary["passed"] > 0


@pytest.mark.slow
def test_checkov_reports_a_state_bucket_without_versioning(tmp_path: Path) -> None:
    shutil.copytree(TF / "modules" / "state", tmp_path / "state")
    main = tmp_path / "state" / "main.tf"
    main.write_text(main.read_text().replace("enabled = true", "enabled = false"))
    failed = {c["check_id"] for c in _checkov(tmp_path)["results"]["failed_checks"]}
    assert "CKV_GCP_78" in failed  # "Ensure Cloud storage has versioning enabled"


# What a stack on the foundation writes (docs/foundation.md): each field -> the output of
# the same name, the reservation tier -> its entry of the `reservations` map.
FOUNDATION_TERRAFORM_BLOCK = {
    "backend": "local",
    "path": str(FIXTURE_STATE),
    "outputs": {
        "network": "network",
        "subnetwork": "subnetwork",
        "podsRangeName": "pods_range_name",
        "servicesRangeName": "services_range_name",
        "secretsKmsKey": "secrets_kms_key",
        "imageRepository": "image_repository",
        "reservations": {"acme-v6e-4x4-prod": "reservations.acme-v6e-4x4-prod"},
    },
}


def test_the_block_in_the_docs_maps_every_field_to_its_foundation_output() -> None:
    mapped = {TerraformOutputs.model_fields[f].alias or f: f for f in TerraformOutputs.model_fields}
    assert {mapped[k] for k in FOUNDATION_TERRAFORM_BLOCK["outputs"]} == _stack_fields()


@pytest.fixture(scope="module")
def prod_on_foundation(tmp_path_factory: pytest.TempPathFactory):
    doc = yaml.safe_load((REPO / "stacks" / "Pulumi.prod.yaml").read_text())
    doc["config"]["tpuray:terraform"] = FOUNDATION_TERRAFORM_BLOCK
    doc["config"]["tpuray:cluster"]["egress"] = "provided"  # the foundation declares Cloud NAT
    path = tmp_path_factory.mktemp("stacks") / "Pulumi.prod.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return run_stack(str(path))


def test_prod_on_the_foundation_state_previews_without_policy_violations(prod_on_foundation) -> None:
    assert [v.as_json() for v in policy_violations(prod_on_foundation)] == []


def test_prod_on_the_foundation_state_uses_its_network_ranges_and_key(prod_on_foundation) -> None:
    (cluster,) = [r.inputs for r in prod_on_foundation.of_type(CLUSTER) if "network" in r.inputs]
    assert (cluster["network"], cluster["subnetwork"]) == ("tpuray-prod", "tpuray-prod-us-east5-gke")
    assert cluster["ipAllocationPolicy"] == {
        "clusterSecondaryRangeName": "gke-pods",
        "servicesSecondaryRangeName": "gke-services",
    }
    assert cluster["databaseEncryption"]["keyName"] == (
        "projects/acme-ml-prod/locations/us-east5/keyRings/tpuray-prod/cryptoKeys/gke-secrets"
    )


def test_prod_on_the_foundation_declares_no_second_nat(prod_on_foundation) -> None:
    assert prod_on_foundation.of_type(ROUTER_NAT) == []
