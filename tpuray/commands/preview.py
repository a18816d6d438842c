"""`tpuray preview STACK [--json]`: the stack's resources under the Pulumi mock engine,
then the policy pack on them through the pack's analyzer (as `pulumi preview --policy-pack
policies --policy-pack-config policies/policy-config.<environment>.json` would). Exit 1
when a mandatory policy fires."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from tpuray import capacity, terminal
from tpuray.checks import tpu_zones
from tpuray.cost import queues as queue_cost
from tpuray.cost.pricebook import age_text
from tpuray.cost.table import cost_table, stack_cost
from tpuray.desired import worker_group
from tpuray.policies.analyzer import Violation
from tpuray.policies.evaluate import check_stack
from tpuray.preview.mockrun import MockedResource, StackRun, run_stack


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("preview", help="offline preview: run the Pulumi program under mocks, no credentials")
    p.add_argument("stack", help="a stack name in stacks/ or a path to a Pulumi.<name>.yaml")
    p.add_argument("--json", action="store_true", help="print {stack, resources, cost, violations} as JSON")
    p.set_defaults(handler=run)


def preview_document(run: StackRun, violations: list[Violation] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"stack": run.stack, "resources": [r.as_json() for r in run.resources]}
    doc["cost"] = stack_cost(run.config).as_json()
    if (cap := queue_cost.quota_cap(run.config)) is not None:
        doc["queues"] = cap.as_json()
    if violations is not None:
        doc["violations"] = [v.as_json() for v in violations]
    return doc


# pragma: no mutate start (the preview's printers: presentation, not the exit path `make mutation` measures)
def print_violations(violations: list[Violation], console: Console) -> None:
    if not violations:
        console.print("policies: no violations")
        return
    table = Table(title=f"policy violations ({sum(v.level == 'mandatory' for v in violations)} mandatory)")
    for column in ("level", "policy", "resource", "message"):
        table.add_column(column, overflow="fold")
    for v in violations:
        colour = "red" if v.level == "mandatory" else "yellow"
        table.add_row(terminal.styled((v.level, colour)), v.policy, v.resource, v.message)
    console.print(table)


def _get(inputs: dict[str, Any], *path: str) -> Any:
    value: Any = inputs
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _n(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def key_inputs(r: MockedResource) -> str:
    """The few inputs a reviewer looks at first, per resource type."""
    i = r.inputs
    if r.type == "gcp:container/cluster:Cluster":
        ray = (_get(i, "addonsConfig", "rayOperatorConfigs") or [{}])[0]
        # Shown only when on: the Secret Manager add-on mounts an llm stack's Hugging Face token.
        secrets = " secretManager=True" if _get(i, "secretManagerConfig", "enabled") else ""
        return (
            f"{i.get('location')} channel={_get(i, 'releaseChannel', 'channel')} "
            f"rayOperator={ray.get('enabled', False)} privateNodes={_get(i, 'privateClusterConfig', 'enablePrivateNodes')} "
            f"workloadIdentity={bool(i.get('workloadIdentityConfig'))}{secrets} {cluster_security_summary(i)}"
        )
    if r.type == "gcp:container/nodePool:NodePool":
        nc = i.get("nodeConfig", {})
        tier = capacity.tier_of_node_config(nc).describe_node_config(nc)
        # Autoscaled pools: the minimum and the maximum; fixed ones: node_count (single-host) or the
        # slice's initial_node_count (multi-host; infra/components/slice_pool.py pool_size).
        if i.get("autoscaling"):
            low, high = _get(i, "autoscaling", "totalMinNodeCount") or 0, _get(i, "autoscaling", "totalMaxNodeCount")
            size = f"{_n(low)} (max {_n(high)})"
        else:
            size = _n(i.get("nodeCount", i.get("initialNodeCount", 0)))
        placement = i.get("placementPolicy") or {}
        where = f" {placement.get('type', 'policy')} {placement.get('tpuTopology', '')}".rstrip() if placement else ""
        return f"{nc.get('machineType')} nodes={size} {tier}{where}"
    if r.type.endswith(":ComputeClass"):
        prios = _get(i, "spec", "priorities") or []
        steps = []
        for p in prios:
            tier = capacity.tier_of_priority(p).display
            steps.append(f"{_get(p, 'tpu', 'type')} {_get(p, 'tpu', 'topology')} {tier}")
        return " → ".join(steps)
    if r.type.startswith("kubernetes:ray.io/"):
        groups = [f"{g.name}: {g.start_slices}x{g.hosts} hosts" for g in worker_group.of_object(i)]
        return f"ns={_get(i, 'metadata', 'namespace')} " + "; ".join(groups)
    if r.type == "kubernetes:core/v1:Namespace":
        pss = _get(i, "metadata", "labels", "pod-security.kubernetes.io/enforce")
        return f"{_get(i, 'metadata', 'name')} podSecurity={pss or 'none'}"
    if r.type.startswith("kubernetes:"):
        return f"{_get(i, 'metadata', 'namespace') or ''}/{_get(i, 'metadata', 'name')}".lstrip("/")
    if r.type == "gcp:serviceaccount/account:Account":
        return str(i.get("accountId"))
    if r.type == "gcp:secretmanager/secretIamMember:SecretIamMember":
        return f"projects/{i.get('project')}/secrets/{i.get('secretId')} {i.get('role')} → {i.get('member')}"
    if r.type == "gcp:monitoring/alertPolicy:AlertPolicy":
        promql = (i.get("conditions") or [{}])[0].get("conditionPrometheusQueryLanguage") or {}
        return (
            f"{i.get('severity')} for {promql.get('duration')} → {len(i.get('notificationChannels') or [])} channel(s)"
        )
    if r.type == "gcp:monitoring/dashboard:Dashboard":
        tiles = json.loads(i.get("dashboardJson") or "{}").get("mosaicLayout", {}).get("tiles", [])
        return f"{len(tiles)} tiles"
    if r.type == "gcp:billing/budget:Budget":
        units = _get(i, "amount", "specifiedAmount", "units")
        steps = ", ".join(
            f"{_n(round(t.get('thresholdPercent', 0) * 100))}% {t.get('spendBasis', '')}"
            for t in i.get("thresholdRules") or []
        )
        return f"USD {units}/month, labels {_get(i, 'budgetFilter', 'labels')}: {steps}"
    if r.type == "gcp:projects/iAMMember:IAMMember":
        return str(i.get("role"))
    return ""


def cluster_security_summary(i: dict[str, Any]) -> str:
    """DNS endpoint, Dataplane V2, secrets encryption, Binary Authorization and maintenance of a Cluster's inputs."""
    dataplane = "V2" if i.get("datapathProvider") == "ADVANCED_DATAPATH" else "legacy"
    kms = _get(i, "databaseEncryption", "keyName") if _get(i, "databaseEncryption", "state") == "ENCRYPTED" else None
    window = _get(i, "maintenancePolicy", "recurringWindow") or {}
    maintenance = (
        f"{window.get('recurrence')} {str(window.get('startTime', ''))[11:16]}-{str(window.get('endTime', ''))[11:16]}Z"
        if window
        else "none"
    )
    exclusions = len(_get(i, "maintenancePolicy", "maintenanceExclusions") or [])
    binauthz = _get(i, "binaryAuthorization", "evaluationMode") or "off"
    # tpuray:cluster.dnsEndpoint, as GKE takes it (infra/components/control_plane.py).
    dns = "public-iam" if _get(i, "controlPlaneEndpointsConfig", "dnsEndpointConfig", "allowExternalTraffic") else "off"
    return (
        f"dnsEndpoint={dns} dataplane={dataplane} secretsEncryption={'KMS ' + kms.split('/')[-1] if kms else 'default'} "
        f"binaryAuthorization={binauthz} maintenance={maintenance} exclusions={exclusions}"
    )


def print_table(run: StackRun, console: Console) -> None:
    table = Table(title=f"tpuray preview: stack {run.stack} ({len(run.resources)} resources, offline)")
    table.add_column("type")
    table.add_column("name")
    table.add_column("key inputs")
    for r in run.resources:
        table.add_row(r.type, r.name, key_inputs(r))
    console.print(table)


def print_delivery(run: StackRun, console: Console) -> None:
    """The bundle and images the rendered objects reference; an image without a digest is one to build."""
    from tpuray import bundle, images

    cfg = run.config
    console.print(f"bundle: {bundle.current().uri(cfg.workloads.bundle_uri)} (tpuray bundle)")
    for workload, ref in images.workload_images(cfg).items():
        console.print(f"image {workload}: {ref.describe(cfg.images.repository)}")


# pragma: no mutate end
def run(args: argparse.Namespace) -> int:
    return preview(args.stack, as_json=args.json)


def preview(stack: str, as_json: bool = False) -> int:
    """Print the stack's preview (a table, or JSON); 1 when a mandatory policy fires."""
    stack_run = run_stack(stack)
    violations = check_stack(stack_run)
    failed = 1 if any(v.level == "mandatory" for v in violations) else 0
    if as_json:
        print(json.dumps(preview_document(stack_run, violations), indent=2, default=str))
        return failed
    console = terminal.console(soft_wrap=False, width=200)
    print_table(stack_run, console)
    print_delivery(stack_run, console)
    console.print(cost_table(stack_cost(stack_run.config)))
    for line in queue_cost.preview_lines(stack_run.config):
        console.print(line)
    console.print(age_text())
    console.print(tpu_zones.age_text())
    print_violations(violations, console)
    return failed
