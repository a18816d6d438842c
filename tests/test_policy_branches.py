"""One fixture per code path of every policy rule (tests/fixtures/policies/make_fixtures.py).

bad/<rule>/<case>.yaml and stack/<rule>/bad-<case>.yaml fire exactly <rule>, with a message
containing the fixture's `# expect:` line; good/<rule>/<case>.yaml and
stack/<rule>/good-<case>.yaml fire nothing. Whether every branch has a fixture is measured,
not listed: `make test` fails below 100 % branch coverage of tpuray/policies/
(tests/coverage_gate.py names the lines no test reaches).

The complete messages each bad fixture gives (here and in test_policies.py) are recorded in fixtures/policies/messages.json
and compared word for word (the `# expect:` line is the part a reader looks for). Rewrite it
only when a message changes on purpose: `.venv/bin/python -m tests.test_policy_branches`.
"""

from __future__ import annotations

import json
import sys
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
MESSAGES_FILE = FIXTURES / "messages.json"
MESSAGES: dict[str, list[str]] = json.loads(MESSAGES_FILE.read_text()) if MESSAGES_FILE.exists() else {}


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def expected(path: Path) -> str:
    line = next(ln for ln in path.read_text().splitlines() if ln.startswith("# expect: "))
    return line.removeprefix("# expect: ")


def analyze_stack(path: Path) -> list[Violation]:
    items = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)  # libyaml: the stack fixtures are large
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
    violations = check([str(path)], "prod", "2.60.0", [])
    assert_fires_only(path.parent.name, violations, expected(path))
    assert [v.message for v in violations] == MESSAGES[f"kubernetes/{_id(path)}"]


@pytest.mark.parametrize("path", GOOD, ids=_id)
def test_good_kubernetes_variant_fires_nothing(path: Path) -> None:
    assert check([str(path)], "prod", "2.60.0", []) == []


@pytest.mark.parametrize("path", STACK_BAD, ids=_id)
def test_bad_stack_path_fires_its_rule_with_its_message(path: Path) -> None:
    violations = analyze_stack(path)
    assert_fires_only(path.parent.name, violations, expected(path))
    assert [v.message for v in violations] == MESSAGES[f"stack/{_id(path)}"]


@pytest.mark.parametrize("path", STACK_GOOD, ids=_id)
def test_good_stack_variant_fires_nothing(path: Path) -> None:
    assert analyze_stack(path) == []


def recorded_messages() -> dict[str, list[str]]:
    out = {f"kubernetes/{_id(p)}": [v.message for v in check([str(p)], "prod", "2.60.0", [])] for p in BAD}
    out.update({f"stack/{_id(p)}": [v.message for v in analyze_stack(p)] for p in STACK_BAD})
    # test_policies.py: bad/<rule>.yaml, stack/bad-<rule>.yaml and branches/<rule>--<case>.yaml
    for p in sorted((FIXTURES / "bad").glob("*.yaml")):
        out[f"rule-file/{p.stem}"] = [v.message for v in check([str(p)], "prod", "2.60.0", [])]
    for p in sorted((FIXTURES / "stack").glob("bad-*.yaml")):
        out[f"stack-file/{p.stem.removeprefix('bad-')}"] = [v.message for v in analyze_stack(p)]
    for p in sorted((FIXTURES / "branches").glob("*.yaml")):
        out[f"branch/{p.stem}"] = [v.message for v in check([str(p)], "prod", "2.60.0", [])]
    return out


if __name__ == "__main__":
    MESSAGES_FILE.write_text(json.dumps(recorded_messages(), indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {MESSAGES_FILE.relative_to(Path.cwd())}", file=sys.stderr)
