"""What `tpuray check` prints: its JSON document and its text lines, colours included (rich
writes ANSI colours when FORCE_COLOR is set, as on a CI log that renders them). Exit codes
are in test_exit_codes.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tpuray.cli import main

BAD = Path(__file__).resolve().parent / "fixtures" / "policies" / "bad"
ADVISORY = str(BAD / "spot-has-fallback.yaml")  # advisory in dev (policies/policy-config.dev.json)
MANDATORY = str(BAD / "ray-token-auth.yaml")


def check(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    main(["check", *argv, "--env", "dev"])
    return capsys.readouterr().out


def test_check_json_is_indented_by_two_spaces(capsys) -> None:
    out = check(capsys, ADVISORY, "--json")
    assert out.startswith('{\n  "violations": [\n    {\n      "')
    assert [v["level"] for v in json.loads(out)["violations"]] == ["advisory"]


def test_check_text_names_each_violations_file(capsys) -> None:
    out = check(capsys, ADVISORY)
    assert out.splitlines()[0].endswith(f"({ADVISORY})")


def test_check_text_shows_mandatory_in_red_and_advisory_in_yellow(capsys, monkeypatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    lines = check(capsys, ADVISORY, MANDATORY).splitlines()
    assert lines[0].startswith("\x1b[31mmandatory\x1b[0m")
    assert lines[2].startswith("\x1b[33madvisory\x1b[0m")


def test_check_text_does_not_highlight_numbers_or_paths(capsys, monkeypatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert check(capsys, ADVISORY).splitlines()[-1] == "1 violation(s), 0 mandatory"


def test_check_is_listed_with_what_it_does(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    from tpuray.cli import build_parser

    assert (
        "    check     run the policy pack's Kubernetes rules on YAML manifests (files or folders)\n"
        in build_parser(["check"]).format_help()
    )


def test_check_help_names_every_argument_and_its_default(monkeypatch, capsys) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    with pytest.raises(SystemExit) as info:
        main(["check", "--help"])
    assert info.value.code == 0
    assert capsys.readouterr().out == (
        "usage: tpuray check [-h] [--json] [--env {dev,staging,prod}] [--ray-version RAY_VERSION] "
        "[--allow-image PATTERN]\n"
        "                    [--conventions]\n"
        "                    PATH [PATH ...]\n"
        "\n"
        "positional arguments:\n"
        "  PATH                  YAML files or folders (multi-document)\n"
        "\n"
        "options:\n"
        "  -h, --help            show this help message and exit\n"
        '  --json                print {"violations": [...]} as JSON\n'
        "  --env {dev,staging,prod}\n"
        "                        enforcement levels of policies/policy-config.<env>.json (default prod)\n"
        "  --ray-version RAY_VERSION\n"
        "                        the pinned Ray version images must carry (default: the project's pin)\n"
        "  --allow-image PATTERN\n"
        "                        an extra allowed TPU image (glob), e.g. 'vllm/vllm-tpu:*'\n"
        "  --conventions         hold every manifest to this project's conventions (default: only those labelled\n"
        "                        app.kubernetes.io/managed-by: tpuray; on others they are advisory)\n"
    )


def test_check_keeps_every_allow_image_given(capsys) -> None:
    bad = str(BAD / "tpu-image.yaml")  # a TPU worker on rayproject/ray:2.60.0-py312, not a TPU image
    assert main(["check", bad, "--allow-image", "vllm/vllm-tpu:*", "--allow-image", "rayproject/ray:2.60.0-py312"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "0 violation(s), 0 mandatory"


def test_check_text_shows_a_violation_without_a_file_with_empty_parentheses(capsys, monkeypatch) -> None:
    # analyze() gives a stack-wide diagnostic (no resource of the manifests) file None, resource "stack".
    from tpuray.commands import check as check_command
    from tpuray.policies.analyzer import Violation

    stack_wide = Violation("tpu-image", "advisory", "stack", "a finding of no one file", None)
    monkeypatch.setattr(check_command, "check_manifests", lambda *args: [stack_wide])
    assert check(capsys, ADVISORY).splitlines()[0] == "advisory tpu-image stack ()"
