"""No stack config makes the `tpuray` CLI print a traceback (tests/fuzz_stack.py makes the cases).

Three hundred random changes to the committed stacks (100 per stack), with a fixed seed so a failure reruns the
same way; each runs the real `tpuray preview` in-process. benchmarks/fuzz_cli.py runs more.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings

from tests import fuzz_stack
from tests.fuzz_stack import Change, run_cli, verdict, write_stack

RAW = {stack: fuzz_stack.stack_raw(stack) for stack in ("dev", "staging", "prod")}


@pytest.mark.parametrize("stack", sorted(RAW))
def test_no_change_to_one_key_of_a_stack_makes_preview_print_a_traceback(stack: str, tmp_path: Path) -> None:
    @seed(20261202)
    @settings(max_examples=100, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(fuzz_stack.changes(RAW[stack]))
    def one_change(change: Change) -> None:
        path = write_stack(tmp_path, "fuzz", change.apply(RAW[stack]))
        problem = verdict(change, run_cli(["preview", str(path)]))
        assert problem is None, f"{change}: {problem}"

    one_change()
