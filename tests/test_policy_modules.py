"""Each rules module's rules, alone, on every policy fixture: they fire on the fixtures of their
own rules, with the recorded messages (fixtures/policies/messages.json), and on no other
fixture, good or bad; each finding blames a resource its message names.

The per-fixture tests (test_policy_branches.py, test_policies.py) run the whole pack on one
fixture each; these run one module's rules on all of them, so a rule that starts firing on
another rule's fixture is caught by its own module's test. `make mutation` runs a module's
mutants against its rules' per-fixture tests and this test (benchmarks/mutation_run.py), not
against every other rule's fixtures.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import tpuray.policies as pack
from tests.test_policy_branches import MESSAGES
from tpuray.policies import RULES
from tpuray.policies.analyzer import InProcessAnalyzer, Target, Violation, analyze, config_file, load_config_file, urn
from tpuray.policies.core import Resource
from tpuray.policies.manifests import load

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "policies"
MODULES = sorted(name for name in vars(pack) if name.startswith("rules_"))


@dataclass(frozen=True)
class Fixture:
    path: Path
    stack: bool  # a stack fixture (resources with inputs) or Kubernetes YAML for `tpuray check`
    fires: frozenset[str]  # the rules the whole pack fires on it
    key: str | None  # its entry in messages.json (None: fires nothing)


def _header_rules(path: Path) -> frozenset[str]:
    return frozenset(path.read_text().splitlines()[0].removeprefix("# branch fixture: fires ").split(", "))


def fixtures() -> list[Fixture]:
    out = [
        Fixture(p, False, frozenset({p.parent.name}), f"kubernetes/{p.parent.name}/{p.stem}")
        for p in FIXTURES.glob("bad/*/*.yaml")
    ]
    out += [Fixture(p, False, frozenset({p.stem}), f"rule-file/{p.stem}") for p in FIXTURES.glob("bad/*.yaml")]
    out += [Fixture(p, False, _header_rules(p), f"branch/{p.stem}") for p in FIXTURES.glob("branches/*.yaml")]
    out += [
        Fixture(p, False, frozenset(), None) for p in [*FIXTURES.glob("good/*.yaml"), *FIXTURES.glob("good/*/*.yaml")]
    ]
    out += [
        Fixture(p, True, frozenset({p.parent.name}), f"stack/{p.parent.name}/{p.stem}")
        for p in FIXTURES.glob("stack/*/bad-*.yaml")
    ]
    out += [
        Fixture(p, True, frozenset({p.stem.removeprefix("bad-")}), f"stack-file/{p.stem.removeprefix('bad-')}")
        for p in FIXTURES.glob("stack/bad-*.yaml")
    ]
    out += [
        Fixture(p, True, frozenset(), None)
        for p in [FIXTURES / "stack" / "good.yaml", *FIXTURES.glob("stack/*/good-*.yaml")]
    ]
    return sorted(out, key=lambda f: str(f.path))


@functools.cache
def _targets(path: Path, stack: bool) -> list[Target]:
    """A fixture's resources, read once per process (the rules do not change them: the analyzer
    hands each rule its own copy)."""
    if not stack:
        return load([str(path)])
    items = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
    return [Target(Resource(i["type"], i["name"], i["inputs"], urn("fixture", i["type"], i["name"]))) for i in items]


def run_only(client: InProcessAnalyzer, names: set[str], fixture: Fixture) -> list[Violation]:
    """The pack on one fixture as test_policy_branches runs it (prod levels, Ray 2.60.0, no
    allowed images), every rule not in `names` disabled."""
    overrides: dict[str, Any] = {r.name: {"enforcementLevel": "disabled"} for r in RULES if r.name not in names}
    overrides.setdefault("ray-version-pinned", {})["rayVersion"] = "2.60.0"
    targets = _targets(fixture.path, fixture.stack)
    if not fixture.stack:
        for rule in RULES:
            if not rule.kubernetes:
                overrides[rule.name] = {"enforcementLevel": "disabled"}
        overrides.setdefault("ray-version-pinned", {})["allowedTpuImages"] = []
        overrides.setdefault("tpu-image", {})["allowedTpuImages"] = []
        overrides.setdefault("serve-llm-vllm-image", {})["pendingBuildsRefusedAtUp"] = False
    return analyze(client, targets, load_config_file(config_file("prod")), overrides)


def test_every_fixture_is_found() -> None:
    found = fixtures()
    assert (len(found), sum(f.stack for f in found)) == (220, 63)


@pytest.mark.parametrize("module", MODULES)
def test_a_modules_rules_fire_on_their_own_fixtures_only(module: str) -> None:
    names = {r.name for r in getattr(pack, module).RULES}
    client, wrong = InProcessAnalyzer(), []
    for fixture in fixtures():
        violations = run_only(client, names, fixture)
        mine = fixture.fires & names
        fired = {v.policy for v in violations}
        messages = [v.message for v in violations]
        expected = MESSAGES[fixture.key] if fixture.key else []
        if mine == fixture.fires:
            ok = messages == expected
        else:
            ok = fired == mine and all(m in expected for m in messages)
        # Each finding blames one resource (a stack rule: by its urn), which the message names.
        blamed = [v.resource for v in violations if v.resource == "stack" or v.resource.split("/")[-1] not in v.message]
        ok = ok and not blamed
        if not ok:
            wrong.append((str(fixture.path.relative_to(FIXTURES)), sorted(fired), messages))
    assert wrong == []
