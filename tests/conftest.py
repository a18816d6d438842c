"""Shared fixtures: mocked stack runs are cached per process (each takes about a second)."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tpuray.mockrun import StackRun, run_stack  # noqa: E402

STACKS = ("dev", "staging", "prod")


@functools.cache
def _cached_run(stack: str) -> StackRun:
    return run_stack(stack)


@pytest.fixture(autouse=True, scope="session")
def _fresh_caches_under_a_mutant() -> None:
    """Under `make mutation` the process was forked after the catalog's cached table was
    built with the original code: rebuild it so that a mutant of _shape or all_shapes shows."""
    if "__mutmut_" in os.environ.get("MUTANT_UNDER_TEST", ""):
        from tpuray import catalog

        catalog.all_shapes.cache_clear()


def mocked(stack: str) -> StackRun:
    # Under `make mutation` a mutant is active in a process forked after the cache was filled:
    # run the program again so that the mutant's effect is seen.
    if "__mutmut_" in os.environ.get("MUTANT_UNDER_TEST", ""):
        return run_stack(stack)
    return _cached_run(stack)


@pytest.fixture(params=STACKS)
def stack_run(request: pytest.FixtureRequest) -> StackRun:
    return mocked(request.param)
