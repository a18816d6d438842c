"""Who CI can act as, per environment (terraform/modules/ci-identity, read with bc-python-hcl2).

Before (issue 36, item 1): one tpuray-deploy account in prod's project was bound to the OIDC
subjects of all three GitHub environments and held container, compute and service-account admin
in every environment's project, and the provider accepted any ref; `dev` had no branch
restriction, so a job on any branch naming `environment: dev` could act in prod. Now each
environment has its own deploy account in its own project, impersonable only from the GitHub
environment of the same name, the provider accepts environment jobs only on refs/heads/main, and
the deploy account's grants on service accounts are on the accounts the stack uses.

The provider's attribute condition is evaluated here with cel-python on the claims GitHub puts
in its OIDC tokens (repository, ref, event_name, environment; a token of a job without an
environment has no `environment` claim):
https://docs.github.com/en/actions/security-for-github-actions/security-hardening-your-deployments/about-security-hardening-with-openid-connect
"""

from __future__ import annotations

import re
from typing import Any

import celpy
import pytest

from tests.foundation_model import DEPLOY, ENVS, _one, evaluate, foundation, grants, instances, resources

PROJECTS = {"dev": "acme-ml-dev", "staging": "acme-ml-staging", "prod": "acme-ml-prod"}


def _ci(env: str):
    return foundation(env).root.module("ci_identity")


def test_every_environment_has_its_own_deploy_account_in_its_own_project() -> None:
    accounts = {env: instances(_ci(env), "google_service_account", "deploy", "project", "account_id") for env in ENVS}
    assert accounts == {
        "dev": [{"project": "acme-ml-dev", "account_id": "tpuray-deploy"}],
        "staging": [{"project": "acme-ml-staging", "account_id": "tpuray-deploy"}],
        "prod": [{"project": "acme-ml-prod", "account_id": "tpuray-deploy"}],
    }


def _subjects(env: str) -> list[str]:
    """The OIDC subjects allowed to impersonate env's deploy account (the pool's name left out)."""
    ci = _ci(env)
    (body,) = [b for n, b in resources(ci.folder, "google_service_account_iam_member").items()
               if n == "deploy_from_environment"]  # fmt: skip
    assert "for_each" not in body and "count" not in body
    member = _one(body["member"]).replace("${local.pool_name}", "POOL")
    return [evaluate(member, ci).removeprefix("principal://iam.googleapis.com/POOL/subject/")]


@pytest.mark.parametrize("env", ENVS)
def test_only_the_github_environment_of_the_same_name_may_impersonate_its_deploy_account(env: str) -> None:
    assert _subjects(env) == [f"repo:acme/tpuray:environment:{env}"]


def _place_project(scope: str, where: str) -> str | None:
    """The project a grant's place lies in; None for a billing account (outside every project)."""
    if scope == "project":
        return where
    if scope == "bucket":
        return next(foundation(e).project for e in ENVS if where in foundation(e).buckets)
    if scope == "repository":
        return where.split("/")[1]
    if scope == "service account":
        return where.split("@")[1].removesuffix(".iam.gserviceaccount.com")
    if scope == "KMS key":
        return where.split("/")[1]
    assert scope == "billing account", scope
    return None


@pytest.mark.parametrize("env", ENVS)
def test_each_deploy_account_holds_roles_in_its_own_project_only(env: str) -> None:
    elsewhere = [
        f"{g.role} on {g.scope} {g.where} ({g.resource})"
        for g in grants(env, DEPLOY)
        if _place_project(g.scope, g.where) not in (PROJECTS[env], None)
    ]
    assert elsewhere == []


PROJECT_WIDE_ACCOUNT_ROLES = {
    "roles/iam.serviceAccountAdmin",
    "roles/iam.serviceAccountUser",
    "roles/iam.serviceAccountTokenCreator",
}


@pytest.mark.parametrize("env", ENVS)
def test_the_deploy_account_holds_service_account_roles_only_on_the_accounts_the_stack_uses(env: str) -> None:
    on_accounts = sorted((g.where, g.role) for g in grants(env, DEPLOY) if g.scope == "service account")
    on_project = [g.role for g in grants(env, DEPLOY) if g.scope == "project" and g.role in PROJECT_WIDE_ACCOUNT_ROLES]
    p = PROJECTS[env]
    assert on_project == []
    assert on_accounts == [
        (f"tpuray-{env}-nodes@{p}.iam.gserviceaccount.com", "roles/iam.serviceAccountUser"),
        (f"tpuray-{env}-ray@{p}.iam.gserviceaccount.com", "roles/iam.serviceAccountAdmin"),
        (f"tpuray-{env}-serve@{p}.iam.gserviceaccount.com", "roles/iam.serviceAccountAdmin"),
    ]


def test_the_deploy_roles_variable_refuses_a_project_wide_service_account_role() -> None:
    from tests.foundation_model import MODULES, blocks

    (validation,) = blocks(MODULES / "ci-identity", "variable")["deploy_roles"]["validation"]
    for role in sorted(PROJECT_WIDE_ACCOUNT_ROLES):
        assert f"'{role}'" in _one(validation["condition"])


def _attribute_condition() -> str:
    """The provider's attribute condition as the CI home (prod) renders it."""
    ci = _ci("prod")
    body = resources(ci.folder, "google_iam_workload_identity_pool_provider")["github"]
    # local.environments is `join(", ", ["'dev'", ...])` of var.deploy_environments.
    environments = ", ".join(f"'{e}'" for e in ci.var("deploy_environments"))
    return evaluate(_one(body["attribute_condition"]).replace("${local.environments}", environments), ci)


def _accepts(claims: dict[str, Any]) -> bool:
    """Whether the provider takes a token with these claims: an error (a missing claim the
    condition needs) rejects it, as a false condition does."""
    env = celpy.Environment()
    program = env.program(env.compile(_attribute_condition()))
    try:
        return bool(program.evaluate({"assertion": celpy.json_to_cel(claims)}))
    except celpy.CELEvalError:
        return False


def test_the_attribute_condition_names_the_repository_and_the_ref() -> None:
    assert _attribute_condition() == (
        "assertion.repository == 'acme/tpuray' && ((assertion.event_name == 'pull_request' && "
        "assertion.ref.startsWith('refs/pull/')) || (assertion.environment in ['dev', 'staging', 'prod'] && "
        "assertion.ref == 'refs/heads/main'))"
    )


MAIN_DEV = {"repository": "acme/tpuray", "ref": "refs/heads/main", "event_name": "push", "environment": "dev"}


def test_a_deploy_of_main_in_its_environment_is_accepted() -> None:
    assert _accepts(MAIN_DEV)
    assert _accepts({**MAIN_DEV, "event_name": "workflow_dispatch", "environment": "prod"})


def test_a_job_on_another_branch_that_names_a_deploy_environment_is_refused() -> None:
    # The finding: `environment: dev` on any branch was enough for the deploy account.
    assert not _accepts({**MAIN_DEV, "ref": "refs/heads/feature/x"})
    assert not _accepts({**MAIN_DEV, "ref": "refs/tags/v1.0.0", "environment": "prod"})


def test_a_pull_request_job_is_accepted_without_an_environment() -> None:
    assert _accepts({"repository": "acme/tpuray", "ref": "refs/pull/42/merge", "event_name": "pull_request"})


def test_a_job_of_another_repository_or_an_undeclared_environment_is_refused() -> None:
    assert not _accepts({**MAIN_DEV, "repository": "evil/tpuray"})
    assert not _accepts({**MAIN_DEV, "environment": "sandbox"})
    assert not _accepts({"repository": "acme/tpuray", "ref": "refs/heads/main", "event_name": "push"})


def test_github_environment_variables_name_each_environments_own_deploy_account() -> None:
    # What `gh variable set --env ENV` takes (docs/ci.md): the deploy jobs read it as vars.GCP_DEPLOY_SERVICE_ACCOUNT.
    from tests.foundation_model import blocks

    outputs = blocks(foundation("dev").root.folder, "output")
    value = _one(outputs["github_environment_variables"]["value"])
    assert re.findall(r"'(\w+)': '\$\{([\w.\[\]]+)\}'", value) == [
        ("GCP_DEPLOY_SERVICE_ACCOUNT", "module.ci_identity.deploy_email"),
        ("PULUMI_BACKEND_URL", "module.pulumi_state.pulumi_backend_url"),
    ]
