"""Each change a newcomer makes touches one home (plus its test), and reaches everything downstream.

Every scenario copies the product's sources into a fresh folder, edits exactly ONE file there as a
newcomer would (a row of the capacity table, a row of the TPU catalog, a rule in a rules module,
a field of a config model), and then asks the copy, in its own Python process, what the stack
config, the generated docs, the preview, the ComputeClass, the worker groups, the cost table, the
emulator's plan or the policy pack now say. Nothing else is edited: a second home that had to
change too would show up here as a missing effect.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
# What the product is made of (the package, the program, the apps, the pack, the stacks, the docs).
SOURCES = ("tpuray", "infra", "ray_apps", "policies", "stacks", "docs", "Pulumi.yaml")


def tree_with_one_edit(tmp_path: Path, path: str, edit: Callable[[str], str]) -> Path:
    tree = tmp_path / "tree"
    for part in SOURCES:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, tree / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, tree / part)
    target = tree / path
    before = target.read_text()
    after = edit(before)
    assert after != before, f"the edit of {path} changed nothing"
    target.write_text(after)
    return tree


def ask(tree: Path, code: str) -> Any:
    """Run `code` with the copy's sources first on the path; its last stdout line is JSON."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=tree, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def stack_with(tree: Path, change: str) -> None:
    """Write stacks/Pulumi.newcomer.yaml: the dev stack's config after `change` (Python on `config`)."""
    code = f"""
        import json, yaml
        doc = yaml.safe_load(open("stacks/Pulumi.dev.yaml"))
        config = doc["config"]
        {change}
        open("stacks/Pulumi.newcomer.yaml", "w").write(yaml.safe_dump(doc))
        print(json.dumps("ok"))
    """
    assert ask(tree, code) == "ok"


CALENDAR_ROW = """
CALENDAR = Tier(
    key="calendar",
    config_key="calendar",
    field="calendar",
    display="calendar (7 days)",
    market_type="on-demand",
    config_description="a 7-day calendar block (DWS calendar mode)",
    from_zero=True,
    node_label="example.com/calendar-block",
    tainted=True,
    node_config=lambda _ref, _project: {"max_run_duration": "604800s"},
    priority=lambda _ref: {"maxRunDurationSeconds": 604800},
    node_config_marker={"maxRunDuration": "604800s"},
    priority_marker={"maxRunDurationSeconds": 604800},
)
"""


def add_calendar_tier(text: str) -> str:
    anchor = "TIERS: list[Tier] = [SPOT, FLEX_START, RESERVATION, ON_DEMAND]"
    return text.replace(anchor, CALENDAR_ROW + "\n" + anchor.replace("[SPOT,", "[CALENDAR, SPOT,"))


@pytest.fixture(scope="module")
def calendar(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One row added to tpuray/capacity.py; the dev stack's training pool walks it first."""
    tree = tree_with_one_edit(tmp_path_factory.mktemp("tier"), "tpuray/capacity.py", add_calendar_tier)
    stack_with(
        tree,
        'config["tpuray:slicePools"][0]["capacity"] = [{"calendar": True}, {"spot": True}, {"onDemand": True}]\n'
        '        config["tpuray:prices"] = {"v6e": {"calendar": 1.25}}',
    )
    return ask(
        tree,
        """
        import json
        from tpuray import docs
        from tpuray.commands.preview import key_inputs, preview_document
        from tpuray.config import tier_keys
        from tpuray.config.checks import load_stack
        from tpuray.local.emulator.plan import plan_slices
        from tpuray.preview.mockrun import run_stack
        cfg = load_stack("newcomer")
        run = run_stack("newcomer")
        pool = next(r for r in run.resources if r.name == "v6e-dev-0")
        cc = next(r for r in run.resources if r.type.endswith(":ComputeClass") and r.inputs["metadata"]["name"] == "v6e-dev")
        job = next(r for r in run.resources if r.type == "kubernetes:ray.io/v1:RayJob")
        (group,) = job.inputs["spec"]["rayClusterSpec"]["workerGroupSpecs"]
        cost = [l for l in preview_document(run)["cost"]["lines"] if l["tier"] == "calendar"]
        plan = plan_slices(run, max_hosts=64)
        print(json.dumps({
            "tier_keys": tier_keys(),
            "first_step": cfg.slice_pools[0].capacity[0].kind.key,
            "docs": "calendar" in docs.config_key_table(),
            "node_pool": [pool.inputs["nodeConfig"].get("maxRunDuration"), key_inputs(pool)],
            "compute_class": [cc.inputs["spec"]["priorities"][0], key_inputs(cc)],
            "tolerations": group["template"]["spec"]["tolerations"],
            "cost": [[l["pool"], l["price"]["perChipHour"], l["chips"]] for l in cost],
            "emulated_tiers": sorted({s.tier for s in plan.slices if s.pool == "v6e-dev"}),
        }))
        """,
    )


def test_an_added_tier_is_a_key_of_every_capacity_step(calendar: dict[str, Any]) -> None:
    assert calendar["tier_keys"] == "spot, reservation, onDemand, flexStart, calendar"
    assert calendar["first_step"] == "calendar"


def test_an_added_tier_is_in_the_generated_config_reference(calendar: dict[str, Any]) -> None:
    assert calendar["docs"] is True


def test_an_added_tier_is_the_node_pools_capacity_in_the_preview(calendar: dict[str, Any]) -> None:
    assert calendar["node_pool"] == ["604800s", "ct6e-standard-4t nodes=0 (max 4) calendar (7 days) COMPACT 4x4"]


def test_an_added_tier_is_the_first_compute_class_priority(calendar: dict[str, Any]) -> None:
    priority, line = calendar["compute_class"]
    assert priority["maxRunDurationSeconds"] == 604800
    assert line.startswith("tpu-v6e-slice 4x4 calendar (7 days) → tpu-v6e-slice 4x4 spot")


def test_an_added_tier_is_tolerated_by_the_shapes_worker_group(calendar: dict[str, Any]) -> None:
    assert {"key": "example.com/calendar-block", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in (
        calendar["tolerations"]
    )


def test_an_added_tier_is_priced_in_the_cost_table(calendar: dict[str, Any]) -> None:
    assert calendar["cost"] == [["v6e-dev", 1.25, {"min": 0, "max": 16}]]


def test_an_added_tier_is_emulated(calendar: dict[str, Any]) -> None:
    assert calendar["emulated_tiers"] == ["calendar", "on-demand", "spot"]


# A future 3-D generation placed, like TPU7x, by a workload policy: one more row of the table.
V8X_ROW = """
        Generation("v8x", "tpu-v8x-slice", "v8x", 2, 3, "tpu8x-standard", ("2x2x1", "2x2x2", "2x2x4"),
                   {"2x2x1": 4}, ("2x2x1", "2x2x2", "2x2x4"), multi_host_placement=Placement.WORKLOAD_POLICY,
                   workload_policy="HIGH_THROUGHPUT"),"""


def add_v8x_generation(text: str) -> str:
    end = text.index("\n    )\n}  # fmt: skip", text.index("GENERATIONS: dict[str, Generation] = {"))
    return text[:end] + V8X_ROW + text[end:]


def test_an_added_generation_reaches_config_preview_worker_groups_and_the_emulator(tmp_path: Path) -> None:
    tree = tree_with_one_edit(tmp_path, "tpuray/catalog.py", add_v8x_generation)
    stack_with(
        tree,
        'config["tpuray:slicePools"][0].update(generation="v8x", topology="2x2x2", unlistedCapacity=True)\n'
        '        config["tpuray:prices"] = {"v8x": {"on-demand": 9.0, "spot": 3.0}}',
    )
    seen = ask(
        tree,
        """
        import json
        from tpuray.local.emulator.plan import plan_slices
        from tpuray.preview.mockrun import run_stack
        run = run_stack("newcomer")
        pool = next(r for r in run.resources if r.name == "v6e-dev-0")
        policy = run.of_type("gcp:compute/resourcePolicy:ResourcePolicy")[0]
        job = next(r for r in run.resources if r.type == "kubernetes:ray.io/v1:RayJob")
        (group,) = job.inputs["spec"]["rayClusterSpec"]["workerGroupSpecs"]
        plan = plan_slices(run, max_hosts=64)
        print(json.dumps({
            "machine": pool.inputs["nodeConfig"]["machineType"],
            "policy": policy.inputs["workloadPolicy"],
            "selector": group["template"]["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-accelerator"],
            "hosts": group["numOfHosts"],
            "entrypoint_type": "--accelerator-type TPU-V8X" in job.inputs["spec"]["entrypoint"],
            "emulated": sorted({(s.shape.generation, s.shape.topology) for s in plan.slices if s.pool == "v6e-dev"}),
        }))
        """,
    )
    assert seen == {
        "machine": "tpu8x-standard-4t",
        "policy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "2x2x2"},
        "selector": "tpu-v8x-slice",
        "hosts": 2,
        "entrypoint_type": True,
        "emulated": [["v8x", "2x2x2"]],
    }


RULE = """

def _no_group_named_scratch(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    for g in tpu_groups(res.props):
        if g.name == "scratch":
            yield f"{res.label}: {g.where} is named scratch; name a worker group after its shape"


RULES = (*RULES, Rule(
    "tpu-group-not-scratch", "TPU worker groups are named after their shape, not 'scratch'.",
    MANDATORY, RAY_TYPES, _no_group_named_scratch, kubernetes=True, profile=GKE,
))
"""


def test_an_added_policy_rule_is_in_the_pack_the_docs_and_tpuray_check(tmp_path: Path) -> None:
    tree = tree_with_one_edit(tmp_path, "tpuray/policies/rules_tpu.py", lambda text: text + RULE)
    good = (REPO / "tests" / "fixtures" / "policies" / "good" / "raycluster.yaml").read_text()
    (tree / "scratch.yaml").write_text(good.replace("groupName: tpu\n", "groupName: scratch\n", 1))
    seen = ask(
        tree,
        """
        import contextlib, io, json
        from tpuray import docs
        from tpuray.cli import main
        from tpuray.policies import RULES
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["check", "scratch.yaml"])
        print(json.dumps({
            "registered": [r.name for r in RULES if r.name == "tpu-group-not-scratch"],
            "docs": "tpu-group-not-scratch" in docs.policy_rule_table(),
            "check": [code, "is named scratch" in out.getvalue()],
        }))
        """,
    )
    assert seen == {"registered": ["tpu-group-not-scratch"], "docs": True, "check": [1, True]}


def add_cluster_labels_key(text: str) -> str:
    anchor = "    deletion_protection: bool = Field("
    field = (
        "    resource_labels: dict[str, str] = Field(\n"
        '        default_factory=dict, alias="resourceLabels", description="extra labels on the GKE cluster"\n'
        "    )\n"
    )
    return text.replace(anchor, field + anchor, 1)


def test_an_added_config_key_is_documented_parsed_and_checked_with_one_line(tmp_path: Path) -> None:
    tree = tree_with_one_edit(tmp_path, "tpuray/config/cluster.py", add_cluster_labels_key)
    stack_with(tree, 'config["tpuray:cluster"]["resourceLabels"] = {"team": "ml"}')
    seen = ask(
        tree,
        """
        import json
        from tpuray import docs
        from tpuray.config import ConfigError, read_stack_file
        from tpuray.config.checks import load_stack, parse_stack_config
        from pathlib import Path
        raw = read_stack_file(Path("stacks/Pulumi.newcomer.yaml"))
        raw["cluster"]["resourceLabels"] = {"team": 7}
        try:
            parse_stack_config(raw, "newcomer")
            bad = []
        except ConfigError as err:
            bad = err.lines
        print(json.dumps({
            "parsed": load_stack("newcomer").cluster.resource_labels,
            "docs": "cluster.resourceLabels" in docs.config_key_table(),
            "bad": bad,
        }))
        """,
    )
    assert seen == {
        "parsed": {"team": "ml"},
        "docs": True,
        "bad": ["tpuray:cluster.resourceLabels.team: 7 is invalid; input should be a valid string"],
    }
