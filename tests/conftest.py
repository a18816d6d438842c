"""Shared fixtures: mocked stack runs are cached per process (each takes about a second)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests import leftovers  # noqa: E402
from tpuray.mockrun import StackRun, run_stack  # noqa: E402

STACKS = ("dev", "staging", "prod")


def pytest_configure(config: pytest.Config) -> None:
    # Before any test starts a process; xdist workers inherit the controller's token.
    leftovers.mark_session()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller checks once every worker has ended
    left = leftovers.left_behind(os.environ[leftovers.SESSION_ENV])
    if left:
        print("\nprocesses this test session started and left running:\n  " + "\n  ".join(left), file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@functools.cache
def _cached_run(stack: str) -> StackRun:
    return run_stack(stack)


def _under_mutmut() -> bool:
    """True while `make mutation` records which test runs what ("stats") or runs a mutant."""
    run = os.environ.get("MUTANT_UNDER_TEST", "")
    return run == "stats" or "__mutmut_" in run


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Each test sees the environment the session started with: code under test may point this
    process at an emulator (`local run` sets STORAGE_EMULATOR_HOST for its own reads), and under
    xdist the next test in the same worker must not inherit that."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(autouse=True)
def _fresh_caches_under_mutmut() -> None:
    """mutmut forks each mutant from a process where the catalog's cached table was built
    with the original code, and it runs a mutant only against the tests that called the
    mutated function when it recorded them: rebuilding the table before every test makes
    each test that reads the table call _shape and all_shapes, both while recording and
    under a mutant."""
    if _under_mutmut():
        from tpuray import catalog

        catalog.all_shapes.cache_clear()


def mocked(stack: str) -> StackRun:
    # Under `make mutation` the cached run was made with the original code, and by an earlier
    # test: run the program again so that this test both records and sees a mutant's effect.
    if _under_mutmut():
        return run_stack(stack)
    return _cached_run(stack)


@pytest.fixture(params=STACKS)
def stack_run(request: pytest.FixtureRequest) -> StackRun:
    return mocked(request.param)
