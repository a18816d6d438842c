"""Offline diff of each stack's desired state between a git ref and the working tree.

Each side runs its own tree's `tpuray preview STACK --json` under the Pulumi mock engine
(base: the ref extracted with `git archive` into a temporary folder; head: the working
tree), in a process that imports that tree's tpuray and infra (forked from one that has
only the virtualenv's provider SDKs loaded, tpuray/preview/fork.py), so each side is
evaluated by its own program with the same mocks and the same virtualenv. Resources are
matched by (type, logical name); policy violations come from the preview's "violations" key
and cost from its "cost" key (an old ref without them has no violations, and its cost is
computed from its stack file with the head's cost model).

Length (about 450 lines, over the ~400 rule): the git side (refs, extraction), the comparison
of resources, violations and cost, and the report types are one pipeline that `tpuray diff`
and the CI preview comment both print; the pure comparison is what the mutation group
measures, the git and subprocess part is fenced from it.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpuray import errors
from tpuray.config import ConfigError, read_stack_file, stack_file_in, stack_names
from tpuray.config.checks import parse_stack_config
from tpuray.cost import table as costmod
from tpuray.preview import force_new
from tpuray.preview import fork as preview_fork

EXIT_MANDATORY = 1
EXIT_BAD_REF = 2
EXIT_INVALID = 2  # the head stack does not evaluate: bad config or inputs the provider SDK refuses
PREVIEW_TIMEOUT_S = 300

# Which changed inputs replace a Google resource instead of updating it: ForceNew read from the
# provider's source (tpuray/preview/force_new.py, tpuray/data/provider_force_new.yaml). Kubernetes
# objects are replaced when their identity changes.
K8S_REPLACE_FIELDS = ("apiVersion", "kind", "metadata.name", "metadata.namespace")


DiffError = errors.DiffError  # a problem with the request (unknown ref, not a git repository)


# ---------------------------------------------------------------------------- git


# pragma: no mutate start (git subprocesses: covered by test_diff.py on real refs)
def _git(repo: Path, *args: str, check: bool = True, binary: bool = False) -> Any:
    result = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=not binary)
    if check and result.returncode != 0:
        stderr = result.stderr if not binary else result.stderr.decode(errors="replace")
        raise DiffError(f"git {' '.join(args)} failed: {stderr.strip()}")
    return result


def repo_root(start: Path) -> Path:
    result = _git(start, "rev-parse", "--show-toplevel", check=False)
    if result.returncode != 0:
        raise DiffError(f"{start} is not inside a git repository; tpuray diff compares git refs")
    return Path(result.stdout.strip())


def _verify(repo: Path, ref: str) -> str | None:
    result = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    return result.stdout.strip() or None if result.returncode == 0 else None


def resolve_ref(repo: Path, ref: str) -> str:
    """The commit of `ref`; on a shallow clone, fetched from origin first. Unknown -> DiffError."""
    sha = _verify(repo, ref)
    if sha:
        return sha
    remotes = _git(repo, "remote", check=False).stdout.split()
    tried = "it is not in this clone and the repository has no 'origin' remote"
    if "origin" in remotes:
        # A CI checkout is shallow and has only the PR head: fetch just the one commit.
        name = ref.removeprefix("origin/")
        fetched = _git(repo, "fetch", "--quiet", "--no-tags", "--depth=1", "origin", name, check=False)
        if fetched.returncode == 0:
            sha = _verify(repo, "FETCH_HEAD")
            if sha:
                return sha
        tried = (
            f"it is not in this clone and `git fetch --depth=1 origin {name}` failed: "
            + (fetched.stderr.strip().splitlines() or ["no such ref"])[-1]
        )
    raise DiffError(f"unknown git ref {ref!r}: {tried}. Give a branch, tag or commit of this repository.")


def extract(repo: Path, sha: str, dest: Path) -> Path:
    """The tree of commit `sha` as plain files under dest (no worktree bookkeeping to clean)."""
    archive = _git(repo, "archive", "--format=tar", sha, binary=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest


# pragma: no mutate end
# ---------------------------------------------------------------------------- one side


@dataclass
class Side:
    """One stack evaluated on one side: the preview document, or why there is none."""

    stack: str
    doc: dict[str, Any] | None = None
    error: str | None = None
    exists: bool = True

    @property
    def resources(self) -> dict[tuple[str, str], dict[str, Any]]:
        return {(r["type"], r["name"]): r.get("inputs", {}) for r in (self.doc or {}).get("resources", [])}

    @property
    def violations(self) -> list[dict[str, Any]]:
        return list((self.doc or {}).get("violations") or [])


# pragma: no mutate start (preview subprocesses: covered by test_diff.py)
def tree_stacks(tree: Path) -> list[str]:
    return stack_names(tree / "stacks")


def preview_env() -> dict[str, str]:
    """The environment of every side's preview."""
    from tpuray.shared import ENV_VAR, REPO_ROOT

    env = dict(os.environ)
    # An extracted ref lives in a temp dir, so its default ../shared would be missing.
    env.setdefault(ENV_VAR, str(REPO_ROOT.parent / "shared"))
    return env


def preview_sides(work: list[tuple[Path, str]], jobs: int) -> list[Side]:
    """`tpuray preview STACK --json` of each (tree, stack), each run with its tree's own code
    (tpuray/preview/fork.py: one process pre-loads the provider SDKs and forks the previews)."""
    present = [(tree, stack) for tree, stack in work if stack_file_in(tree / "stacks", stack).is_file()]
    try:
        finished = iter(preview_fork.run(present, preview_env(), jobs, PREVIEW_TIMEOUT_S) if present else [])
    except preview_fork.PreviewProcessError as err:
        raise DiffError(str(err)) from None
    return [
        _side(stack, next(finished)) if (tree, stack) in present else Side(stack, exists=False) for tree, stack in work
    ]


def _side(stack: str, result: preview_fork.Finished) -> Side:
    if result.code is None:
        return Side(stack, error=f"preview did not finish in {PREVIEW_TIMEOUT_S} s")
    # Preview exits 1 when a mandatory policy fires: the document is still complete.
    if result.code in (0, 1):
        try:
            return Side(stack, doc=json.loads(result.stdout))
        except json.JSONDecodeError:
            pass
    lines = [ln for ln in (result.stderr or result.stdout).strip().splitlines() if ln.strip()]
    errors = [ln.removeprefix("error: ").strip() for ln in lines if ln.startswith("error:")]
    return Side(stack, error="; ".join(errors) or (lines[-1] if lines else f"exit {result.code}"))


# pragma: no mutate end
# ---------------------------------------------------------------------------- comparing


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": [1]}} -> {"a.b[0]": 1}; empty containers are kept as leaves."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


ABSENT: Any = object()


@dataclass
class FieldChange:
    path: str
    old: Any
    new: Any
    replaces: bool = False  # this change alone makes the provider replace the resource

    def text(self, width: int = 70) -> str:
        return f"{self.path}: {show(self.old, width)} → {show(self.new, width)}" + (
            " (forces replacement)" if self.replaces else ""
        )


def _norm(value: Any) -> Any:
    # Numbers cross the engine as floats (4.0); 4 and 4.0 are the same desired state.
    return int(value) if isinstance(value, float) and value.is_integer() else value


def show(value: Any, width: int = 70) -> str:
    if value is ABSENT:
        return "(absent)"
    text = json.dumps(_norm(value), default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def field_changes(old: dict[str, Any], new: dict[str, Any]) -> list[FieldChange]:
    a, b = flatten(old), flatten(new)
    changes = []
    for path in sorted(set(a) | set(b)):
        va, vb = a.get(path, ABSENT), b.get(path, ABSENT)
        if va is not ABSENT and vb is not ABSENT and _norm(va) == _norm(vb):
            continue
        if isinstance(va, str) and isinstance(vb, str) and ("\n" in va or "\n" in vb):
            # Embedded YAML (serveConfigV2, runtimeEnvYAML): show the lines that differ.
            la, lb = va.splitlines(), vb.splitlines()
            for i in range(max(len(la), len(lb))):
                x = la[i] if i < len(la) else ABSENT
                y = lb[i] if i < len(lb) else ABSENT
                if x != y:
                    changes.append(FieldChange(f"{path} (line {i + 1})", x, y))
            continue
        changes.append(FieldChange(path, va, vb))
    return changes


def _replaces(type_: str, change: FieldChange, old: dict[str, Any], new: dict[str, Any]) -> bool:
    if type_.startswith("kubernetes:"):
        return any(change.path == f or change.path.startswith((f + ".", f + "[")) for f in K8S_REPLACE_FIELDS)
    return force_new.replaces(type_, old, new, change.path) is not None


@dataclass
class ResourceChange:
    action: str  # add | remove | update | replace
    type: str
    name: str
    fields: list[FieldChange] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "type": self.type,
            "name": self.name,
            "fields": [
                {"path": f.path, "old": _j(f.old), "new": _j(f.new), "replaces": f.replaces} for f in self.fields
            ],
        }


def _j(value: Any) -> Any:
    return None if value is ABSENT else value


def resource_changes(base: Side, head: Side) -> list[ResourceChange]:
    a, b = base.resources, head.resources
    out = []
    for key in sorted(set(a) | set(b)):
        type_, name = key
        if key not in a:
            out.append(ResourceChange("add", type_, name))
        elif key not in b:
            out.append(ResourceChange("remove", type_, name))
        else:
            changes = field_changes(a[key], b[key])
            for c in changes:
                c.replaces = _replaces(type_, c, a[key], b[key])
            if changes:
                action = "replace" if any(c.replaces for c in changes) else "update"
                out.append(ResourceChange(action, type_, name, changes))
    return out


def _vkey(v: dict[str, Any]) -> tuple[str, str, str]:
    return (str(v.get("policy")), str(v.get("resource")), str(v.get("message")))


def violation_changes(base: Side, head: Side) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(introduced, resolved): in head and not base, in base and not head."""
    a = {_vkey(v): v for v in base.violations}
    b = {_vkey(v): v for v in head.violations}
    introduced = [b[k] for k in sorted(b) if k not in a]
    resolved = [a[k] for k in sorted(a) if k not in b]
    return introduced, resolved


# ---------------------------------------------------------------------------- cost


def side_cost(side: Side, tree: Path) -> tuple[dict[str, Any] | None, str]:
    """The side's cost document and a note on where it came from."""
    if side.doc is None:
        return None, ""
    if "range" in side.doc.get("cost", {}):
        return side.doc["cost"], ""
    # A ref older than the cost range: price its stack file with the head's model.
    try:
        raw = read_stack_file(stack_file_in(tree / "stacks", side.stack))
        # Cost needs only the pools; workloads an older validator let through must not block it.
        raw = {k: v for k, v in raw.items() if k in ("environment", "gcp", "cluster", "slicePools", "prices")}
        cfg = parse_stack_config(raw, side.stack)
    except (ConfigError, OSError) as err:
        return None, f"base cost not computable ({err})"
    return costmod.stack_cost(
        cfg
    ).as_json(), "base cost computed with the head's price model (the base ref predates it)"


def _line_key(line: dict[str, Any]) -> tuple[str, ...]:
    return (line["pool"], line["generation"], line["topology"], line["tier"], line["role"])


@dataclass
class CostDiff:
    base: dict[str, Any] | None
    head: dict[str, Any] | None
    note: str = ""

    def total(self, side: str, scale: str, kind: str = "hourly") -> dict[str, Any] | None:
        doc = self.base if side == "base" else self.head
        return None if doc is None else doc["total"][scale][kind]

    def range(self, side: str) -> tuple[costmod.RangeEnd, costmod.RangeEnd] | None:
        doc = self.base if side == "base" else self.head
        if doc is None:
            return None
        return costmod.end_from_json(doc["range"]["low"]), costmod.end_from_json(doc["range"]["high"])

    def line_changes(self) -> list[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
        a = {_line_key(x): x for x in (self.base or {}).get("lines", [])}
        b = {_line_key(x): x for x in (self.head or {}).get("lines", [])}
        out = []
        for key in sorted(set(a) | set(b)):
            x, y = a.get(key), b.get(key)
            if (
                x is None
                or y is None
                or (x["hourly"], x["price"]["perChipHour"]) != (y["hourly"], y["price"]["perChipHour"])
            ):
                out.append((x, y))
        return out


def total_text(total: dict[str, Any] | None, factor: float = 1.0, per: str = "h") -> str:
    if total is None:
        return "n/a"
    return costmod.total_text(costmod.Total(total["knownPart"], tuple(total["unknownParts"])), factor, per)


def delta_text(a: dict[str, Any] | None, b: dict[str, Any] | None, factor: float = 1.0, per: str = "h") -> str:
    if a is None or b is None:
        return "n/a"
    if a["unknownParts"] or b["unknownParts"]:
        known = (b["knownPart"] - a["knownPart"]) * factor
        return "unknown" + (
            f" (known part {'+' if known >= 0 else '−'}{costmod.money(abs(known), per)})" if known else ""
        )
    d = (b["knownPart"] - a["knownPart"]) * factor
    return ("+" if d >= 0 else "−") + costmod.money(abs(d), per)


# ---------------------------------------------------------------------------- the report


@dataclass
class StackDiff:
    stack: str
    base: Side
    head: Side
    resources: list[ResourceChange]
    introduced: list[dict[str, Any]]
    resolved: list[dict[str, Any]]
    cost: CostDiff

    def counts(self) -> dict[str, int]:
        return {a: sum(1 for r in self.resources if r.action == a) for a in ("add", "update", "replace", "remove")}

    @property
    def head_mandatory(self) -> list[dict[str, Any]]:
        return [v for v in self.head.violations if v.get("level") == "mandatory"]

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "base": {"exists": self.base.exists, "error": self.base.error},
            "head": {"exists": self.head.exists, "error": self.head.error},
            "resources": [r.as_json() for r in self.resources],
            "violations": {
                "introduced": self.introduced,
                "resolved": self.resolved,
                "headMandatory": len(self.head_mandatory),
            },
            "cost": {"base": self.cost.base, "head": self.cost.head, "note": self.cost.note},
        }


@dataclass
class Report:
    base_ref: str
    base_sha: str
    stacks: list[StackDiff]

    @property
    def exit_code(self) -> int:
        if any(s.head.exists and s.head.error for s in self.stacks):
            return EXIT_INVALID
        return EXIT_MANDATORY if any(s.head_mandatory for s in self.stacks) else 0

    def as_json(self) -> dict[str, Any]:
        return {"base": {"ref": self.base_ref, "commit": self.base_sha}, "stacks": [s.as_json() for s in self.stacks]}


def compare(stack: str, base_tree: Path, head_tree: Path, base: Side, head: Side) -> StackDiff:
    introduced, resolved = violation_changes(base, head)
    base_cost, note = side_cost(base, base_tree)
    head_cost, _ = side_cost(head, head_tree)
    # A side that failed to evaluate has no resources to compare: listing every resource
    # as added or removed would be noise, so only the error is reported.
    changes = resource_changes(base, head) if (base.error is None and head.error is None) else []
    return StackDiff(stack, base, head, changes, introduced, resolved, CostDiff(base_cost, head_cost, note))


# pragma: no mutate start (git and preview subprocesses: covered by test_diff.py)
def run_diff(repo: Path, base_ref: str, stacks: list[str] | None = None, jobs: int | None = None) -> Report:
    """Compare every stack (or `stacks`) at `base_ref` with the working tree of `repo`."""
    root = repo_root(repo)
    sha = resolve_ref(root, base_ref)
    with tempfile.TemporaryDirectory(prefix="tpuray-diff-") as tmp:
        base_tree = extract(root, sha, Path(tmp) / "base")
        names = stacks or sorted(set(tree_stacks(base_tree)) | set(tree_stacks(root)))
        unknown = [s for s in names if s not in tree_stacks(base_tree) and s not in tree_stacks(root)]
        if unknown:
            raise DiffError(
                f"stack {unknown[0]!r} is in neither {base_ref} nor the working tree; "
                f"valid: {', '.join(sorted(set(tree_stacks(base_tree)) | set(tree_stacks(root))))}"
            )
        work = [(tree, s) for s in names for tree in (base_tree, root)]
        sides = preview_sides(work, jobs or max(2, min(len(work), os.cpu_count() or 2)))
        return Report(
            base_ref,
            sha,
            [compare(s, base_tree, root, sides[2 * i], sides[2 * i + 1]) for i, s in enumerate(names)],
        )


# pragma: no mutate end
