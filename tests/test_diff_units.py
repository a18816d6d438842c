"""tpuray diff's comparison, cost deltas and report without git or a preview subprocess:
hand-written preview documents shaped like `tpuray preview --json` (resources with type,
name and inputs; violations with policy, resource, message and level; cost totals).
test_diff.py keeps the end-to-end proof on real git refs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tpuray.preview import diff
from tpuray.preview.diff import ABSENT, CostDiff, FieldChange, Report, ResourceChange, Side, StackDiff

POOL = "gcp:container/nodePool:NodePool"
RAYJOB = "kubernetes:ray.io/v1:RayJob"
WRONG_SA = {"policy": "tpu-node-service-account", "resource": "slices-a", "message": "uses the default SA"}


def side(resources: dict[tuple[str, str], dict[str, Any]] | None = None, violations: Any = None, **kw: Any) -> Side:
    doc: dict[str, Any] = {
        "resources": [{"type": t, "name": n, "inputs": i} for (t, n), i in (resources or {}).items()]
    }
    if violations is not None:
        doc["violations"] = violations
    return Side("dev", doc=doc, **kw)


def total(known: float, unknown: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"value": None if unknown else known, "knownPart": known, "unknownParts": list(unknown)}


# ---------------------------------------------------------------------------- flatten and show


def test_flatten_names_nested_keys_and_list_items_by_path() -> None:
    assert diff.flatten({"nodeConfig": {"labels": {"a": "1"}, "taints": [{"key": "google.com/tpu"}]}}) == {
        "nodeConfig.labels.a": "1",
        "nodeConfig.taints[0].key": "google.com/tpu",
    }


def test_flatten_keeps_empty_containers_as_leaves() -> None:
    assert diff.flatten({"a": {}, "b": [], "c": None}) == {"a": {}, "b": [], "c": None}


def test_flatten_of_a_top_level_list_starts_with_its_index() -> None:
    assert diff.flatten([1, 2]) == {"[0]": 1, "[1]": 2}


def test_show_writes_whole_floats_as_integers() -> None:
    assert diff.show(4.0) == "4"
    assert diff.show(0.5) == "0.5"


def test_show_cuts_at_70_characters_by_default() -> None:
    assert diff.show("x" * 80) == '"' + "x" * 68 + "…"
    assert diff.show("x" * 68) == '"' + "x" * 68 + '"'


def test_show_writes_other_values_as_their_text() -> None:
    assert diff.show(Path("stacks")) == '"stacks"'


def test_show_marks_an_absent_value() -> None:
    assert diff.show(ABSENT) == "(absent)"


def test_show_cuts_long_values_to_the_width_with_an_ellipsis() -> None:
    assert diff.show("abcdefghij", width=6) == '"abcd…'
    assert diff.show("abcd", width=6) == '"abcd"'


def test_a_field_change_reads_old_arrow_new() -> None:
    assert FieldChange("nodeConfig.machineType", "ct6e-standard-4t", ABSENT).text() == (
        'nodeConfig.machineType: "ct6e-standard-4t" → (absent)'
    )


def test_a_field_change_cuts_both_values_to_the_width() -> None:
    assert FieldChange("p", "abcdefghij", "klmnopqrst").text(width=6) == 'p: "abcd… → "klmn…'


def test_a_field_change_cuts_both_values_at_70_characters_by_default() -> None:
    assert FieldChange("p", "x" * 80, "y" * 80).text() == 'p: "' + "x" * 68 + '… → "' + "y" * 68 + "…"


# ---------------------------------------------------------------------------- field changes


def test_numbers_equal_as_int_and_float_are_no_change() -> None:
    assert diff.field_changes({"initialNodeCount": 4}, {"initialNodeCount": 4.0}) == []


def test_added_removed_and_changed_fields_are_listed_by_path() -> None:
    got = diff.field_changes({"a": 1, "b": 2}, {"b": 3, "c": 4})
    assert [(c.path, c.old, c.new) for c in got] == [("a", 1, ABSENT), ("b", 2, 3), ("c", ABSENT, 4)]


def test_an_unchanged_field_before_a_changed_one_hides_nothing() -> None:
    got = diff.field_changes({"a": 1, "b": 2}, {"a": 1, "b": 3})
    assert [(c.path, c.old, c.new) for c in got] == [("b", 2, 3)]


def test_a_yaml_field_before_another_change_hides_nothing() -> None:
    got = diff.field_changes({"a": "x\ny", "b": 1}, {"a": "x\nz", "b": 2})
    assert [(c.path, c.old, c.new) for c in got] == [("a (line 2)", "y", "z"), ("b", 1, 2)]


def test_a_value_that_becomes_multi_line_is_shown_line_by_line() -> None:
    got = diff.field_changes({"y": "a: 1"}, {"y": "a: 1\nb: 2"})
    assert [(c.path, c.old, c.new) for c in got] == [("y (line 2)", ABSENT, "b: 2")]


def test_embedded_yaml_changes_are_shown_line_by_line() -> None:
    old = {"spec": {"serveConfigV2": "applications:\n- name: llm\n  route_prefix: /\n"}}
    new = {"spec": {"serveConfigV2": "applications:\n- name: chat\n  route_prefix: /\n  extra: 1\n"}}
    got = diff.field_changes(old, new)
    assert [(c.path, c.old, c.new) for c in got] == [
        ("spec.serveConfigV2 (line 2)", "- name: llm", "- name: chat"),
        ("spec.serveConfigV2 (line 4)", ABSENT, "  extra: 1"),
    ]


def test_a_removed_yaml_line_is_shown_as_absent() -> None:
    got = diff.field_changes({"y": "a: 1\nb: 2"}, {"y": "a: 1"})
    assert [(c.path, c.old, c.new) for c in got] == [("y (line 2)", "b: 2", ABSENT)]


# ---------------------------------------------------------------------------- replace or update


def _doc(path: str, value: Any) -> dict[str, Any]:
    """{"a": {"b": [value]}} for "a.b[0]": one input document holding `value` at `path`."""
    doc: Any = value
    for part in reversed(path.replace("[", ".[").split(".")):
        doc = [doc] if part.startswith("[") else {part: doc}
    return doc


# The Google provider's answers (tpuray/data/provider_force_new.yaml, read from its source).
@pytest.mark.parametrize(
    ("type_", "path", "replaces"),
    [
        (POOL, "nodeConfig.spot", True),  # Spot and on-demand VMs are different instances
        (POOL, "nodeConfig.machineType", False),  # the provider changes the machine type in place
        (POOL, "initialNodeCount", True),
        (POOL, "nodeCount", False),  # resized in place
        (POOL, "placementPolicy.tpuTopology", False),  # a field of a ForceNew block answers for itself
        (POOL, "nodeConfig.reservationAffinity.values[0]", True),  # an item of a ForceNew list
        (POOL, "nodeConfig.labels.team", False),
        (POOL, "autoscaling.totalMaxNodeCount", False),
        (RAYJOB, "metadata.name", True),
        (RAYJOB, "spec.entrypoint", False),
        ("gcp:storage/bucket:Bucket", "name", False),  # a type the data does not cover: an update
    ],
)
def test_a_change_replaces_only_under_a_force_new_field(type_: str, path: str, replaces: bool) -> None:
    old, new = _doc(path, 1), _doc(path, 2)
    assert diff._replaces(type_, FieldChange(path, 1, 2), old, new) is replaces


def test_resources_are_added_removed_replaced_or_updated() -> None:
    base = side({(POOL, "a"): {"nodeConfig": {"spot": True}}, (POOL, "b"): {"nodeCount": 1}, (POOL, "gone"): {}})
    head = side({(POOL, "a"): {"nodeConfig": {"spot": False}}, (POOL, "b"): {"nodeCount": 2}, (POOL, "new"): {}})
    got = [
        (r.action, r.type, r.name, [(f.path, f.replaces) for f in r.fields]) for r in diff.resource_changes(base, head)
    ]
    assert got == [
        ("replace", POOL, "a", [("nodeConfig.spot", True)]),
        ("update", POOL, "b", [("nodeCount", False)]),
        ("remove", POOL, "gone", []),
        ("add", POOL, "new", []),
    ]


def test_a_replacing_change_says_so_in_its_text() -> None:
    change = FieldChange("nodeConfig.spot", True, False, replaces=True)
    assert change.text() == "nodeConfig.spot: true → false (forces replacement)"


def test_an_unchanged_resource_is_not_listed() -> None:
    same = {(POOL, "a"): {"n": 1}}
    assert diff.resource_changes(side(same), side(same)) == []


def test_a_resource_change_serializes_absent_values_as_null() -> None:
    change = ResourceChange("update", POOL, "a", [FieldChange("n", ABSENT, 2), FieldChange("m", 1, ABSENT)])
    assert change.as_json() == {
        "action": "update",
        "type": POOL,
        "name": "a",
        "fields": [
            {"path": "n", "old": None, "new": 2, "replaces": False},
            {"path": "m", "old": 1, "new": None, "replaces": False},
        ],
    }


def test_a_side_without_a_document_has_no_resources_or_violations() -> None:
    empty = Side("dev", error="boom")
    assert (empty.resources, empty.violations) == ({}, [])


def test_a_resource_without_inputs_has_empty_inputs() -> None:
    assert Side("dev", doc={"resources": [{"type": POOL, "name": "a"}]}).resources == {(POOL, "a"): {}}


# ---------------------------------------------------------------------------- violations


def test_violations_introduced_and_resolved_are_told_apart_by_policy_resource_and_message() -> None:
    kept = {"policy": "p", "resource": "r", "message": "m"}
    other_message = {"policy": WRONG_SA["policy"], "resource": "slices-a", "message": "uses the workload SA"}
    introduced, resolved = diff.violation_changes(
        side(violations=[kept, WRONG_SA]), side(violations=[kept, other_message])
    )
    assert (introduced, resolved) == ([other_message], [WRONG_SA])


def test_the_same_violation_on_another_resource_is_a_new_one() -> None:
    on_b = {**WRONG_SA, "resource": "slices-b"}
    assert diff.violation_changes(side(violations=[WRONG_SA]), side(violations=[on_b])) == ([on_b], [WRONG_SA])


def test_violations_are_listed_in_policy_order() -> None:
    a, b = {"policy": "b-rule", "resource": "r", "message": "m"}, {"policy": "a-rule", "resource": "r", "message": "m"}
    assert diff.violation_changes(side(violations=[]), side(violations=[a, b])) == ([b, a], [])


def test_a_document_with_null_violations_has_none() -> None:
    assert side(violations=None).violations == []


# ---------------------------------------------------------------------------- cost


LINE = {"pool": "slices-a", "generation": "v6e", "topology": "4x4", "tier": "spot", "role": "worker"}


def cost_doc(hourly: float, per_chip: float = 1.0, **line: Any) -> dict[str, Any]:
    end = {"parts": [{"pool": "slices-a", "line": "worker", "hourly": hourly, "exact": True}]}
    return {
        "total": {"monthly": {"hourly": total(hourly * 730)}, "hourly": {"hourly": total(hourly)}},
        "range": {"low": end, "high": end},
        "lines": [{**LINE, **line, "hourly": hourly, "price": {"perChipHour": per_chip}}],
    }


def test_cost_totals_are_read_per_side_scale_and_kind() -> None:
    cost = CostDiff(cost_doc(10.0), cost_doc(12.0))
    assert cost.total("base", "hourly") == total(10.0)
    assert cost.total("head", "monthly") == total(8760.0)
    assert CostDiff(None, cost_doc(1.0)).total("base", "hourly") is None


def test_cost_range_ends_come_back_from_the_document() -> None:
    low, high = CostDiff(cost_doc(10.0), None).range("base")
    assert (low.amount, high.amount, low.exact) == (10.0, 10.0, True)
    assert CostDiff(cost_doc(10.0), None).range("head") is None


def test_cost_lines_list_only_those_that_changed_appeared_or_went() -> None:
    base = {"lines": [{**LINE, "hourly": 1.0, "price": {"perChipHour": 1.0}}]}
    same_price = CostDiff(base, {"lines": [{**LINE, "hourly": 1.0, "price": {"perChipHour": 1.0}}]})
    assert same_price.line_changes() == []
    cheaper = {**LINE, "hourly": 1.0, "price": {"perChipHour": 0.5}}
    assert CostDiff(base, {"lines": [cheaper]}).line_changes() == [(base["lines"][0], cheaper)]
    more_hours = {**LINE, "hourly": 2.0, "price": {"perChipHour": 1.0}}
    assert CostDiff(base, {"lines": [more_hours]}).line_changes() == [(base["lines"][0], more_hours)]
    new_pool = {**LINE, "pool": "slices-b", "hourly": 1.0, "price": {"perChipHour": 1.0}}
    assert CostDiff(base, {"lines": [*base["lines"], new_pool]}).line_changes() == [(None, new_pool)]
    assert CostDiff(base, None).line_changes() == [(base["lines"][0], None)]


def test_total_text_without_a_total_is_n_a() -> None:
    assert diff.total_text(None) == "n/a"


def test_total_text_scales_the_total() -> None:
    assert diff.total_text(total(86.4), 730, "mo") == "$63,072/mo"
    assert diff.total_text(total(43.2, ("prices.v6e.spot",))) == "unknown (≥ $43.20/h known)"


@pytest.mark.parametrize(
    ("a", "b", "text"),
    [
        (None, total(1.0), "n/a"),
        (total(1.0), None, "n/a"),
        (total(10.0), total(12.5), "+$2.50/h"),
        (total(12.5), total(10.0), "−$2.50/h"),
        (total(10.0), total(10.0), "+$0.00/h"),
        (total(10.0), total(12.5, ("x",)), "unknown (known part +$2.50/h)"),
        (total(12.5, ("x",)), total(10.0), "unknown (known part −$2.50/h)"),
        (total(10.0, ("x",)), total(10.0), "unknown"),
        (total(10.0), total(10.5, ("x",)), "unknown (known part +$0.50/h)"),
    ],
)
def test_delta_text(a: dict[str, Any] | None, b: dict[str, Any] | None, text: str) -> None:
    assert diff.delta_text(a, b) == text


def test_delta_text_scales_by_the_factor() -> None:
    assert diff.delta_text(total(1.0), total(2.0), 730, "mo") == "+$730.00/mo"
    assert diff.delta_text(total(1.0, ("x",)), total(2.0), 730, "mo") == "unknown (known part +$730.00/mo)"


def test_side_cost_of_a_side_without_a_document_is_none() -> None:
    assert diff.side_cost(Side("dev", error="boom"), Path(".")) == (None, "")


def test_side_cost_takes_the_documents_cost_range() -> None:
    doc = cost_doc(3.0)
    assert diff.side_cost(Side("dev", doc={"cost": doc}), Path(".")) == (doc, "")


def test_side_cost_of_an_older_ref_prices_its_pools_with_the_heads_model(tmp_path: Path) -> None:
    # dev's stack file with a price override, and a workloads value the head would refuse:
    # the cost needs only the pools and prices, so the workloads must not block it.
    text = (REPO / "stacks" / "Pulumi.dev.yaml").read_text()
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.dev.yaml").write_text(
        text + "  tpuray:prices:\n    v6e:\n      spot: 1.25\n  tpuray:workloads: not-a-list\n"
    )
    cost, note = diff.side_cost(Side("dev", doc={}), tmp_path)
    assert note == "base cost computed with the head's price model (the base ref predates it)"
    assert [(x["pool"], x["tier"]) for x in cost["lines"]] == [
        ("v6e-dev", "spot"),
        ("v6e-dev", "on-demand"),
        ("v6e-serve-dev", "spot"),
        ("v6e-serve-dev", "on-demand"),
    ]
    assert cost["lines"][0]["price"]["perChipHour"] == 1.25


def test_side_cost_of_an_unreadable_stack_file_says_why(tmp_path: Path) -> None:
    cost, note = diff.side_cost(Side("dev", doc={}), tmp_path)
    assert cost is None
    assert note.startswith("base cost not computable (")


# ---------------------------------------------------------------------------- the report


def stack_diff(head: Side, base: Side | None = None, resources: list[ResourceChange] | None = None) -> StackDiff:
    return StackDiff("dev", base or side(), head, resources or [], [], [], CostDiff(None, None))


def test_counts_tally_each_action() -> None:
    changes = [ResourceChange(a, POOL, str(i)) for i, a in enumerate(["add", "add", "replace", "remove"])]
    assert stack_diff(side(), resources=changes).counts() == {"add": 2, "update": 0, "replace": 1, "remove": 1}


def test_head_mandatory_lists_only_mandatory_violations() -> None:
    advisory = {**WRONG_SA, "level": "advisory"}
    mandatory = {**WRONG_SA, "level": "mandatory"}
    assert stack_diff(side(violations=[advisory, mandatory])).head_mandatory == [mandatory]


def test_stack_diff_json() -> None:
    introduced = {**WRONG_SA, "level": "mandatory"}
    d = StackDiff(
        "dev",
        Side("dev", exists=False),
        side(violations=[introduced]),
        [ResourceChange("add", POOL, "a")],
        [introduced],
        [],
        CostDiff(None, {"total": {}}, "a note"),
    )
    assert d.as_json() == {
        "stack": "dev",
        "base": {"exists": False, "error": None},
        "head": {"exists": True, "error": None},
        "resources": [{"action": "add", "type": POOL, "name": "a", "fields": []}],
        "violations": {"introduced": [introduced], "resolved": [], "headMandatory": 1},
        "cost": {"base": None, "head": {"total": {}}, "note": "a note"},
    }


def test_report_json_names_the_base_ref_and_commit() -> None:
    report = Report("main", "abc123", [stack_diff(side())])
    assert report.as_json()["base"] == {"ref": "main", "commit": "abc123"}
    assert [s["stack"] for s in report.as_json()["stacks"]] == ["dev"]


def test_a_head_that_fails_outranks_a_mandatory_violation() -> None:
    failing = stack_diff(Side("dev", error="bad config"))
    violated = stack_diff(side(violations=[{**WRONG_SA, "level": "mandatory"}]))
    assert Report("main", "abc", [violated, failing]).exit_code == 2


def test_a_stack_removed_at_head_does_not_fail_the_diff() -> None:
    assert Report("main", "abc", [stack_diff(Side("dev", exists=False, error="gone"))]).exit_code == 0


def test_compare_lists_no_resources_when_a_side_failed() -> None:
    head = side({(POOL, "a"): {}})
    assert compare_resources(Side("dev", error="boom"), head) == []
    assert compare_resources(head, Side("dev", error="boom")) == []
    assert compare_resources(side(), head) == [("add", "a")]


def compare_resources(base: Side, head: Side) -> list[tuple[str, str]]:
    return [(r.action, r.name) for r in diff.compare("dev", Path("."), Path("."), base, head).resources]


def test_compare_carries_violations_and_the_base_cost_note(tmp_path: Path) -> None:
    d = diff.compare("dev", tmp_path, tmp_path, side(violations=[]), side(violations=[WRONG_SA]))
    assert (d.stack, d.introduced, d.resolved) == ("dev", [WRONG_SA], [])
    assert (d.cost.base, d.cost.head) == (None, None)
    assert d.cost.note.startswith("base cost not computable (")


def test_compare_keeps_both_sides_and_their_costs() -> None:
    base = Side("dev", doc={"cost": cost_doc(1.0)})
    head = Side("dev", doc={"cost": cost_doc(2.0)})
    d = diff.compare("dev", Path("."), Path("."), base, head)
    assert (d.base, d.head) == (base, head)
    assert (d.cost.base, d.cost.head) == (cost_doc(1.0), cost_doc(2.0))


def test_the_pr_comment_marks_the_field_that_forces_the_replacement() -> None:
    from tpuray.commands.diff import markdown

    change = ResourceChange(
        "replace",
        POOL,
        "v6e-serve-dev-0",
        [
            FieldChange("nodeConfig.labels.tpuray.dev/capacity-tier", "spot", "on-demand"),
            FieldChange("nodeConfig.spot", True, False, replaces=True),
        ],
    )
    lines = markdown(Report("main", "abc1234567", [stack_diff(side(), resources=[change])])).splitlines()
    assert "  - `nodeConfig.spot`: `true` → `false` **(forces replacement)**" in lines
    assert '  - `nodeConfig.labels.tpuray.dev/capacity-tier`: `"spot"` → `"on-demand"`' in lines
