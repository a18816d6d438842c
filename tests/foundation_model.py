"""What the Terraform foundation of one environment creates, read from terraform/ with bc-python-hcl2 (checkov's `hcl2`).

Each root (terraform/foundation/<env>/main.tf) calls modules/foundation with literal values,
and the modules name their resources from those (`"${var.name}-${var.region}-gke"`). This
evaluates the part of HCL those names use: literals, `var.` references through the module
calls, string templates of them, the defaults of variables and of optional() object
attributes, `keys()`, `toset()`, `one([for k, v in var.m : k if v.flag])`, the conditionals
`var.x ? a : b` and `var.x == null ? a : b` (so a count of 0 or 1), and a resource's attribute
in its own module. Anything else raises Unresolved, so a change of style in the Terraform
fails loudly instead of reading as "absent".

tests/test_foundation_contract.py (what the stacks name) and tests/test_deploy_permissions.py
(what the deploy account is granted) read the foundation through this module only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import hcl2

from tests.conftest import REPO

TF = REPO / "terraform"
MODULES = TF / "modules"
ENVS = ("dev", "staging", "prod")
_REF = re.compile(r"\$\{([^{}]+)\}")
_OPTIONAL = re.compile(r"'(\w+)': '\$\{optional\(\w+,\s*(?:\"([^\"]*)\"|([\w.]+))\)\}'")


class Unresolved(Exception):
    """An HCL expression this reader does not evaluate."""


def _one(value: Any) -> Any:
    # bc-python-hcl2 wraps attribute values in a one-element list.
    return value[0] if isinstance(value, list) and len(value) == 1 else value


@cache
def _load(folder: Path) -> dict[str, list[dict[str, Any]]]:
    merged: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(folder.glob("*.tf")):
        with path.open() as f:
            for kind, blocks in hcl2.load(f).items():
                merged.setdefault(kind, []).extend(blocks)
    return merged


def blocks(folder: Path, kind: str) -> dict[str, dict[str, Any]]:
    """name -> body of every `kind` block (variable, module, output) in folder/*.tf."""
    found: dict[str, dict[str, Any]] = {}
    for block in _load(folder).get(kind, []):
        found.update(block)
    return found


def resources(folder: Path, rtype: str) -> dict[str, dict[str, Any]]:
    """name -> body of every `resource "rtype" "name"` in folder/*.tf."""
    found: dict[str, dict[str, Any]] = {}
    for block in _load(folder).get("resource", []):
        found.update(block.get(rtype, {}))
    return found


def _optional_defaults(type_expr: str) -> dict[str, Any]:
    """Attribute -> default of `optional(T, default)` in an object type, as bc-python-hcl2 prints it."""
    defaults: dict[str, Any] = {}
    for name, text, bare in _OPTIONAL.findall(type_expr):
        defaults[name] = text if not bare else {"True": True, "False": False}.get(bare, bare)
    return defaults


def _with_defaults(value: Any, type_expr: str) -> Any:
    """An object's value with its optional() attributes filled in (each value's, for a map of objects)."""
    defaults = _optional_defaults(type_expr)
    if not defaults or not isinstance(value, dict):
        return value
    if type_expr.startswith("${map(object("):
        return {key: {**defaults, **item} for key, item in value.items()}
    return {**defaults, **value}


@dataclass
class Scope:
    """The variables of one module instance: its call's arguments over its variables' defaults.

    Arguments are evaluated when read, in the caller's scope, so an argument this reader
    cannot evaluate (another module's output) fails only where it is used."""

    folder: Path
    args: dict[str, Any] = field(default_factory=dict)
    caller: Scope | None = None

    def module(self, name: str) -> Scope:
        call = blocks(self.folder, "module").get(name)
        if call is None:  # not called (yet): an empty module, which creates nothing
            return Scope(self.folder / f"<no module {name}>", {}, self)
        return Scope((self.folder / _one(call["source"])).resolve(), call, self)

    def declares(self, name: str) -> bool:
        return name in blocks(self.folder, "variable")

    def var(self, name: str) -> Any:
        body = blocks(self.folder, "variable").get(name)
        if body is None:
            raise Unresolved(f"var.{name}: no such variable in {self.folder.relative_to(REPO)}")
        if name in self.args:
            value = evaluate(_unwrap(self.args[name]), self.caller)
        else:
            value = _unwrap(body["default"]) if "default" in body else None
        return _with_defaults(value, str(_one(body.get("type", ""))))


# The CI identities, as the members of IAM grants name them (modules/ci-identity).
DEPLOY, PREVIEW = "serviceAccount:<tpuray-deploy>", "serviceAccount:<tpuray-preview>"
_SYMBOLS = {
    "local.deploy_member": DEPLOY,
    "local.preview_email": PREVIEW.removeprefix("serviceAccount:"),
    "module.ci_identity.deploy_member": DEPLOY,
    "module.ci_identity.preview_member": PREVIEW,
}
# `one([for name, b in var.buckets : name if b.bundles])`: the one key whose flag is set.
_ONE_KEY = re.compile(r"one\(\[for (\w+)\s*,\s*(\w+) in var\.(\w+) : \1 if \2\.(\w+)\]\)")
# A resource's attribute that another names it by, when the resource does not set it: an
# Artifact Registry repository's IAM members name it by its ID.
_NAME_ATTRIBUTE = {"google_artifact_registry_repository": "repository_id"}
# A resource's `id` the provider computes from its arguments (KMS: the resource name).
_IDS = {
    "google_kms_key_ring": "projects/${project}/locations/${location}/keyRings/${name}",
    "google_kms_crypto_key": "${key_ring}/cryptoKeys/${name}",
}


_TERNARY = re.compile(r"(var\.[\w.]+)( == (?:null|None))? \? (.+?) : (.+)")


def _reference(expr: str, scope: Scope, each: Any) -> Any:
    expr = expr.strip()
    if expr in _SYMBOLS:
        return _SYMBOLS[expr]
    if re.fullmatch(r"-?\d+", expr):
        return int(expr)
    if expr == "[]":
        return []
    ternary = _TERNARY.fullmatch(expr)
    if ternary:  # `var.x ? a : b` and `var.x == null ? a : b`
        test, is_null, yes, no = ternary.groups()
        value = _reference(test, scope, each)
        return _reference(yes if (value is None if is_null else value) else no, scope, each)
    call = re.fullmatch(r"(keys|toset)\((.+)\)", expr)
    if call:
        inner = _reference(call.group(2), scope, each)
        return sorted(inner) if call.group(1) == "keys" else list(inner)
    one = _ONE_KEY.fullmatch(expr)
    if one:
        keys = [k for k, v in (scope.var(one.group(3)) or {}).items() if v.get(one.group(4))]
        return keys[0] if len(keys) == 1 else None
    attribute = re.fullmatch(r"(google_\w+)\.(\w+)\.(\w+)", expr)
    if attribute and attribute.group(2) in resources(scope.folder, attribute.group(1)):
        rtype, name, attr = attribute.groups()
        body = resources(scope.folder, rtype)[name]
        if "count" not in body and "for_each" not in body:
            if attr == "id" and rtype in _IDS:
                args = {k: evaluate(_unwrap(body[k]), scope) for k in re.findall(r"\$\{(\w+)\}", _IDS[rtype])}
                return re.sub(r"\$\{(\w+)\}", lambda m: str(args[m.group(1)]), _IDS[rtype])
            attr = attr if attr in body else _NAME_ATTRIBUTE.get(rtype, attr)
            if attr in body:
                return evaluate(_unwrap(body[attr]), scope)
    path = expr.split(".")
    if path[0] == "each" and each is not None:
        return each[0] if path[1] == "key" else _walk(each[1], path[2:], expr)
    if path[0] == "var":
        return _walk(scope.var(path[1]), path[2:], expr)
    raise Unresolved(f"{expr} in {scope.folder.relative_to(REPO)}")


def _walk(value: Any, path: list[str], expr: str) -> Any:
    for part in path:
        if not isinstance(value, dict):
            raise Unresolved(expr)
        value = value.get(part)
    return value


def _unwrap(value: Any) -> Any:
    value = _one(value)
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items() if not k.startswith("__")}
    return value


def evaluate(value: Any, scope: Scope | None, each: tuple[str, Any] | None = None) -> Any:
    """A literal, "${ref}", or a template of refs, in `scope` (and a for_each `each`)."""
    if isinstance(value, list):
        return [evaluate(v, scope, each) for v in value]
    if isinstance(value, dict):
        return {k: evaluate(v, scope, each) for k, v in value.items() if not k.startswith("__")}
    if not isinstance(value, str) or "${" not in value or scope is None:
        return value
    whole = _REF.fullmatch(value)
    if whole:
        return _reference(whole.group(1), scope, each)
    return _REF.sub(lambda m: str(_reference(m.group(1), scope, each)), value)


def instances(scope: Scope, rtype: str, name: str, *names: str, lenient: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Attributes `names` of each instance of a resource (count / for_each expanded), evaluated.
    An attribute in `lenient` that does not evaluate is None instead of an error."""
    body = resources(scope.folder, rtype).get(name)
    if body is None:  # not declared (yet): no instance
        return []
    attrs = {k: _unwrap(body[k]) for k in names if k in body}
    if "count" in body:
        count = evaluate(_one(body["count"]), scope)
        if count not in (0, 1):
            raise Unresolved(f"count of {rtype}.{name}: {_one(body['count'])} (this reader takes 0 or 1)")
        eaches: list[tuple[str, Any] | None] = [None] * count
    elif "for_each" in body:
        keys = evaluate(_one(body["for_each"]), scope)
        eaches = list(keys.items() if isinstance(keys, dict) else ((k, k) for k in keys))
    else:
        eaches = [None]
    found = []
    for each in eaches:
        values = {}
        for key, value in attrs.items():
            try:
                values[key] = evaluate(value, scope, each)
            except Unresolved:
                if key not in lenient:
                    raise
                values[key] = None
        found.append(values)
    return found


@dataclass(frozen=True)
class Foundation:
    """What terraform/foundation/<env> creates, as the names a stack would use."""

    env: str
    project: str
    region: str
    network: str
    subnetwork: str
    secondary_ranges: tuple[str, ...]
    vpc_ranges: tuple[str, ...]  # the GKE subnetwork's primary range, then its secondary ranges' CIDRs
    proxy_only_subnets: tuple[tuple[str, str], ...]  # (region, CIDR) in `network`
    kms_keys: tuple[str, ...]  # projects/P/locations/L/keyRings/R/cryptoKeys/K
    buckets: tuple[str, ...]  # workload buckets, the Pulumi state bucket, then the CI home's Terraform state bucket
    bundle_bucket: str | None
    docker_repositories: tuple[str, ...]  # REGION-docker.pkg.dev/PROJECT/REPO
    reservations: tuple[str, ...]  # declared, then existing ones the foundation outputs
    service_accounts: tuple[str, ...]  # emails of the accounts the stack's resources run as
    root: Scope


@cache
def foundation(env: str) -> Foundation:
    root = Scope(TF / "foundation" / env).module("foundation")
    net = root.module("network")
    (vpc,) = instances(net, "google_compute_network", "vpc", "name")
    (gke,) = instances(net, "google_compute_subnetwork", "gke", "name", "region", "ip_cidr_range", "secondary_ip_range")
    proxy_only = instances(net, "google_compute_subnetwork", "proxy_only", "region", "ip_cidr_range", "purpose", "role")
    assert all(s["purpose"] == "REGIONAL_MANAGED_PROXY" and s["role"] == "ACTIVE" for s in proxy_only)
    kms = root.module("kms")
    (ring,) = instances(kms, "google_kms_key_ring", "this", "project", "location", "name")
    ring_id = f"projects/{ring['project']}/locations/{ring['location']}/keyRings/{ring['name']}"
    keys = [f"{ring_id}/cryptoKeys/{k['name']}" for n in resources(kms.folder, "google_kms_crypto_key")
            for k in instances(kms, "google_kms_crypto_key", n, "name")]  # fmt: skip
    buckets = [b["name"] for b in instances(root.module("buckets"), "google_storage_bucket", "workloads", "name")]
    buckets += [b["name"] for b in instances(root.module("buckets"), "google_storage_bucket", "bundles", "name")]
    buckets += [b["name"] for b in instances(root.module("pulumi_state"), "google_storage_bucket", "state", "name")]
    if root.var("ci")["home"]:
        buckets += [b["name"] for b in instances(root.module("state"), "google_storage_bucket", "state", "name")]
    bundles = [root.var("bundle_bucket")] if root.declares("bundle_bucket") and root.var("bundle_bucket") else []
    reg = root.module("registry")
    repos = [f"{r['location']}-docker.pkg.dev/{r['project']}/{r['repository_id']}"
             for r in instances(reg, "google_artifact_registry_repository", "images", "location", "project", "repository_id")]  # fmt: skip
    res = root.module("reservations")
    reservations = [r["name"] for r in instances(res, "google_compute_reservation", "tpu", "name")]
    ci = root.module("ci_identity")
    accounts = [
        a for n in ("nodes", "workloads") for a in instances(ci, "google_service_account", n, "project", "account_id")
    ]
    return Foundation(
        env=env,
        project=root.var("project_id"),
        region=root.var("region"),
        network=vpc["name"],
        subnetwork=gke["name"],
        secondary_ranges=tuple(r["range_name"] for r in gke["secondary_ip_range"]),
        vpc_ranges=(gke["ip_cidr_range"], *(r["ip_cidr_range"] for r in gke["secondary_ip_range"])),
        proxy_only_subnets=tuple((s["region"], s["ip_cidr_range"]) for s in proxy_only),
        kms_keys=tuple(keys),
        buckets=tuple(buckets),
        bundle_bucket=bundles[0] if bundles else None,
        docker_repositories=tuple(repos),
        reservations=tuple(reservations + sorted(res.var("existing_reservations") or {})),
        service_accounts=tuple(f"{a['account_id']}@{a['project']}.iam.gserviceaccount.com" for a in accounts),
        root=root,
    )


# Where a grant's resource type puts it, and the attribute naming the place.
_GRANT_SCOPES = {
    "google_project_iam_member": ("project", "project"),
    "google_storage_bucket_iam_member": ("bucket", "bucket"),
    "google_billing_account_iam_member": ("billing account", "billing_account_id"),
    "google_artifact_registry_repository_iam_member": ("repository", "repository"),
    "google_service_account_iam_member": ("service account", "service_account_id"),
    "google_kms_crypto_key_iam_member": ("KMS key", "crypto_key_id"),
}


@dataclass(frozen=True, order=True)
class Grant:
    """A role a CI account holds somewhere; `condition` is the IAM condition's title, if any. A
    service account's `where` is its email."""

    scope: str
    where: str
    role: str
    condition: str | None
    resource: str  # module.resource_type.name, for messages


def _module_scopes(root: Scope) -> dict[str, Scope]:
    """The foundation and each module it instantiates (a module call whose count is 0 is left out)."""
    found = {"foundation": root}
    for name, call in blocks(root.folder, "module").items():
        if "count" not in call or evaluate(_one(call["count"]), root) == 1:
            found[name] = root.module(name)
    return found


def _grants_in(scope: Scope, label: str, account: str) -> list[Grant]:
    grants = []
    for block in _load(scope.folder).get("resource", []):
        for rtype, bodies in block.items():
            if not rtype.endswith("_iam_member"):
                continue
            for name in bodies:
                # A member made of other references (a service agent's address, a principal of the
                # Workload Identity pool) is not a CI account.
                members = [i["member"] for i in instances(scope, rtype, name, "member", lenient=("member",))]
                if account not in members:
                    continue
                if rtype not in _GRANT_SCOPES:
                    raise Unresolved(
                        f"{label}.{rtype}.{name}: a CI account's grant on a kind of resource this reader does not know"
                    )
                kind, attr = _GRANT_SCOPES[rtype]
                # An IAM condition is kept by its title (its CEL expression is not evaluated).
                condition = _unwrap(resources(scope.folder, rtype)[name].get("condition"))
                title = condition["title"] if condition else None
                for inst in instances(scope, rtype, name, "member", "role", attr, "location", "project"):
                    if inst["member"] != account:
                        continue
                    where = inst[attr]
                    if kind == "repository":
                        where = f"{inst['location']}-docker.pkg.dev/{inst['project']}/{where}"
                    if kind == "service account":
                        where = where.rsplit("/", 1)[-1]
                    grants.append(Grant(kind, where, inst["role"], title, f"{label}.{rtype}.{name}"))
    return grants


@cache
def grants(env: str, account: str) -> tuple[Grant, ...]:
    """Every role terraform/foundation/<env> grants `account` (DEPLOY or PREVIEW)."""
    root = foundation(env).root
    return tuple(
        sorted({g for label, scope in _module_scopes(root).items() for g in _grants_in(scope, label, account)})
    )


def deploy_grants(env: str) -> tuple[Grant, ...]:
    """Every role terraform/foundation/<env> grants its environment's deploy account."""
    return grants(env, DEPLOY)


def enabled_services(env: str) -> tuple[str, ...]:
    """The APIs terraform/foundation/<env> enables in the project (google_project_service.apis)."""
    scope = foundation(env).root
    (apis,) = [block["apis"] for block in _load(scope.folder).get("locals", []) if "apis" in block]
    (body,) = resources(scope.folder, "google_project_service").values()
    assert _one(body["for_each"]) == "${toset(local.apis)}", "google_project_service.apis enables local.apis"
    return tuple(_unwrap(apis))
