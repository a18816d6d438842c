"""One fixture per code path of every policy rule (tests/fixtures/policies/make_fixtures.py).

bad/<rule>/<case>.yaml and stack/<rule>/bad-<case>.yaml fire exactly <rule>, with a message
containing the fixture's `# expect:` line; good/<rule>/<case>.yaml and
stack/<rule>/good-<case>.yaml fire nothing. Whether every branch has a fixture is measured,
not listed: `make test` fails below 100 % branch coverage of tpuray/policies/
(tests/coverage_gate.py names the lines no test reaches).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tpuray.policies import RULES_BY_NAME
from tpuray.policies.analyzer import InProcessAnalyzer, Target, Violation, analyze, config_file, load_config_file, urn
from tpuray.policies.core import Resource
from tpuray.policies.evaluate import check_manifests as check

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "policies"
BAD = sorted((FIXTURES / "bad").glob("*/*.yaml"))
GOOD = sorted((FIXTURES / "good").glob("*/*.yaml"))
STACK_BAD = sorted((FIXTURES / "stack").glob("*/bad-*.yaml"))
STACK_GOOD = sorted((FIXTURES / "stack").glob("*/good-*.yaml"))


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def expected(path: Path) -> str:
    line = next(ln for ln in path.read_text().splitlines() if ln.startswith("# expect: "))
    return line.removeprefix("# expect: ")


def analyze_stack(path: Path) -> list[Violation]:
    items = yaml.safe_load(path.read_text())
    targets = [Target(Resource(i["type"], i["name"], i["inputs"], urn("fixture", i["type"], i["name"]))) for i in items]
    config = load_config_file(config_file("prod"))
    return analyze(InProcessAnalyzer(), targets, config, {"ray-version-pinned": {"rayVersion": "2.60.0"}})


def assert_fires_only(rule: str, violations: list[Violation], expect: str) -> None:
    assert {v.policy for v in violations} == {rule}, [(v.policy, v.message) for v in violations]
    assert any(expect in v.message for v in violations), [v.message for v in violations]


def test_fixture_folders_are_named_after_rules() -> None:
    folders = {p.parent.name for p in [*BAD, *GOOD, *STACK_BAD, *STACK_GOOD]}
    assert folders <= set(RULES_BY_NAME), folders - set(RULES_BY_NAME)


@pytest.mark.parametrize("path", BAD, ids=_id)
def test_bad_kubernetes_path_fires_its_rule_with_its_message(path: Path) -> None:
    assert_fires_only(path.parent.name, check([str(path)], "prod", "2.60.0", []), expected(path))


@pytest.mark.parametrize("path", GOOD, ids=_id)
def test_good_kubernetes_variant_fires_nothing(path: Path) -> None:
    assert check([str(path)], "prod", "2.60.0", []) == []


@pytest.mark.parametrize("path", STACK_BAD, ids=_id)
def test_bad_stack_path_fires_its_rule_with_its_message(path: Path) -> None:
    assert_fires_only(path.parent.name, analyze_stack(path), expected(path))


@pytest.mark.parametrize("path", STACK_GOOD, ids=_id)
def test_good_stack_variant_fires_nothing(path: Path) -> None:
    assert analyze_stack(path) == []
