"""No routine config change replaces a Google resource; the ForceNew data covers every input the program sets.

A change to an input the Google provider marks ForceNew makes Pulumi delete and recreate the
resource; the node pools have fixed names, so the old pool (every node of it, and what runs
there) goes first. The answers are the provider's own, read from its Go source with the file
and line of each field (tpuray/data/provider_force_new.yaml, tools/provider_force_new.py,
docs/seams.md). Each routine change below is applied to a committed stack, both sides are
previewed under the mocks, and every changed input of a Google resource is looked up.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, STACKS, mocked
from tpuray.preview import force_new
from tpuray.preview.diff import field_changes, flatten
from tpuray.preview.mockrun import StackRun, run_stack

Config = dict[str, Any]


def _pool(c: Config, name: str) -> Config:
    return next(p for p in c["tpuray:slicePools"] if p["name"] == name)


@dataclass(frozen=True)
class Routine:
    stack: str
    key: str  # the stack config key a user changes
    why: str  # why it is routine
    change: Callable[[Config], None]
    before: Callable[[Config], None] = lambda c: None  # the committed stack's state it starts from


def _digests(a: str, b: str) -> Callable[[Config], None]:
    return lambda c: c["tpuray:images"].update(digests={"ray-tpu": "sha256:" + a * 64, "serve-llm": "sha256:" + b * 64})


ROUTINE = [
    Routine("dev", "tpuray:slicePools[v6e-serve-dev].slices", "one more single-host serving slice (2x2)",
            lambda c: _pool(c, "v6e-serve-dev").update(slices=2)),
    Routine("prod", "tpuray:slicePools[v5e-serve].slices", "serving scaled out by a single-host v5e 2x4 slice",
            lambda c: _pool(c, "v5e-serve").update(slices=3)),
    Routine("dev", "tpuray:slicePools[v6e-dev].slices", "a second multi-host training slice (4x4)",
            lambda c: _pool(c, "v6e-dev").update(slices=2)),
    Routine("prod", "tpuray:cluster.cpuPool.minNodes", "more Ray heads kept warm",
            lambda c: c["tpuray:cluster"]["cpuPool"].update(minNodes=3)),
    Routine("prod", "tpuray:cluster.cpuPool.maxNodes", "room for more Ray heads",
            lambda c: c["tpuray:cluster"]["cpuPool"].update(maxNodes=8)),
    Routine("prod", "tpuray:cluster.masterAuthorizedNetworks", "a new office network reaches the control plane",
            lambda c: c["tpuray:cluster"]["masterAuthorizedNetworks"].append({"cidr": "10.130.0.0/16", "name": "office"})),
    Routine("prod", "tpuray:cluster.maintenance.exclusions", "a freeze for the next long run",
            lambda c: c["tpuray:cluster"]["maintenance"]["exclusions"].append(
                {"name": "q2-run", "start": "2026-04-06T00:00:00Z", "end": "2026-04-20T00:00:00Z",
                 "scope": "NO_MINOR_OR_NODE_UPGRADES"})),
    Routine("prod", "tpuray:workloads.train.steps", "a longer training run",
            lambda c: c["tpuray:workloads"]["train"].update(steps=8000)),
    Routine("prod", "tpuray:workloads.adminCidrs", "operators on a second VPN",
            lambda c: c["tpuray:workloads"]["adminCidrs"].append("10.131.0.0/16")),
    Routine("prod", "tpuray:observability.budget.monthlyUsd", "a new quarter's budget",
            lambda c: c["tpuray:observability"]["budget"].update(monthlyUsd=90000)),
    Routine("prod", "tpuray:images.digests", "the deploy workflow pushed new images",
            _digests("3", "4"), before=_digests("1", "2")),
]  # fmt: skip


def _run(tmp: Path, stack: str, *edits: Callable[[Config], None]) -> StackRun:
    doc = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    for edit in edits:
        edit(doc["config"])
    path = tmp / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return run_stack(str(path))


def replacements(key: str, base: StackRun, head: StackRun) -> list[str]:
    """One line per Google resource the change removes, and per changed input that replaces one."""
    a = {(r.type, r.name): r.inputs for r in base.resources if force_new.covers(r.type)}
    b = {(r.type, r.name): r.inputs for r in head.resources if force_new.covers(r.type)}
    out = [f"{key}: removes {t} {n}" for t, n in sorted(set(a) - set(b))]
    for (t, n), old in sorted(a.items()):
        if (t, n) not in b:
            continue
        for c in field_changes(old, b[(t, n)]):
            field = force_new.replaces(t, old, b[(t, n)], c.path)
            if field is not None:
                out.append(f"{key}: {t} {n} {c.path} forces replacement (ForceNew {field.schema}, {field.at})")
    return out


@pytest.mark.parametrize("routine", ROUTINE, ids=[f"{r.stack}:{r.key}" for r in ROUTINE])
def test_a_routine_config_change_replaces_no_google_resource(routine: Routine, tmp_path: Path) -> None:
    base = _run(tmp_path, routine.stack, routine.before)
    head = _run(tmp_path, routine.stack, routine.before, routine.change)
    assert field_changes(
        {f"{r.type} {r.name}": r.inputs for r in base.resources},
        {f"{r.type} {r.name}": r.inputs for r in head.resources},
    ), "the change changed nothing"
    assert replacements(routine.key, base, head) == []


def test_a_first_capacity_tier_moved_off_spot_does_replace_the_pool(tmp_path: Path) -> None:
    # Not routine, and the check sees it: Spot and on-demand VMs are different instances.
    base = _run(tmp_path, "dev")
    head = _run(tmp_path, "dev", lambda c: _pool(c, "v6e-serve-dev").update(capacity=[{"onDemand": True}]))
    assert replacements("tpuray:slicePools[v6e-serve-dev].capacity", base, head) == [
        "tpuray:slicePools[v6e-serve-dev].capacity: gcp:container/nodePool:NodePool v6e-serve-dev-0 nodeConfig.spot "
        "forces replacement (ForceNew node_config.spot, services/container/node_config.go:635)"
    ]


# ---------------------------------------------------------------------------- the data covers the program


@pytest.mark.parametrize("stack", STACKS)
def test_every_google_resource_type_the_program_declares_has_recorded_answers(stack: str) -> None:
    types = {r.type for r in mocked(stack).resources if r.type.startswith("gcp:")}
    assert sorted(t for t in types if not force_new.covers(t)) == []


@pytest.mark.parametrize("stack", STACKS)
def test_every_input_the_program_sets_on_a_google_resource_has_a_recorded_answer(stack: str) -> None:
    missing = set()
    for r in mocked(stack).resources:
        if not force_new.covers(r.type):
            continue
        for path in flatten(r.inputs):
            field = force_new.field_of(r.type, path)
            # A map's keys and a primitive list's items are answered by the map or list itself.
            if field is None or (field.path != force_new.normalize(path) and field.kind not in ("map", "list")):
                missing.add(f"{r.type} {force_new.normalize(path)}")
    assert sorted(missing) == []  # refresh: tools/provider_force_new.py (docs/seams.md)


def test_every_recorded_answer_names_the_provider_commit_file_and_line_it_was_read_from() -> None:
    doc = force_new.document()
    assert re.fullmatch(r"[0-9a-f]{40}", doc["source"]["commit"])
    assert doc["source"]["repository"] == "https://github.com/hashicorp/terraform-provider-google-beta"
    for t in doc["resources"]:
        for f in force_new.fields(t).values():
            assert re.fullmatch(r"[\w/.-]+\.go:\d+", f.at), (t, f.path)


# ---------------------------------------------------------------------------- how ForceNew is applied

POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"


def test_a_changed_force_new_scalar_replaces_the_pool_and_names_its_source_line() -> None:
    field = force_new.replaces(POOL, {"initialNodeCount": 1}, {"initialNodeCount": 2}, "initialNodeCount")
    assert field is not None
    assert (field.schema, field.at) == ("initial_node_count", "services/container/resource_container_node_pool.go:480")


def test_a_changed_node_count_updates_the_pool_in_place() -> None:
    assert force_new.replaces(POOL, {"nodeCount": 1}, {"nodeCount": 2}, "nodeCount") is None


def test_moving_a_pool_from_initial_node_count_to_node_count_replaces_nothing() -> None:
    # initial_node_count is Optional+Computed: left out of the config, it keeps its prior value.
    old, new = {"initialNodeCount": 2}, {"nodeCount": 2}
    assert force_new.replaces(POOL, old, new, "initialNodeCount") is None
    assert force_new.replaces(POOL, old, new, "nodeCount") is None


def test_a_field_inside_a_force_new_block_answers_for_itself() -> None:
    # placement_policy is ForceNew, tpu_topology is not: only adding or removing the block replaces.
    old = {"placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4"}}
    new = {"placementPolicy": {"type": "COMPACT", "tpuTopology": "4x8"}}
    assert force_new.replaces(POOL, old, new, "placementPolicy.tpuTopology") is None
    added = force_new.replaces(POOL, {}, old, "placementPolicy.type")
    assert added is not None and added.schema == "placement_policy"


def test_an_item_of_a_force_new_list_of_primitives_replaces() -> None:
    old = {"nodeConfig": {"oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"]}}
    new = {"nodeConfig": {"oauthScopes": ["https://www.googleapis.com/auth/devstorage.read_only"]}}
    field = force_new.replaces(CLUSTER, old, new, "nodeConfig.oauthScopes[0]")
    assert field is not None and field.schema == "node_config.oauth_scopes"


def test_a_label_key_with_dots_is_answered_by_its_map() -> None:
    path = "nodeConfig.labels.cloud.google.com/compute-class"
    field = force_new.field_of(POOL, path)
    assert field is not None and (field.schema, field.kind, field.force_new) == ("node_config.labels", "map", False)


def test_a_type_the_data_does_not_cover_has_no_answer() -> None:
    assert not force_new.covers("gcp:storage/bucket:Bucket")
    assert force_new.replaces("gcp:storage/bucket:Bucket", {"name": "a"}, {"name": "b"}, "name") is None
