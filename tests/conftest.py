"""Shared fixtures: mocked stack runs are cached per process (each takes about a second)."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tpuray.mockrun import StackRun, run_stack  # noqa: E402

STACKS = ("dev", "staging", "prod")


@functools.cache
def mocked(stack: str) -> StackRun:
    return run_stack(stack)


@pytest.fixture(params=STACKS)
def stack_run(request: pytest.FixtureRequest) -> StackRun:
    return mocked(request.param)
