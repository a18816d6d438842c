"""`tpuray diff`: each case is a throwaway git repository (a copy of this project) whose
working tree changes one stack against the committed base, so no test depends on this
repository's own history."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tpuray.cli import main
from tpuray.preview.diff import DiffError, Report, StackDiff, field_changes, resolve_ref, run_diff

NODE_POOL = "gcp:container/nodePool:NodePool"
COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"


def _git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com")  # fmt: skip
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("diffrepo") / "tpuray"
    # What git would commit here (tracked and new files, .gitignore applied): not the built
    # tools, virtual environment or mutation trees beside them (hundreds of MB).
    listed = _git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():  # a tracked file deleted in the working tree is not copied
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "tag", "base")
    return repo


def _change_stack(repo: Path, stack: str, edit: Callable[[dict[str, Any]], None]) -> None:
    """Reset the tree to the base commit, edit one stack file and commit it as the head."""
    _git(repo, "checkout", "-q", "-f", "main")
    _git(repo, "reset", "-q", "--hard", "base")
    path = repo / "stacks" / f"Pulumi.{stack}.yaml"
    doc = yaml.safe_load(path.read_text())
    edit(doc["config"])
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    _git(repo, "commit", "-q", "-am", f"change {stack}")


def _pool(config: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in config["tpuray:slicePools"] if p["name"] == name)


def _only(report: Report) -> StackDiff:
    (stack,) = report.stacks
    assert stack.base.error is None and stack.head.error is None, (stack.base.error, stack.head.error)
    return stack


def _change(stack: StackDiff, type_: str, name: str) -> Any:
    return next(r for r in stack.resources if (r.type, r.name) == (type_, name))


def test_topology_change_replaces_the_slice_node_pool(project: Path) -> None:
    def to_4x8(config: dict[str, Any]) -> None:
        _pool(config, "v6e-dev").update(topology="4x8")
        config["tpuray:queues"]["teams"][0]["quotas"][0]["chips"] = 32  # the dev queue holds one 4x8 slice

    _change_stack(project, "dev", to_4x8)
    stack = _only(run_diff(project, "base", ["dev"]))
    pool = _change(stack, NODE_POOL, "v6e-dev-0")
    fields = {f.path: (f.old, f.new) for f in pool.fields}
    assert pool.action == "replace"
    assert fields["placementPolicy.tpuTopology"] == ("4x4", "4x8")
    assert fields["initialNodeCount"] == (4, 8)  # hosts of the slice, from the catalog


@pytest.fixture(scope="module")
def serve_pool_on_demand(project: Path) -> Report:
    """dev's serve pool moved from spot to on-demand: one diff that two tests read (each diff runs
    two previews in subprocesses)."""
    _change_stack(project, "dev", lambda c: _pool(c, "v6e-serve-dev").update(capacity=[{"onDemand": True}]))
    return run_diff(project, "base", ["dev"])


def test_capacity_chain_change_updates_the_compute_class_and_the_cost(serve_pool_on_demand: Report) -> None:
    stack = _only(serve_pool_on_demand)
    cc = _change(stack, COMPUTE_CLASS, "v6e-serve-dev-computeclass")
    assert cc.action == "update"
    assert any(f.path.startswith("spec.priorities[") for f in cc.fields)
    assert _change(stack, NODE_POOL, "v6e-serve-dev-0").action == "replace"  # spot -> on-demand VMs
    base, head = stack.cost.total("base", "max"), stack.cost.total("head", "max")
    # v6e 2x2 = 4 chips now priced on-demand at $2.70 instead of an unknown spot price
    assert head["knownPart"] - base["knownPart"] == pytest.approx(4 * 2.70)
    assert "v6e-serve-dev v6e 2x2 spot" in base["unknownParts"]
    assert "v6e-serve-dev v6e 2x2 spot" not in head["unknownParts"]


def test_markdown_shows_the_monthly_range_delta_with_the_price_source_and_snapshot_date(
    serve_pool_on_demand: Report,
) -> None:
    from tpuray.commands.diff import markdown

    text = markdown(serve_pool_on_demand)
    # 4 v6e chips move from spot (at least 9% of $2.70) to on-demand ($2.70): the low end rises
    # by 4 x (2.70 - 0.243) x 730 h; the high end (every slice on-demand) does not move.
    assert (
        "| range per month (min scale, first tiers → max scale, worst tiers) | at least $3,548/mo to $39,420/mo "
        "| at least $10,722/mo to $39,420/mo | +$7,174/mo (between lower bounds) to +$0.00/mo |"
    ) in text
    assert "_Prices: Google Cloud TPU pricing pages (published list prices), snapshot 2024-12-20 (" in text


def test_violation_introduced_is_listed_and_the_diff_exits_1(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Spot with nothing behind it: a spot preemption would leave serving without capacity.
    _change_stack(project, "prod", lambda c: _pool(c, "v5e-serve").update(capacity=[{"spot": True}]))
    monkeypatch.chdir(project)  # `tpuray diff` compares the repository it is run in
    code = main(["diff", "base", "--stack", "prod", "--markdown"])
    out = capsys.readouterr()
    assert code == 1, out.err
    introduced = [ln for ln in out.out.splitlines() if "introduced:" in ln]
    assert any("[mandatory]" in ln and "v5e-serve" in ln for ln in introduced), out.out
    assert out.out.startswith("<!-- tpuray-diff -->")


def test_unknown_ref_exits_2_with_a_clear_message(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(project)
    assert main(["diff", "no-such-branch"]) == 2
    err = capsys.readouterr().err
    assert "error: unknown git ref 'no-such-branch'" in err
    assert "Traceback" not in err


def test_a_ref_missing_from_a_shallow_clone_is_fetched_from_origin(project: Path, tmp_path: Path) -> None:
    _git(project, "branch", "-f", "old-base", "base")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth=1", "--single-branch", "--branch", "main", f"file://{project}", str(clone)],
                   check=True, capture_output=True)  # fmt: skip
    with pytest.raises(DiffError):  # not in the clone yet...
        resolve_ref(clone, "no-such-branch")
    sha = resolve_ref(clone, "old-base")  # ...but this one is fetched
    assert sha == _git(project, "rev-parse", "base").strip()


def test_changed_fields_show_old_and_new_values_and_absent_keys() -> None:
    changes = field_changes({"a": {"b": 1.0, "gone": True}, "l": [1, 2]}, {"a": {"b": 2}, "l": [1, 3], "new": "x"})
    assert [c.text() for c in changes] == [
        "a.b: 1 → 2",
        "a.gone: true → (absent)",
        "l[1]: 2 → 3",
        'new: (absent) → "x"',
    ]


def test_a_code_change_in_ray_apps_shows_as_a_new_bundle_in_the_job_and_the_service(project: Path) -> None:
    _git(project, "checkout", "-q", "-f", "main")
    _git(project, "reset", "-q", "--hard", "base")
    model = project / "ray_apps" / "model.py"
    model.write_text(model.read_text() + "\n# a tuned learning-rate schedule\n")
    _git(project, "commit", "-q", "-am", "change the model code")
    stack = _only(run_diff(project, "base", ["dev"]))
    job = _change(stack, "kubernetes:ray.io/v1:RayJob", "ray-tpuray-dev-train")
    service = _change(stack, "kubernetes:ray.io/v1:RayService", "ray-tpuray-dev-serve")
    (env,) = job.fields
    assert job.action == "update" and service.action == "update"
    assert env.path == "spec.runtimeEnvYAML (line 1)"
    assert re.fullmatch(r"working_dir: gs://acme-ml-dev-bundles/ray-apps/tpuray-apps-[0-9a-f]{16}\.zip", env.new)
    assert env.old != env.new
    assert [f.path for f in service.fields] == ["spec.serveConfigV2 (line 6)"]
