"""The policy pack, through its analyzer (the path the Pulumi CLI uses): one good and one
bad fixture per rule, enforcement per environment, and the stacks in stacks/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import STACKS, mocked

from tests.test_policy_branches import MESSAGES
from tpuray.policies import RULES, RULES_BY_NAME
from tpuray.policies.analyzer import (
    InProcessAnalyzer,
    PolicyConfigError,
    Target,
    Violation,
    analyze,
    config_file,
    load_config_file,
    urn,
)
from tpuray.policies.core import Resource
from tpuray.policies.evaluate import check_manifests as check
from tpuray.policies.evaluate import check_stack as policy_violations

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "policies"
BAD = sorted(p.stem for p in (FIXTURES / "bad").glob("*.yaml"))
STACK_BAD = sorted(p.stem.removeprefix("bad-") for p in (FIXTURES / "stack").glob("bad-*.yaml"))


def stack_targets(path: Path) -> list[Target]:
    items: list[dict[str, Any]] = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)  # libyaml: large files
    return [Target(Resource(i["type"], i["name"], i["inputs"], urn("fixture", i["type"], i["name"]))) for i in items]


def analyze_stack_fixture(path: Path, environment: str = "prod") -> list[Violation]:
    config = load_config_file(config_file(environment))
    return analyze(InProcessAnalyzer(), stack_targets(path), config, {"ray-version-pinned": {"rayVersion": "2.60.0"}})


def fired(violations: list[Violation], level: str = "mandatory") -> set[str]:
    return {v.policy for v in violations if v.level == level}


# ---------------------------------------------------------------------------- the rule set


def test_every_rule_has_a_bad_fixture() -> None:
    # Per rule; per code path is measured: `make test` holds tpuray/policies/ at 100 % branch
    # coverage (tests/coverage_gate.py), and test_policy_branches.py runs the per-path fixtures.
    per_path = {p.parent.name for p in [*FIXTURES.glob("bad/*/*.yaml"), *FIXTURES.glob("stack/*/bad-*.yaml")]}
    # Fires only against a KubeRay version an environment records in its policy config, which
    # the fixture files (run with the files in policies/) do not: tests/test_kuberay_versions.py.
    config_driven = {"kuberay-field-version"}
    assert set(BAD) | set(STACK_BAD) | per_path | config_driven == set(RULES_BY_NAME)
    assert (FIXTURES / "stack" / "good.yaml").is_file() and list((FIXTURES / "good").glob("*.yaml"))


def test_every_rule_has_a_stable_kebab_case_name_and_a_one_line_description() -> None:
    for rule in RULES:
        assert rule.name == rule.name.lower() and " " not in rule.name, rule.name
        assert rule.description and "\n" not in rule.description and rule.description.endswith("."), rule.name


def test_every_kubernetes_rule_also_runs_in_check_and_every_gcp_rule_only_on_stacks() -> None:
    gcp_only = {r.name for r in RULES if any(t.startswith("gcp:") for t in r.types)}
    assert gcp_only and not any(RULES_BY_NAME[n].kubernetes for n in gcp_only)


# ---------------------------------------------------------------------------- Kubernetes fixtures


def test_good_kubernetes_fixtures_raise_no_violation() -> None:
    assert check([str(FIXTURES / "good")], "prod", "2.60.0", []) == []


@pytest.mark.parametrize("rule", BAD)
def test_bad_kubernetes_fixture_fires_exactly_its_rule(rule: str) -> None:
    violations = check([str(FIXTURES / "bad" / f"{rule}.yaml")], "prod", "2.60.0", [])
    assert fired(violations) == {rule}
    assert [v.message for v in violations] == MESSAGES[f"rule-file/{rule}"]


@pytest.mark.parametrize("rule", BAD)
def test_violation_message_names_the_resource_and_a_fix(rule: str) -> None:
    for v in check([str(FIXTURES / "bad" / f"{rule}.yaml")], "prod", "2.60.0", []):
        assert v.resource.split("/")[-1] in v.message
        assert ":" in v.message and len(v.message) > 40


# ---------------------------------------------------------------------------- stack fixtures


def test_good_stack_fixture_raises_no_violation() -> None:
    assert analyze_stack_fixture(FIXTURES / "stack" / "good.yaml") == []


@pytest.mark.parametrize("rule", STACK_BAD)
def test_bad_stack_fixture_fires_exactly_its_rule(rule: str) -> None:
    violations = analyze_stack_fixture(FIXTURES / "stack" / f"bad-{rule}.yaml")
    assert fired(violations) == {rule}
    assert [v.message for v in violations] == MESSAGES[f"stack-file/{rule}"]


def test_stack_rule_violation_is_attributed_to_the_resource_it_blames() -> None:
    (v,) = analyze_stack_fixture(FIXTURES / "stack" / "bad-tpu-node-pool-slice-shape.yaml")
    assert v.resource == "NodePool v6e-0" and "set the node count to 4" in v.message


# ---------------------------------------------------------------------------- enforcement per stack


def test_spot_without_fallback_is_advisory_in_dev_and_mandatory_in_prod() -> None:
    path = FIXTURES / "stack" / "bad-spot-has-fallback.yaml"
    assert fired(analyze_stack_fixture(path, "dev"), "advisory") == {"spot-has-fallback"}
    assert fired(analyze_stack_fixture(path, "dev")) == set()
    assert fired(analyze_stack_fixture(path, "prod")) == {"spot-has-fallback"}


def test_policy_config_files_name_only_policies_of_the_pack() -> None:
    for environment in STACKS:
        config = load_config_file(config_file(environment))
        assert set(config) - {"all"} <= set(RULES_BY_NAME), environment


def test_policy_config_with_an_unknown_policy_is_rejected_like_the_cli_does() -> None:
    with pytest.raises(PolicyConfigError, match="not a policy of this pack"):
        analyze(InProcessAnalyzer(), [], {"no-such-rule": "mandatory"})


def test_policy_config_property_of_the_wrong_type_is_rejected() -> None:
    with pytest.raises(PolicyConfigError, match="tpu-image"):
        analyze(InProcessAnalyzer(), [], {"tpu-image": {"allowedTpuImages": "vllm/*"}})


def test_disabled_policy_does_not_run() -> None:
    path = FIXTURES / "stack" / "bad-gke-no-legacy-abac.yaml"
    config = {"gke-no-legacy-abac": "disabled"}
    assert analyze(InProcessAnalyzer(), stack_targets(path), config) == []


def test_allowed_tpu_image_pattern_accepts_a_non_rayproject_image() -> None:
    bad = str(FIXTURES / "bad" / "tpu-image.yaml")
    assert fired(check([bad], "prod", "2.60.0", ["rayproject/ray:2.60.0-py312"])) == set()


def test_unknown_values_during_preview_do_not_count_as_the_default_service_account() -> None:
    path = FIXTURES / "stack" / "good.yaml"
    targets = stack_targets(path)
    for t in targets:
        if t.resource.type == "gcp:container/nodePool:NodePool":
            # what the engine sends for an output not yet known (pulumi_policy.proxy.UNKNOWN_STRING_VALUE)
            t.resource.props["nodeConfig"]["serviceAccount"] = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
    assert analyze(InProcessAnalyzer(), targets, {}, {"ray-version-pinned": {"rayVersion": "2.60.0"}}) == []


# ---------------------------------------------------------------------------- the stacks


@pytest.mark.parametrize("stack", STACKS)
def test_stack_has_no_mandatory_violation(stack: str) -> None:
    violations = policy_violations(mocked(stack))
    assert fired(violations) == set(), [v.message for v in violations]


# ---------------------------------------------------------------------------- branch fixtures
# One file per further branch of a rule (tests/fixtures/policies/branches/<rule>--<case>.yaml); its
# header names every rule it fires and the upstream rule it mirrors.

BRANCHES = sorted(p.stem for p in (FIXTURES / "branches").glob("*.yaml"))


@pytest.mark.parametrize("case", BRANCHES)
def test_branch_fixture_fires_the_rules_its_header_names(case: str) -> None:
    path = FIXTURES / "branches" / f"{case}.yaml"
    first, second = path.read_text().splitlines()[:2]
    expected = set(first.removeprefix("# branch fixture: fires ").split(", "))
    assert case.split("--")[0] in expected and second.startswith("# mirrors ")
    violations = check([str(path)], "prod", "2.60.0", [])
    assert fired(violations) == expected
    assert [v.message for v in violations] == MESSAGES[f"branch/{case}"]


def test_every_branch_fixture_names_an_existing_rule() -> None:
    assert {case.split("--")[0] for case in BRANCHES} <= set(RULES_BY_NAME)


def test_tpu_as_a_limit_only_is_valid_as_kubernetes_copies_it_into_the_request() -> None:
    assert check([str(FIXTURES / "good" / "raycluster-tpu-limit-only.yaml")], "prod", "2.60.0", []) == []


def test_kuberay_name_rule_does_not_judge_a_name_unknown_during_preview() -> None:
    from tpuray.policies.core import UNKNOWN

    job = yaml.safe_load((FIXTURES / "good" / "rayjob.yaml").read_text())
    job["metadata"]["name"] = UNKNOWN
    rule = RULES_BY_NAME["kuberay-object-name"]
    assert list(rule.resource_check(Resource("kubernetes:ray.io/v1:RayJob", "train-job", job), {})) == []


def test_crd_rules_ignore_a_kind_no_packaged_crd_defines() -> None:
    cron = {"apiVersion": "ray.io/v1", "kind": "RayCronJob", "metadata": {"name": "nightly"}, "spec": {"bogus": 1}}
    resource = Resource("kubernetes:ray.io/v1:RayCronJob", "nightly", cron)
    assert [list(RULES_BY_NAME[n].resource_check(resource, {})) for n in ("crd-schema", "crd-validation-rules")] == [
        [],
        [],
    ]
