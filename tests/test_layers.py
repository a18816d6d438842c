"""The layers of docs/architecture.md, held: no import circle among the project's modules (an
import inside a function counts; one under `if TYPE_CHECKING:` does not), and each layer imports
nothing above it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("tpuray", "infra", "ray_apps", "policies")

FLOOR = {"tpuray", "tpuray.catalog", "tpuray.capacity", "tpuray.labels", "tpuray.errors", "tpuray.paths"}
FLOOR |= {"ray_apps", "ray_apps.contracts"}
# layer prefix -> the prefixes it must never import. The config models sit below the desired
# state; tpuray.config.checks (parse_stack_config: every check, the desired state's derived-fact
# checks included) sits above both.
_READERS = ("infra", "tpuray.policies", "tpuray.preview", "tpuray.local", "tpuray.cost.table", "tpuray.commands")
FORBIDDEN = {
    **{
        f"tpuray.config.{model}": ("tpuray.desired", "tpuray.config.checks", *_READERS)
        for model in ("base", "cluster", "pools", "workloads", "schema", "files", "encoding", "queues")
    },
    "tpuray.config.checks": _READERS,
    "tpuray.desired": ("tpuray.config.checks", *_READERS),
}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


MODULES = _modules()


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines |= set(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _with_packages(module: str) -> list[str]:
    """Importing a.b.c runs a/__init__.py and a/b/__init__.py first: an edge to each of them too."""
    parts = module.split(".")
    return [p for p in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if p in MODULES]


def imports_of(module: str) -> Iterator[str]:
    """The project modules `module` imports, anywhere in its body but under TYPE_CHECKING."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    skipped = _type_checking_lines(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skipped:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            resolved = _resolve(target)
            for imported in _with_packages(resolved) if resolved else []:
                if imported != module and not module.startswith(imported + "."):
                    yield imported


def _graph() -> dict[str, set[str]]:
    return {m: set(imports_of(m)) for m in MODULES}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_the_import_graph_covers_the_package_and_the_program() -> None:
    graph = _graph()
    assert "tpuray.desired.state" in graph["infra.program"]
    assert "tpuray.config.schema" in graph["tpuray.desired.state"] or "tpuray.config" in graph["tpuray.desired.state"]


def test_no_module_imports_its_way_back_to_itself() -> None:
    assert _circles(_graph()) == []


def test_the_floor_imports_only_the_floor() -> None:
    graph = _graph()
    assert {m: sorted(graph[m] - FLOOR) for m in sorted(FLOOR) if graph[m] - FLOOR} == {}


def test_no_layer_imports_a_layer_above_it() -> None:
    graph = _graph()
    above = {
        module: sorted(t for t in targets if any(t == f or t.startswith(f + ".") for f in FORBIDDEN[layer]))
        for module, targets in graph.items()
        for layer in FORBIDDEN
        if module == layer or module.startswith(layer + ".")
    }
    assert {m: t for m, t in above.items() if t} == {}


def test_importing_a_submodule_imports_its_packages_first() -> None:
    assert "tpuray.config" in _graph()["tpuray.checks.gcp_names"]


def test_a_circle_is_found_when_two_modules_import_each_other() -> None:
    assert _circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
