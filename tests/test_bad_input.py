"""Input that is not a stack or a manifest at all: one `error:` line each, the right exit, no traceback.

Each row is what a user might hand a command by mistake (a YAML list, a broken flow sequence,
a binary file, a folder, an output path the OS refuses) and the exact output it must give.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz_stack import run_cli

STACK_FILES = [
    ("a YAML list", "- a\n- b\n", "must be a mapping with a 'config' key, not list"),
    ("a bare number", "42\n", "must be a mapping with a 'config' key, not int"),
    ("config that is a list", "config: [1]\n", "'config' must be a mapping"),
    ("a broken flow sequence", "config: [\n",
     "not valid YAML at line 2, column 1: expected the node content, but found '<stream end>'"),
    ("a tab where YAML wants spaces", "config:\n\ttpuray:gcp: {}\n",
     "not valid YAML at line 2, column 1: found character '\\t' that cannot start any token"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "problem"), [r[1:] for r in STACK_FILES], ids=[r[0] for r in STACK_FILES])
def test_a_stack_file_that_is_not_a_stack_is_one_line(text: str, problem: str, tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.oops.yaml"
    path.write_text(text)
    outcome = run_cli(["preview", str(path)])
    assert (outcome.code, outcome.stderr, outcome.escaped) == (2, f"error: stack file '{path}': {problem}\n", None)


def test_a_stack_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.oops.yaml"
    path.write_bytes(b"config:\n  tpuray:gcp: \xff\n")
    outcome = run_cli(["preview", str(path)])
    assert (outcome.code, outcome.stderr, outcome.escaped) == (
        2,
        f"error: stack file '{path}': not UTF-8 text (invalid start byte at byte 22)\n",
        None,
    )


def test_a_folder_named_like_a_stack_file_is_not_found(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.oops.yaml"
    path.mkdir()
    outcome = run_cli(["preview", str(path)])
    assert (outcome.code, outcome.stderr) == (2, f"error: stack file '{path}': not found\n")


def test_a_top_level_key_that_is_not_a_mapping_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.oops.yaml"
    path.write_text("config:\n  tpuray:gcp: 5\n  tpuray:cluster: {}\n  tpuray:slicePools: []\n")
    outcome = run_cli(["preview", str(path)])
    assert outcome.stderr.splitlines()[0] == (
        "error: tpuray:gcp: 5 is invalid; input should be a valid dictionary or instance of GcpConfig"
    )
    assert (outcome.code, outcome.escaped) == (2, None)


MANIFESTS = [
    ("a YAML list", "- 1\n", "document 1 is a list, not a Kubernetes object (apiVersion, kind, metadata)"),
    ("a broken flow sequence", "a: [\n", "not valid YAML at line 2, column 1: did not find expected node content"),
    ("no apiVersion", "kind: RayJob\n", "document 1 has no apiVersion/kind (keys: kind); not a Kubernetes object"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "problem"), [r[1:] for r in MANIFESTS], ids=[r[0] for r in MANIFESTS])
def test_a_manifest_that_is_not_a_kubernetes_object_is_one_line(text: str, problem: str, tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    outcome = run_cli(["check", str(path)])
    assert (outcome.code, outcome.stderr, outcome.escaped) == (2, f"error: {path}: {problem}\n", None)


def test_an_output_folder_the_os_refuses_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "out"
    blocker.write_text("a file where the folder should go\n")
    outcome = run_cli(["bundle", "--out", str(blocker / "bundles")])
    assert (outcome.code, outcome.stderr, outcome.escaped) == (
        1,
        f"error: {blocker / 'bundles'}: Not a directory\n",
        None,
    )
