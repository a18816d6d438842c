"""Exit codes, the contract CI builds on: preview 0 on advisories alone and 1 on any
mandatory violation; diff 0 clean, 1 when the head fails or is violated, 2 on a bad ref;
check 0, 1 and 2."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tpuray.cli import main
from tpuray.commands import diff as diff_command
from tpuray.config import stacks_dir
from tpuray.preview.diff import CostDiff, Report, Side, StackDiff

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "policies"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------- preview


def dev_stack(tmp_path: Path, name: str, spot_only: bool = False, image: str | None = None) -> str:
    doc = yaml.safe_load((stacks_dir() / "Pulumi.dev.yaml").read_text())
    if spot_only:  # spot-has-fallback: advisory in dev (policies/policy-config.dev.json)
        doc["config"]["tpuray:slicePools"][0]["capacity"] = [{"spot": True}]
        doc["config"]["tpuray:queues"]["teams"][0]["quotas"][0]["tier"] = "spot"  # the chain's only tier now
    if image:  # ray-version-pinned: mandatory everywhere
        doc["config"]["tpuray:ray"]["image"] = image
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def levels(out: str) -> set[tuple[str, str]]:
    return {(v["policy"], v["level"]) for v in json.loads(out)["violations"]}


def test_preview_exits_0_when_every_violation_is_advisory(tmp_path, capsys) -> None:
    code, out, _ = run(capsys, "preview", dev_stack(tmp_path, "adv", spot_only=True), "--json")
    assert levels(out) == {("spot-has-fallback", "advisory")}
    assert code == 0


def test_preview_exits_1_when_one_violation_of_several_is_mandatory(tmp_path, capsys) -> None:
    path = dev_stack(tmp_path, "mix", spot_only=True, image="rayproject/ray:latest-tpu")
    code, out, _ = run(capsys, "preview", path, "--json")
    assert levels(out) == {("spot-has-fallback", "advisory"), ("ray-version-pinned", "mandatory")}
    assert code == 1


def test_preview_table_output_exits_like_json(tmp_path, capsys) -> None:
    code, out, _ = run(capsys, "preview", dev_stack(tmp_path, "mix", image="rayproject/ray:latest-tpu"))
    assert code == 1 and "policy violations (" in out


# ---------------------------------------------------------------------------- diff


def side(stack: str = "dev", *levels: str, error: str | None = None, exists: bool = True) -> Side:
    violations = [{"policy": f"rule-{i}", "level": lv, "resource": "NodePool x", "message": "m"} for i, lv in
                  enumerate(levels)]  # fmt: skip
    doc = None if error or not exists else {"resources": [], "violations": violations}
    return Side(stack, doc=doc, error=error, exists=exists)


def report(*stacks: tuple[Side, Side]) -> Report:
    return Report("main", "0" * 40, [StackDiff(b.stack, b, h, [], [], [], CostDiff(None, None, "")) for b, h in stacks])


@pytest.mark.parametrize(
    ("stacks", "code"),
    [
        ([(side(), side())], 0),
        ([(side(), side("dev", "advisory", "advisory"))], 0),
        ([(side("dev", "mandatory"), side())], 0),  # the change resolves the base's violation
        ([(side(error="base broken"), side())], 0),  # a broken base is the base's problem
        ([(side(), side(exists=False))], 0),  # stack removed by the change
        ([(side(), side("dev", "advisory", "mandatory"))], 1),
        # A head that does not evaluate (bad config, inputs the provider SDK refuses) exits 2, as preview does.
        ([(side(), side(error="tpuray:slicePools[0].topology: '4x5' is not a valid v6e topology"))], 2),
        ([(side(exists=False), side(error="bad"))], 2),  # a new stack that fails to evaluate
        ([(side(), side()), (side("prod"), side("prod", "mandatory"))], 1),  # any stack fails the diff
    ],
    ids=["clean", "advisories", "base-violated", "base-error", "removed", "mandatory", "head-error", "new-broken",
         "second-stack"],
)  # fmt: skip
def test_diff_exit_code(stacks: list[tuple[Side, Side]], code: int) -> None:
    assert report(*stacks).exit_code == code


@pytest.mark.parametrize(("head", "code"), [(side(), 0), (side(error="head broken"), 2), (side("dev", "mandatory"), 1)])
def test_diff_command_returns_the_reports_exit_code(monkeypatch, capsys, head: Side, code: int) -> None:
    monkeypatch.setattr(diff_command, "run_diff", lambda *a: report((side(), head)))
    for fmt in ([], ["--json"], ["--markdown"]):
        assert run(capsys, "diff", "main", *fmt)[0] == code


def test_diff_exits_2_on_an_unknown_ref(tmp_path, monkeypatch, capsys) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "diff", "no-such-branch")
    assert code == 2
    assert err.startswith("error: unknown git ref 'no-such-branch': it is not in this clone and the repository has no")
    assert out == "" and "Traceback" not in err


def test_diff_exits_2_outside_a_git_repository(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    code, _, err = run(capsys, "diff", "main")
    assert code == 2 and "is not inside a git repository" in err


# ---------------------------------------------------------------------------- check


def test_check_exits_0_on_clean_manifests(capsys) -> None:
    assert run(capsys, "check", str(FIXTURES / "good"))[0] == 0


def test_check_exits_0_on_advisories_alone(capsys) -> None:
    code, out, _ = run(capsys, "check", str(FIXTURES / "bad" / "spot-has-fallback.yaml"), "--env", "dev")
    assert (code, out.splitlines()[-1]) == (0, "1 violation(s), 0 mandatory")


def test_check_exits_1_when_one_violation_of_several_is_mandatory(capsys) -> None:
    paths = [str(FIXTURES / "bad" / f) for f in ("spot-has-fallback.yaml", "ray-token-auth.yaml")]
    code, out, _ = run(capsys, "check", *paths, "--env", "dev")
    assert (code, out.splitlines()[-1]) == (1, "2 violation(s), 1 mandatory")


def test_check_exits_2_on_a_manifest_it_cannot_read(tmp_path, capsys) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    code, out, err = run(capsys, "check", str(path))
    assert code == 2 and out == "" and err.startswith("error: ")


def test_check_exits_2_on_an_unknown_environment(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["check", str(FIXTURES / "good"), "--env", "qa"])
    assert info.value.code == 2
