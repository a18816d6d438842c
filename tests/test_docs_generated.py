"""Generated sections of docs/ (tpuray/docs.py) match the code: a rule added to the registry, or
an enforcement level changed in policies/policy-config.*.json, fails here until
`python -m tpuray.docs` has rewritten docs/policies.md."""

from __future__ import annotations

import pytest

from tpuray import docs


def test_no_generated_section_is_stale() -> None:
    assert docs.stale() == [], "run `.venv/bin/python -m tpuray.docs` and commit docs/"


def test_the_policy_table_has_one_row_per_rule_with_its_levels() -> None:
    table = docs.policy_rule_table()
    assert (
        "| `rayjob-deadlines` | project | RayCluster, RayJob, RayService | mandatory (advisory in dev) | yes |" in table
    )
    assert "| `gke-private-nodes` | project | Cluster | mandatory | no | GKE nodes have private IPs only. |" in table
    assert "| `tpu-num-of-hosts` | gke | RayCluster, RayJob, RayService | mandatory | yes |" in table


def test_a_policy_config_entry_of_properties_alone_keeps_the_level_all_gives_it() -> None:
    # dev, staging and prod set kuberay-field-version's and serve-llm-vllm-image's properties only.
    table = docs.policy_rule_table()
    assert (
        "| `kuberay-field-version` | gke | RayCluster, RayJob, RayService | advisory (mandatory in dev, staging, prod) |"
        in table
    )
    assert "| `serve-llm-vllm-image` | gke | RayCluster, RayJob, RayService | mandatory | yes |" in table


def test_a_section_without_markers_is_an_error() -> None:
    with pytest.raises(ValueError, match="no <!-- BEGIN GENERATED: policy-rules -->"):
        docs.render("policy-rules", "# Policies\n\n| name |\n")


def test_render_replaces_only_the_section() -> None:
    text = "before\n<!-- BEGIN GENERATED: policy-rules (x) -->\nold\n<!-- END GENERATED: policy-rules -->\nafter\n"
    out = docs.render("policy-rules", text)
    assert out.startswith("before\n<!-- BEGIN GENERATED: policy-rules (x) -->\n| name | profile | applies to |")
    assert out.endswith("|\n<!-- END GENERATED: policy-rules -->\nafter\n") and "old" not in out


def test_the_config_key_table_has_every_key_with_type_default_and_description() -> None:
    table = docs.config_key_table()
    assert (
        "| `tpuray:slicePools[].capacity[].flexStart` | bool | false |  | flex-start (DWS): node pools scale from zero |"
        in (table)
    )
    assert "| `tpuray:workloads.train.steps` | int | 200 | >= 1 | training steps |" in table
    assert "| `tpuray:slicePools[].idleTimeoutMinutes` | int | 60 | >= 5 |" in table


def test_every_config_key_carries_a_description_for_the_generated_reference() -> None:
    from tpuray.config import StackConfig

    schema = StackConfig.model_json_schema()
    models = {"StackConfig": schema, **schema["$defs"]}
    undocumented = [
        f"{model}.{key}"
        for model, body in models.items()
        for key, field in body.get("properties", {}).items()
        if not field.get("description")
    ]
    assert undocumented == [], "give these fields Field(description=...)"


def test_the_serve_keys_are_described_in_the_reference() -> None:
    table = docs.config_key_table()
    assert (
        "| `tpuray:workloads.serve.replicas` | int | 1 | >= 1 | Serve replicas, each on a whole slice of the pool |"
        in (table)
    )
