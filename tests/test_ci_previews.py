"""What a pull request's code can reach: state, secrets and the identities of previews.

Before (issue 36, item 2): the preview account held object admin on the one bucket with every
Pulumi stack's and every foundation's Terraform state, and the preview job ran the pull
request's own code with the Pulumi secrets passphrase in its environment. Now:

- each environment's Pulumi state is in its own bucket, in its own project, which only its
  deploy account reads and writes; the foundations' Terraform state is in the CI home's bucket,
  which the preview account reads (terraform plan -lock=false) and no CI account writes;
- each stack's secrets provider is a Cloud KMS key only its environment's deploy account may use;
- no pull-request job runs a Pulumi command against real state, or gets any secret but its
  GITHUB_TOKEN: Pulumi's cloud secrets manager decrypts the stack's data key as soon as it loads
  the stack (pulumi/pulumi pkg/secrets/cloud/manager.go newCloudSecretsManager, keeper.Decrypt;
  pkg/cmd/pulumi/operations/preview.go loads the stack configuration's secrets manager), so a
  preview without decrypt fails, and a preview with decrypt hands the secrets to the pull
  request's code. Pull requests get the offline `tpuray diff` instead.

What Pulumi's GCS backend writes (pulumi/pulumi at 1b5949891b3c, pkg/backend/diy): state in
.pulumi/stacks/<project>/<stack>.json (store.go StackBasePath) with its .bak (state.go
backupTarget), .pulumi/history/<project>/<stack>/ and .pulumi/backups/<project>/<stack>/,
locks in .pulumi/locks/organization/<project>/<stack>/<id>.json (lock.go stackLockDir, lockPath).
A preview takes no lock (backend.go Preview calls no Lock, since pulumi/pulumi#8642,
"Allow preview on locked stack") and, being a dry run, writes no history: a preview needs no
write at all, so there is no lock prefix to grant.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.foundation_model import DEPLOY, ENVS, PREVIEW, foundation, grants, instances
from tpuray.checks import iam_roles

WORKFLOWS = REPO / ".github" / "workflows"
STACKS = REPO / "stacks"
# A permission whose verb changes something, or reads a secret's plaintext, or acts as another identity.
WRITING = re.compile(
    r"\.(create|delete|update|setIamPolicy|useToDecrypt|useToEncrypt|actAs|getAccessToken|signBlob|signJwt|"
    r"implicitDelegation|uploadArtifacts|restore|move|rename|abort)$"
)
# A create that changes nothing: a TokenReview only asks the API server whether a token is valid
# (in roles/container.viewer).
ASKS_ONLY = {"container.tokenReviews.create"}
TF_STATE = "acme-ml-prod-tpuray-state"


def _permissions(account: str) -> dict[str, set[str]]:
    """permission -> the places (scope where) an account holds it, over every foundation."""
    found: dict[str, set[str]] = {}
    for env in ENVS:
        for g in grants(env, account):
            for permission in iam_roles.permissions(g.role):
                found.setdefault(permission, set()).add(f"{g.scope} {g.where}")
    return found


def test_the_preview_account_can_neither_write_nor_decrypt_anything() -> None:
    writing = sorted(
        f"{p} on {w}"
        for p, where in _permissions(PREVIEW).items()
        if WRITING.search(p) and p not in ASKS_ONLY
        for w in where
    )
    assert writing == []


def test_the_preview_account_reads_the_terraform_state_for_terraform_plan() -> None:
    assert {"storage.objects.get", "storage.objects.list"} <= {
        p for p, where in _permissions(PREVIEW).items() if f"bucket {TF_STATE}" in where
    }


def test_no_ci_account_may_write_the_foundations_terraform_state() -> None:
    writers = sorted(
        f"{account} {p}"
        for account in (DEPLOY, PREVIEW)
        for p, where in _permissions(account).items()
        if f"bucket {TF_STATE}" in where and WRITING.search(p)
    )
    assert writers == []


@pytest.mark.parametrize("env", ENVS)
def test_each_environments_pulumi_state_is_in_its_own_project_and_written_by_its_deploy_account_only(env: str) -> None:
    (bucket,) = instances(
        foundation(env).root.module("pulumi_state"), "google_storage_bucket", "state", "name", "project"
    )
    assert bucket == {"name": f"acme-ml-{env}-pulumi-state", "project": f"acme-ml-{env}"}
    holders = sorted(
        (other, g.role) for other in ENVS for account in (DEPLOY, PREVIEW)
        for g in grants(other, account) if g.where == bucket["name"]
    )  # fmt: skip
    assert holders == [(env, "roles/storage.objectUser")]
    assert [g.role for g in grants(env, PREVIEW) if g.where == bucket["name"]] == []


def _secrets_provider(env: str) -> str:
    return (yaml.safe_load((STACKS / f"Pulumi.{env}.yaml").read_text()) or {}).get("secretsprovider", "")


@pytest.mark.parametrize("env", ENVS)
def test_each_stack_keeps_its_secrets_with_its_environments_kms_key(env: str) -> None:
    key = f"projects/acme-ml-{env}/locations/us-east5/keyRings/tpuray-{env}/cryptoKeys/pulumi-secrets"
    assert _secrets_provider(env) == f"gcpkms://{key}"
    assert key in foundation(env).kms_keys


@pytest.mark.parametrize("env", ENVS)
def test_only_the_environments_deploy_account_may_use_the_stack_secrets_key(env: str) -> None:
    key = _secrets_provider(env).removeprefix("gcpkms://")
    kms = foundation(env).root.module("kms")
    members = [i["member"] for i in instances(kms, "google_kms_crypto_key_iam_member", "pulumi_secrets", "member")]
    assert members == [DEPLOY]
    decrypters = sorted(w for p, where in _permissions(PREVIEW).items() if "useToDecrypt" in p for w in where)
    assert decrypters == []
    assert [g.role for g in grants(env, DEPLOY) if g.where == key] == ["roles/cloudkms.cryptoKeyEncrypterDecrypter"]


def _load(path: Path) -> dict[Any, Any]:
    return yaml.safe_load(path.read_text())


def _on(doc: dict[Any, Any]) -> Any:
    return doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as True


def test_no_workflow_gives_a_job_the_pulumi_passphrase() -> None:
    # The stacks' secrets are Cloud KMS's: no job needs a passphrase, so none may receive one.
    assert [p.name for p in sorted(WORKFLOWS.glob("*.yml")) if "PULUMI_CONFIG_PASSPHRASE" in p.read_text()] == []


def _pull_request_workflows() -> list[Path]:
    return [p for p in sorted(WORKFLOWS.glob("*.yml")) if "pull_request" in (_on(_load(p)) or {})]


def test_pull_request_jobs_get_no_secret_but_their_github_token() -> None:
    found = []
    for path in _pull_request_workflows():
        for name, job in _load(path)["jobs"].items():
            if "secrets" in job:
                found.append(f"{path.name} {name}: secrets: {job['secrets']}")
        found += [
            f"{path.name}: secrets.{s}" for s in re.findall(r"secrets\.(\w+)", path.read_text()) if s != "GITHUB_TOKEN"
        ]
    assert found == []


def test_pull_requests_run_no_pulumi_command_against_a_stacks_state() -> None:
    calls = [
        f"{path.name} {name}"
        for path in _pull_request_workflows()
        for name, job in _load(path)["jobs"].items()
        if "pulumi.yml" in str(job.get("uses", ""))
        or any(str(s.get("uses", "")).startswith("pulumi/actions@") for s in job.get("steps", []))
    ]
    assert calls == []


def test_the_pulumi_workflow_runs_in_a_deploy_environment_as_its_deploy_account() -> None:
    doc = _load(WORKFLOWS / "pulumi.yml")
    environment = _on(doc)["workflow_call"]["inputs"]["environment"]
    assert environment["required"] is True and "default" not in environment
    job = doc["jobs"]["pulumi"]
    assert job["environment"] == "${{ inputs.environment }}"
    (auth,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith("google-github-actions/auth@")]
    assert auth["with"]["service_account"] == "${{ vars.GCP_DEPLOY_SERVICE_ACCOUNT }}"
