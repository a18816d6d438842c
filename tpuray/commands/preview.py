"""`tpuray preview STACK [--json]`: the stack's resources under the Pulumi mock engine."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from tpuray.mockrun import MockedResource, StackRun, run_stack


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("preview", help="offline preview: run the Pulumi program under mocks, no credentials")
    p.add_argument("stack", help="a stack name in stacks/ or a path to a Pulumi.<name>.yaml")
    p.add_argument("--json", action="store_true", help="print {stack, resources} as JSON")
    p.set_defaults(handler=run)


def preview_document(run: StackRun) -> dict[str, Any]:
    return {"stack": run.stack, "resources": [r.as_json() for r in run.resources]}


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
        return (f"{i.get('location')} channel={_get(i, 'releaseChannel', 'channel')} "
                f"rayOperator={ray.get('enabled', False)} privateNodes={_get(i, 'privateClusterConfig', 'enablePrivateNodes')} "
                f"workloadIdentity={bool(i.get('workloadIdentityConfig'))}")
    if r.type == "gcp:container/nodePool:NodePool":
        nc = i.get("nodeConfig", {})
        tier = "spot" if nc.get("spot") else "flex-start" if nc.get("flexStart") else (
            "reservation " + ",".join(_get(nc, "reservationAffinity", "values") or [])
            if _get(nc, "reservationAffinity", "consumeReservationType") == "SPECIFIC_RESERVATION" else "on-demand")
        size = _n(i.get("initialNodeCount", 0))
        if i.get("autoscaling"):
            size += f" (max {_n(_get(i, 'autoscaling', 'totalMaxNodeCount'))})"
        placement = i.get("placementPolicy") or {}
        where = f" {placement.get('type', 'policy')} {placement.get('tpuTopology', '')}".rstrip() if placement else ""
        return f"{nc.get('machineType')} nodes={size} {tier}{where}"
    if r.type.endswith(":ComputeClass"):
        prios = _get(i, "spec", "priorities") or []
        steps = []
        for p in prios:
            tier = "spot" if p.get("spot") else "flex-start" if "flexStart" in p else (
                "reservation" if _get(p, "reservations", "affinity") == "Specific" else "on-demand")
            steps.append(f"{_get(p, 'tpu', 'type')} {_get(p, 'tpu', 'topology')} {tier}")
        return " → ".join(steps)
    if r.type.startswith("kubernetes:ray.io/"):
        spec = i.get("spec", {})
        cluster = spec.get("rayClusterSpec") or spec.get("rayClusterConfig") or spec
        groups = [f"{g.get('groupName')}: {_n(g.get('replicas', 1))}x{_n(g.get('numOfHosts', 1))} hosts"
                  for g in cluster.get("workerGroupSpecs", [])]
        return f"ns={_get(i, 'metadata', 'namespace')} " + "; ".join(groups)
    if r.type.startswith("kubernetes:"):
        return f"{_get(i, 'metadata', 'namespace') or ''}/{_get(i, 'metadata', 'name')}".lstrip("/")
    if r.type == "gcp:serviceaccount/account:Account":
        return str(i.get("accountId"))
    if r.type == "gcp:projects/iAMMember:IAMMember":
        return str(i.get("role"))
    return ""


def print_table(run: StackRun, console: Console) -> None:
    table = Table(title=f"tpuray preview: stack {run.stack} ({len(run.resources)} resources, offline)")
    table.add_column("type")
    table.add_column("name")
    table.add_column("key inputs")
    for r in run.resources:
        table.add_row(r.type, r.name, key_inputs(r))
    console.print(table)


def run(args: argparse.Namespace) -> int:
    stack_run = run_stack(args.stack)
    if args.json:
        print(json.dumps(preview_document(stack_run), indent=2, default=str))
        return 0
    print_table(stack_run, Console(soft_wrap=False, width=200))
    return 0
