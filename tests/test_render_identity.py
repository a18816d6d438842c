"""The preview JSON and the rendered objects of every stack are byte-identical to the golden
files in tests/fixtures/golden/ (tests/golden.py says what is normalised and how to regenerate)."""

from __future__ import annotations

import pytest

from tests.conftest import mocked
from tests.golden import GOLDEN, STACKS, diff, normalise, preview_json, preview_text, rendered_objects


@pytest.mark.parametrize("stack", STACKS)
def test_preview_json_is_byte_identical_to_the_golden_file(stack: str) -> None:
    fresh = preview_json(mocked(stack))
    assert fresh == (GOLDEN / stack / "preview.json").read_text(), diff(stack, "preview.json", fresh)


@pytest.mark.parametrize("stack", STACKS)
def test_preview_table_is_byte_identical_to_the_golden_file(stack: str) -> None:
    fresh = preview_text(mocked(stack))
    assert fresh == (GOLDEN / stack / "preview.txt").read_text(), diff(stack, "preview.txt", fresh)


@pytest.mark.parametrize("stack", STACKS)
def test_rendered_objects_are_byte_identical_to_the_golden_file(stack: str) -> None:
    fresh = rendered_objects(mocked(stack))
    assert fresh == (GOLDEN / stack / "rendered.yaml").read_text(), diff(stack, "rendered.yaml", fresh)


def test_only_the_bundle_content_hash_is_normalised() -> None:
    text = "working_dir: gs://b/bundles/tpuray-apps-454728d51d939f7e.zip steps 200 sha256:0123456789abcdef"
    assert (
        normalise(text) == "working_dir: gs://b/bundles/tpuray-apps-<bundle-hash>.zip steps 200 sha256:0123456789abcdef"
    )


def test_a_changed_input_is_reported_as_a_diff_line() -> None:
    changed = (GOLDEN / "dev" / "preview.json").read_text().replace("--steps 200", "--steps 201", 1)
    report = diff("dev", "preview.json", changed)
    assert "-" in report and "--steps 200" in report and "--steps 201" in report
