"""Which inputs of this program's Google resources force a replacement: read from the provider's Go source.

pulumi-gcp bridges the Terraform provider google-beta (its `upstream` submodule); a change the
provider's schema marks ForceNew makes Pulumi replace the resource instead of updating it. This
reads the SDKv2 schema literals of each resource type the program declares, follows every input
path the program sets (the committed stacks' previews, plus the inputs other configurations
set: VARIANTS), and writes tpuray/data/provider_force_new.yaml with the provenance of each answer
(file and line). `tpuray diff` and tests/test_force_new.py read that file.

How the SDK turns ForceNew into a replacement (hashicorp/terraform-plugin-sdk helper/schema/
schema.go, diffList and diffMap): a scalar's own ForceNew; a list, set or map of primitives passes
its ForceNew to every element; a block (a list or set of nested resources) applies its ForceNew
only to its element count (adding or removing it), its fields keep their own. CustomizeDiff may
force more: ForceNewIfChange / ResourceDiff.ForceNew calls are listed as `conditional`.

    python tools/provider_force_new.py GIT_DIR REF   # a clone (or `fetch` mirror) of
                                                     # hashicorp/terraform-provider-google-beta

Only the Go subset these files use is parsed; a path that does not resolve stops the run.

Length (about 440 lines, over the ~400 rule): a refresh tool, not product code: the small Go
schema-literal reader and the walk over the program's input paths are one pass whose every
answer carries its file and line.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
OUT = REPO / "tpuray" / "data" / "provider_force_new.yaml"
SRC = "google-beta/"
CONTAINER = SRC + "services/container/"
IAM = SRC + "tpgiamresource/resource_iam_member.go"

# Pulumi type -> (Terraform type, [files], root): ("func", Name) is a `func Name() *schema.Resource`,
# ("merge", [var, ...]) the maps that tpgiamresource.ResourceIamMember merges.
TYPES: dict[str, tuple[str, list[str], tuple[str, Any]]] = {
    "gcp:container/nodePool:NodePool": (
        "google_container_node_pool",
        [CONTAINER + "resource_container_node_pool.go", CONTAINER + "node_config.go"],
        ("func", "ResourceContainerNodePool"),
    ),
    "gcp:container/cluster:Cluster": (
        "google_container_cluster",
        [CONTAINER + f for f in ("resource_container_cluster.go", "node_config.go", "resource_container_node_pool.go")],
        ("func", "ResourceContainerCluster"),
    ),
    "gcp:serviceaccount/account:Account": (
        "google_service_account",
        [SRC + "services/resourcemanager/resource_google_service_account.go"],
        ("func", "ResourceGoogleServiceAccount"),
    ),
    "gcp:compute/resourcePolicy:ResourcePolicy": (
        "google_compute_resource_policy",
        [SRC + "services/compute/resource_compute_resource_policy.go"],
        ("func", "ResourceComputeResourcePolicy"),
    ),
    "gcp:compute/router:Router": (
        "google_compute_router",
        [SRC + "services/compute/resource_compute_router.go"],
        ("func", "ResourceComputeRouter"),
    ),
    "gcp:compute/routerNat:RouterNat": (
        "google_compute_router_nat",
        [SRC + "services/compute/resource_compute_router_nat.go"],
        ("func", "ResourceComputeRouterNat"),
    ),
    "gcp:monitoring/alertPolicy:AlertPolicy": (
        "google_monitoring_alert_policy",
        [SRC + "services/monitoring/resource_monitoring_alert_policy.go"],
        ("func", "ResourceMonitoringAlertPolicy"),
    ),
    "gcp:monitoring/dashboard:Dashboard": (
        "google_monitoring_dashboard",
        [SRC + "services/monitoring/resource_monitoring_dashboard.go"],
        ("func", "ResourceMonitoringDashboard"),
    ),
    "gcp:billing/budget:Budget": (
        "google_billing_budget",
        [SRC + "services/billingbudgets/resource_billing_budget.go"],
        ("func", "ResourceBillingBudgetsBudget"),
    ),
    "gcp:binaryauthorization/policy:Policy": (
        "google_binary_authorization_policy",
        [SRC + "services/binaryauthorization/resource_binary_authorization_policy.go"],
        ("func", "ResourceBinaryAuthorizationPolicy"),
    ),
    "gcp:projects/iAMMember:IAMMember": (
        "google_project_iam_member",
        [IAM, SRC + "services/resourcemanager/iam_project.go"],
        ("merge", ["IamMemberBaseSchema", "IamProjectSchema"]),
    ),
    "gcp:serviceaccount/iAMMember:IAMMember": (
        "google_service_account_iam_member",
        [IAM, SRC + "services/resourcemanager/iam_service_account.go"],
        ("merge", ["IamMemberBaseSchema", "IamServiceAccountSchema"]),
    ),
    "gcp:storage/bucketIAMMember:BucketIAMMember": (
        "google_storage_bucket_iam_member",
        [IAM, SRC + "services/storage/iam_storage_bucket.go"],
        ("merge", ["IamMemberBaseSchema", "StorageBucketIamSchema"]),
    ),
}
# Inputs the program sets in configurations the committed stacks do not use (with where).
VARIANTS = {
    "gcp:container/nodePool:NodePool": [
        "nodeCount",  # single-host TPU pools (infra/components/slice_pool.py)
        "autoscaling.locationPolicy",  # flex-start pools, from zero
        "placementPolicy.policyName",  # TPU7x: a workload policy instead of tpu_topology
        "queuedProvisioning.enabled",
    ],
    "gcp:container/cluster:Cluster": [
        "minMasterVersion",  # tpuray:cluster.minMasterVersion pinned
        "secretManagerConfig.enabled",  # the llm stack's Hugging Face token
        "ipAllocationPolicy.clusterSecondaryRangeName",  # named secondary ranges
        "ipAllocationPolicy.servicesSecondaryRangeName",
        "binaryAuthorization.evaluationMode",  # tpuray:cluster.binaryAuthorization
    ],
    # tpuray:cluster.egress: cloudNat (infra/components/egress.py)
    "gcp:compute/router:Router": ["name", "project", "region", "network"],
    "gcp:compute/routerNat:RouterNat": [
        "name",
        "project",
        "region",
        "router",
        "natIpAllocateOption",
        "sourceSubnetworkIpRangesToNat",
        "logConfig.enable",
        "logConfig.filter",
    ],
    # TPU7x pools: a workload policy (infra/components/slice_pool.py)
    "gcp:compute/resourcePolicy:ResourcePolicy": [
        "name",
        "project",
        "region",
        "workloadPolicy.type",
        "workloadPolicy.acceleratorTopology",
    ],
}


# ---------------------------------------------------------------------------- Go scanning

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def _skip(text: str, i: int) -> int:
    """Index after the string, rune or comment starting at i (i itself if none starts there)."""
    c = text[i]
    if c == '"' or c == "'":
        j = i + 1
        while text[j] != c:
            j += 2 if text[j] == "\\" else 1
        return j + 1
    if c == "`":
        return text.index("`", i + 1) + 1
    if text.startswith("//", i):
        return text.index("\n", i)
    if text.startswith("/*", i):
        return text.index("*/", i) + 2
    return i


def closing(text: str, i: int) -> int:
    """Index of the bracket that closes the one at i."""
    pairs = {"{": "}", "(": ")", "[": "]"}
    stack = [pairs[text[i]]]
    j = i + 1
    while stack:
        k = _skip(text, j)
        if k != j:
            j = k
            continue
        c = text[j]
        if c in pairs:
            stack.append(pairs[c])
        elif c in ")}]":
            assert c == stack.pop(), f"unbalanced at {j}"
        j += 1
    return j - 1


def top_level(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of each comma-separated item between start and end, at depth 0."""
    items, j, item = [], start, start
    while j < end:
        k = _skip(text, j)
        if k != j:
            j = k
            continue
        if text[j] in "{([":
            j = closing(text, j) + 1
            continue
        if text[j] == ",":
            items.append((item, j))
            item = j + 1
        j += 1
    items.append((item, end))
    return [(a, b) for a, b in items if _COMMENT.sub("", text[a:b]).strip()]


@dataclass
class Source:
    files: dict[str, str]  # path -> text

    def find(self, pattern: str) -> tuple[str, int]:
        for path, text in self.files.items():
            if m := re.search(pattern, text, re.M):
                return path, m.end()
        raise LookupError(f"not found: {pattern}")

    def line(self, path: str, i: int) -> int:
        return self.files[path].count("\n", 0, i) + 1


@dataclass
class Node:
    """One schema: its Go literal's fields, and (for a block) its nested schema map."""

    key: str
    path: str  # file
    start: int  # the literal's opening brace
    fields: dict[str, str]
    children: dict[str, Node] | None
    element_is_resource: bool


def _field_map(src: Source, path: str, brace: int) -> dict[str, tuple[int, int]]:
    text = src.files[path]
    out = {}
    for a, b in top_level(text, brace + 1, closing(text, brace)):
        key = text[a:b].partition(":")[0]
        out[_COMMENT.sub("", key).strip()] = (a + len(key) + 1, b)
    return out


def _literal_brace(src: Source, path: str, a: int, b: int) -> tuple[str, int]:
    """Where the literal of the expression text[a:b] opens: in place, or at the function or
    variable it names (`schemaNodeConfig()`, `schemaBlueGreenSettings`, `pkg.Name()`)."""
    expr = src.files[path][a:b].strip()
    at = src.files[path].index(expr, a)
    if expr.startswith("{") or expr.startswith("&schema.") or expr.startswith("map[string]"):
        return path, src.files[path].index("{", at)
    name = re.match(r"(?:\w+\.)?(\w+)", expr)
    assert name, expr
    where, end = src.find(rf"^(?:func {name[1]}\(\)[^{{]*\{{\s*return\s+|var {name[1]} = |\t{name[1]}\s+= )")
    return where, src.files[where].index("{", end)


def schema_map(src: Source, path: str, brace: int) -> dict[str, Node]:
    text = src.files[path]
    out = {}
    for a, b in top_level(text, brace + 1, closing(text, brace)):
        key_text, _, _ = text[a:b].partition(":")
        key = json.loads(_COMMENT.sub("", key_text).strip())
        try:
            vpath, vbrace = _literal_brace(src, path, a + len(key_text) + 1, b)
            out[key] = node(src, key, vpath, vbrace)
        except (LookupError, AssertionError, ValueError, KeyError) as err:  # not parsed: fails only if used
            out[key] = Node(key, path, a, {"unparsed": str(err)}, None, False)
    return out


def node(src: Source, key: str, path: str, brace: int) -> Node:
    text = src.files[path]
    raw = _field_map(src, path, brace)
    fields = {k: text[a:b].strip() for k, (a, b) in raw.items()}
    children, resource = None, False
    if "Elem" in raw:
        epath, ebrace = _literal_brace(src, path, *raw["Elem"])
        if src.files[epath][:ebrace].rstrip().endswith("schema.Resource"):
            resource = True
            inner = _field_map(src, epath, ebrace)
            spath, sbrace = _literal_brace(src, epath, *inner["Schema"])
            children = schema_map(src, spath, sbrace)
    return Node(key, path, brace, fields, children, resource)


def root(src: Source, spec: tuple[str, Any]) -> dict[str, Node]:
    kind, value = spec
    if kind == "merge":
        out: dict[str, Node] = {}
        for name in value:
            path, end = src.find(rf"^var {name} = ")
            out.update(schema_map(src, path, src.files[path].index("{", end)))
        return out
    path, end = src.find(rf"^func {value}\(\) \*schema\.Resource \{{\s*return\s+")
    brace = src.files[path].index("{", end)
    text = src.files[path]
    a, b = _field_map(src, path, brace)["Schema"]
    if text[a:b].strip().startswith("tpgresource.MergeSchemas("):  # the maps it merges, later ones win
        paren = text.index("(", a)
        merged: dict[str, Node] = {}
        for a2, b2 in top_level(text, paren + 1, closing(text, paren)):
            merged.update(schema_map(src, *_literal_brace(src, path, a2, b2)))
        return merged
    return schema_map(src, *_literal_brace(src, path, a, b))


# ---------------------------------------------------------------------------- inputs -> answers


def camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def pulumi_names(key: str, n: Node) -> set[str]:
    """The names Pulumi may give a Terraform field: camelCase, plural for a list of more than one
    item (the bridge pluralises them: taint -> taints, ray_operator_config -> rayOperatorConfigs)."""
    name = camel(key)
    if n.fields.get("Type") not in ("schema.TypeList", "schema.TypeSet") or n.fields.get("MaxItems") == "1":
        return {name}
    return {name, name + "s", name + "es", name[:-1] + "ies" if name.endswith("y") else name}


def answers(src: Source, nodes: dict[str, Node], paths: set[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(paths):
        level, schema, pulumi = nodes, [], []
        for segment in path.split("."):
            if level is None:
                break  # a map's keys or a primitive list's items: the container answers
            match = next((n for k, n in level.items() if segment in pulumi_names(k, n)), None)
            if match is None:
                raise SystemExit(f"{path}: no schema field named like {segment!r} (have {sorted(level)})")
            if "unparsed" in match.fields:
                raise SystemExit(f"{path}: the schema of {match.key!r} was not parsed: {match.fields['unparsed']}")
            schema.append(match.key)
            pulumi.append(segment)
            out[".".join(pulumi)] = describe(src, match, ".".join(schema))
            level = match.children
    return out


def describe(src: Source, n: Node, schema_path: str) -> dict[str, Any]:
    typ = n.fields.get("Type", "").removeprefix("schema.")
    kind = (
        "block"
        if n.element_is_resource
        else {"TypeMap": "map", "TypeList": "list", "TypeSet": "list"}.get(typ, "scalar")
    )
    entry = {
        "schema": schema_path,
        "kind": kind,
        "forceNew": n.fields.get("ForceNew") == "true",
        "at": f"{n.path.removeprefix(SRC)}:{src.line(n.path, n.start)}",
    }
    if n.fields.get("Computed") == "true":
        entry["computed"] = True  # left out of the config, it keeps its prior value: no change
    if "MaxItems" in n.fields:
        entry["maxItems"] = int(n.fields["MaxItems"])
    return entry


def conditional(src: Source, files: list[str]) -> list[dict[str, str]]:
    found = []
    for path in files:
        text = src.files[path]
        for m in re.finditer(r'ForceNewIfChange\("([\w.]+)"|\.ForceNew\("([\w.]+)"\)', text):
            found.append({"schema": m[1] or m[2], "at": f"{path.removeprefix(SRC)}:{src.line(path, m.start())}"})
    return found


def program_paths() -> dict[str, set[str]]:
    """Input paths (no list indices) of each type in the committed stacks' previews, plus VARIANTS."""
    from tpuray import capacity
    from tpuray.config import ReservationRef, stack_names
    from tpuray.preview.diff import flatten
    from tpuray.preview.mockrun import run_stack

    paths: dict[str, set[str]] = {t: set(VARIANTS.get(t, [])) for t in TYPES}
    for stack in stack_names(REPO / "stacks"):
        for r in run_stack(stack).resources:
            if r.type in TYPES:
                paths[r.type] |= {re.sub(r"\[\d+\]", "", p) for p in flatten(r.inputs)}
    for tier in capacity.TIERS:  # every tier's node_config fragment, whichever the stacks use
        fragment = tier.node_config(ReservationRef(name="example"), "acme-ml")
        paths["gcp:container/nodePool:NodePool"] |= {
            "nodeConfig." + ".".join(camel(s) for s in re.sub(r"\[\d+\]", "", p).split("."))
            for p in flatten(fragment)
            if p
        }
    return paths


def git_files(git_dir: str, ref: str, files: list[str]) -> tuple[Source, str, str]:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", git_dir, *args], check=True, capture_output=True, text=True).stdout

    commit, committed = git("log", "-1", "--format=%H %cs", ref).split()
    return Source({f: git("show", f"{commit}:{f}") for f in files}), commit, committed


def main(git_dir: str, ref: str) -> None:
    all_files = sorted({f for _, files, _ in TYPES.values() for f in files})
    src, commit, committed = git_files(git_dir, ref, all_files)
    paths = program_paths()
    resources = {}
    for pulumi_type, (tf_type, files, spec) in TYPES.items():
        resources[pulumi_type] = {
            "terraform": tf_type,
            "inputs": answers(src, root(src, spec), {p for p in paths[pulumi_type] if p}),
            "conditional": conditional(src, files[:1]),
        }
    doc = {
        "source": {
            "repository": "https://github.com/hashicorp/terraform-provider-google-beta",
            "ref": ref,
            "commit": commit,
            "committed": committed,
            "files": all_files,
            "why": "pulumi-gcp builds its provider from this repository (pulumi/pulumi-gcp .gitmodules `upstream`); "
            "v7.45.0 is the submodule commit of pulumi/pulumi-gcp at ed6078aa (2026-08-21). The installed pulumi_gcp "
            "wheel (requirements.lock) does not record which upstream it was built from",
            "generatedFrom": "GoogleCloudPlatform/magic-modules mmv1/third_party/terraform/services/container/*.go.tmpl "
            "and mmv1/products/*/*.yaml",
            "extracted": date.today().isoformat(),
            "tool": "tools/provider_force_new.py",
        },
        "semantics": "forceNew of a scalar, map or list of primitives: any change replaces; of a block: adding or "
        "removing it replaces, its fields answer for themselves (terraform-plugin-sdk helper/schema/schema.go "
        "diffList, diffMap). conditional: CustomizeDiff forces a replacement on some changes of that field.",
        "resources": resources,
    }
    header = (
        "# Generated by tools/provider_force_new.py from the provider's Go source; do not edit. See docs/seams.md.\n"
    )
    OUT.write_text(header + yaml.safe_dump(doc, sort_keys=False, width=120))
    print(f"wrote {OUT.relative_to(REPO)}: {sum(len(r['inputs']) for r in resources.values())} inputs")


if __name__ == "__main__":
    main(*sys.argv[1:3])
