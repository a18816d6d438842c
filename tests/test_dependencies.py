"""The dependency declarations and the two lock files agree (Makefile `lock`, pyproject.toml).

pyproject.toml's `dependencies` are what the product (the tpuray CLI, the Pulumi program, the
policy pack, the Ray apps) imports at run time; requirements.lock pins exactly their closure.
requirements-dev.in names what the tests and tools add; requirements-dev.lock pins exactly its
closure, at requirements.lock's versions for every package the two share. The closures are
walked through the installed distributions' own metadata (Requires-Dist with its markers and
extras), the environment `make venv` builds from the two locks.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import tomllib
import yaml
from packaging.requirements import Requirement

from tests.conftest import REPO

PRODUCT_LOCK = REPO / "requirements.lock"
DEV_LOCK = REPO / "requirements-dev.lock"
DEV_IN = REPO / "requirements-dev.in"
# The product's code: what `make venv`'s `-e .` ships plus the policy pack's entry point.
PRODUCT_DIRS = ("tpuray", "infra", "policies", "ray_apps")
# Import names that are this repository's own: its packages and the vLLM stand-ins the LLM
# emulator puts on the path (tpuray/llm_emulator/stubs/).
FIRST_PARTY = {"tpuray", "infra", "policies", "ray_apps", "vllm", "_tpuray_fastapi_cbv"}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")

# name -> (version, Requires-Dist lines) of one distribution.
Metadata = Callable[[str], tuple[str, list[str]]]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(text: str) -> dict[str, str]:
    """normalised name -> version of every `name==version` line of a lock file."""
    return {norm(m[1]): m[2] for line in text.splitlines() if (m := PIN.match(line))}


def requirements(lines: Iterable[str]) -> list[Requirement]:
    """The requirements of a requirements file's or pyproject's lines (options and comments dropped)."""
    out = []
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            out.append(Requirement(line))
    return out


def declared() -> list[Requirement]:
    return requirements(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"])


def installed(name: str) -> tuple[str, list[str]]:
    dist = md.distribution(name)
    return dist.version, list(dist.requires or [])


def _applies(req: Requirement, extras: Iterable[str]) -> bool:
    return req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *extras))


def closure(roots: Iterable[Requirement], metadata: Metadata) -> set[str]:
    """Every distribution the roots pull in (their extras and markers honoured), roots included."""
    extras: dict[str, set[str]] = {}
    todo = [(r, ()) for r in roots]
    while todo:
        req, parent_extras = todo.pop()
        if not _applies(req, parent_extras):
            continue
        name = norm(req.name)
        if name in extras and req.extras <= extras[name]:
            continue
        extras.setdefault(name, set()).update(req.extras)
        _, requires = metadata(name)
        todo += [(Requirement(r), tuple(extras[name])) for r in requires]
    return set(extras)


def pin_problems(lock: str, roots: list[Requirement], locked: dict[str, str]) -> list[str]:
    """One line per declared package the lock does not pin, or pins outside its declared range."""
    problems = []
    for req in roots:
        version = locked.get(norm(req.name))
        if version is None:
            problems.append(f"{req.name} is declared but not pinned in {lock}")
        elif not req.specifier.contains(version, prereleases=True):
            problems.append(f"{lock} pins {norm(req.name)}=={version}, outside the declared {req}")
    return problems


def closure_problems(lock: str, roots: list[Requirement], locked: dict[str, str], metadata: Metadata) -> list[str]:
    """One line per package the roots pull in that the lock lacks, and per pin nothing pulls in."""
    reached = closure(roots, metadata)
    return [
        f"{name} is pulled in by the declared packages but not pinned in {lock}"
        for name in sorted(reached - set(locked))
    ] + [f"{lock} pins {name}, which no declared package pulls in" for name in sorted(set(locked) - reached)]


def disagreements(product: dict[str, str], dev: dict[str, str]) -> list[str]:
    return [
        f"{name}: requirements.lock pins {product[name]}, requirements-dev.lock pins {dev[name]}"
        for name in sorted(set(product) & set(dev))
        if product[name] != dev[name]
    ]


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from google.cloud import storage` may name a module: owner() tries the longest first.
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


@functools.cache
def _files(dist: str) -> tuple[str, ...]:
    return tuple(str(f) for f in md.distribution(dist).files or [])


def owner(module: str, candidates: dict[str, list[str]]) -> str | None:
    """The installed distribution that ships `module` (namespace packages such as google.* too)."""
    parts = module.split(".")
    if len(candidates.get(parts[0], [])) == 1:
        return norm(candidates[parts[0]][0])
    for depth in range(len(parts), 0, -1):
        prefix = "/".join(parts[:depth])
        for dist in candidates.get(parts[0], []):
            if any(f == prefix + ".py" or f.startswith(prefix + "/") for f in _files(dist)):
                return norm(dist)
    return None


# ----------------------------------------------------------------------------------- the files


def test_every_declared_dependency_is_pinned_in_requirements_lock_within_its_range() -> None:
    assert pin_problems("requirements.lock", declared(), pins(PRODUCT_LOCK.read_text())) == []


def test_requirements_lock_pins_exactly_what_the_declared_dependencies_pull_in() -> None:
    assert closure_problems("requirements.lock", declared(), pins(PRODUCT_LOCK.read_text()), installed) == []


def test_every_tool_of_requirements_dev_in_is_pinned_in_requirements_dev_lock_within_its_range() -> None:
    roots = requirements(DEV_IN.read_text().splitlines())
    assert pin_problems("requirements-dev.lock", roots, pins(DEV_LOCK.read_text())) == []


def test_requirements_dev_lock_pins_exactly_what_requirements_dev_in_pulls_in() -> None:
    roots = requirements(DEV_IN.read_text().splitlines())
    assert closure_problems("requirements-dev.lock", roots, pins(DEV_LOCK.read_text()), installed) == []


def test_no_tool_of_requirements_dev_in_is_in_requirements_lock() -> None:
    tools = {norm(r.name) for r in requirements(DEV_IN.read_text().splitlines())}
    assert "pytest" in tools and "ruff" in tools
    assert sorted(tools & set(pins(PRODUCT_LOCK.read_text()))) == []


def test_requirements_dev_in_resolves_under_requirements_lock() -> None:
    assert "-c requirements.lock" in DEV_IN.read_text().splitlines()


def test_the_two_locks_pin_every_package_they_share_at_one_version() -> None:
    product, dev = pins(PRODUCT_LOCK.read_text()), pins(DEV_LOCK.read_text())
    assert set(product) & set(dev), "the locks share no package: the check below would be empty"
    assert disagreements(product, dev) == []


def test_the_installed_environment_is_the_two_locks() -> None:
    wanted = {**pins(PRODUCT_LOCK.read_text()), **pins(DEV_LOCK.read_text())}
    found = {norm(name): installed(name)[0] for name in wanted}
    assert {n: (v, found[n]) for n, v in wanted.items() if found[n] != v} == {}


def test_every_package_the_product_imports_is_a_declared_dependency() -> None:
    candidates = md.packages_distributions()
    direct = {norm(r.name) for r in declared()}
    undeclared = []
    for root in PRODUCT_DIRS:
        for path in sorted((REPO / root).rglob("*.py")):
            for module in sorted(_imports(path)):
                top = module.split(".")[0]
                if top in FIRST_PARTY or top in sys.stdlib_module_names:
                    continue
                dist = owner(module, candidates)
                if dist not in direct:
                    undeclared.append(
                        f"{path.relative_to(REPO)}: import {module} ({dist or 'no installed distribution'})"
                    )
    assert sorted(set(undeclared)) == []


def test_make_venv_syncs_to_both_locks_and_uv_comes_from_the_dev_lock() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert "LOCKS := requirements.lock requirements-dev.lock" in makefile
    assert "$(BIN)/uv pip sync --quiet --compile-bytecode --python $(BIN)/python $(LOCKS)" in makefile
    assert """pip install --quiet "$$(grep '^uv==' requirements-dev.lock)\"""" in makefile
    assert "uv" in pins(DEV_LOCK.read_text())


def test_every_workflow_cache_key_covers_both_locks() -> None:
    paths = {}
    for workflow in sorted((REPO / ".github" / "workflows").glob("*.yml")):
        for job in yaml.safe_load(workflow.read_text())["jobs"].values():
            for step in job.get("steps", []):
                if "cache-dependency-path" in step.get("with", {}) and step["with"].get("cache") == "pip":
                    paths[workflow.name] = step["with"]["cache-dependency-path"].split()
    assert paths == {
        "ci.yml": ["requirements.lock", "requirements-dev.lock"],
        "preview.yml": ["requirements.lock", "requirements-dev.lock"],
        "pulumi.yml": ["requirements.lock", "requirements-dev.lock"],
    }


# ------------------------------------------------------------------------------ the checks


FAKE = {
    "app": ("1.0", ["lib>=2", "extra-only; extra == 'full'", "py27-only; python_version < '3'"]),
    "lib": ("2.1", []),
    "extra-only": ("0.3", ["deep"]),
    "deep": ("5", []),
    "py27-only": ("1", []),
}


def fake(name: str) -> tuple[str, list[str]]:
    return FAKE[name]


def test_closure_follows_requested_extras_and_skips_other_markers() -> None:
    assert closure([Requirement("app")], fake) == {"app", "lib"}
    assert closure([Requirement("app[full]")], fake) == {"app", "lib", "extra-only", "deep"}


def test_pin_problems_names_a_declared_package_missing_from_the_lock() -> None:
    assert pin_problems("requirements.lock", [Requirement("app"), Requirement("lib")], {"lib": "2.1"}) == [
        "app is declared but not pinned in requirements.lock"
    ]


def test_pin_problems_names_a_pin_outside_the_declared_range() -> None:
    assert pin_problems("requirements.lock", [Requirement("app>=1.1")], {"app": "1.0"}) == [
        "requirements.lock pins app==1.0, outside the declared app>=1.1"
    ]


def test_closure_problems_names_a_pulled_in_package_the_lock_lacks() -> None:
    assert closure_problems("requirements.lock", [Requirement("app")], {"app": "1.0"}, fake) == [
        "lib is pulled in by the declared packages but not pinned in requirements.lock"
    ]


def test_closure_problems_names_a_pin_nothing_declared_pulls_in() -> None:
    locked = {"app": "1.0", "lib": "2.1", "pytest": "9.2.0"}
    assert closure_problems("requirements.lock", [Requirement("app")], locked, fake) == [
        "requirements.lock pins pytest, which no declared package pulls in"
    ]


def test_closure_problems_finds_nothing_when_the_lock_is_the_closure() -> None:
    assert (
        closure_problems(
            "requirements.lock",
            [Requirement("app[full]")],
            {"app": "1.0", "lib": "2.1", "extra-only": "0.3", "deep": "5"},
            fake,
        )
        == []
    )


def test_disagreements_names_a_package_the_locks_pin_at_two_versions() -> None:
    assert disagreements({"packaging": "26.4", "rich": "15.0.0"}, {"packaging": "24.0", "pytest": "9.2.0"}) == [
        "packaging: requirements.lock pins 26.4, requirements-dev.lock pins 24.0"
    ]


def test_pins_reads_uv_annotated_lines_and_normalises_names() -> None:
    text = "# header\n#    make lock\nPyYAML==6.0.4\n    # via pulumi\npulumi_gcp==10.2.0\n"
    assert pins(text) == {"pyyaml": "6.0.4", "pulumi-gcp": "10.2.0"}


def test_one_installed_distribution_provides_the_hcl2_module_the_terraform_tests_read() -> None:
    # bc-python-hcl2 (checkov's) and python-hcl2 both install `hcl2`, with different output
    # formats; with both, the one installed last wins and the foundation tests flip.
    assert md.packages_distributions()["hcl2"] == ["bc-python-hcl2"]
