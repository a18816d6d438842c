"""Shared fixtures: mocked stack runs are cached per process (each takes about a second)."""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import CodeType, ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests import leftovers  # noqa: E402
from tests.ordering import pytest_collection_modifyitems  # noqa: E402, F401 (the longest modules first)
from tpuray.preview.mockrun import StackRun, run_stack  # noqa: E402

STACKS = ("dev", "staging", "prod")


def pytest_configure(config: pytest.Config) -> None:
    # Before any test starts a process; xdist workers inherit the controller's token.
    leftovers.mark_session()
    # No Ray process of the suite collects usage stats, as none of the emulator's nodes does
    # (emulator BASE_ENV): the private clusters of ray_fixtures.local_ray and the pytest
    # drivers otherwise start Ray Data's usage-collection actor, one more Ray worker each (Ray
    # reads the variable per process: ray/_common/usage/usage_lib.py `_usage_stats_enabledness`;
    # the actor: ray/data/_internal/usage/actor.py).
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller checks once every worker has ended
    if "__mutmut_" in os.environ.get("MUTANT_UNDER_TEST", ""):
        # `make mutation` runs each mutant in a forked pytest session: none of the mutated
        # modules starts a process, and scanning every process's environment (about 0.1 s,
        # more on a busy machine) would be a fifth of the time of a mutant a test kills.
        return
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


@pytest.fixture(scope="module", autouse=True)
def _no_ray_driver_outlives_its_module(request: pytest.FixtureRequest) -> Iterator[None]:
    """No test module leaves this process connected to a Ray cluster. The cluster is stopped
    sooner or later, and a driver on a dead GCS ends its process 60 s on (Ray's std::_Exit,
    see EmulatedCluster._disconnect_driver): under xdist, a worker lost with no message,
    in whatever module runs next. Set up first, torn down last: after the module's own fixtures."""
    yield
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        address = ray.get_runtime_context().gcs_address
        ray.shutdown()
        pytest.fail(f"{request.module.__name__} left this process connected to the Ray cluster at {address}")


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


@functools.cache
def _module_code(path: str) -> CodeType:
    return compile(Path(path).read_text(), path, "exec")


def _rebuild_rules(module: ModuleType) -> None:
    """Run `module`'s source again in a scratch namespace and copy each new Rule's fields onto
    the Rule objects of `module.RULES`, in place: every holder of those objects (the pack's
    RULES and RULES_BY_NAME, evaluate, a test's module-level constant) then sees the rule as
    built by the code now active. The module's own globals are left alone (rules_stack's
    dataclasses keep their identity)."""
    import builtins

    from tpuray.policies.core import Rule

    namespace = {"__name__": module.__name__, "__file__": module.__file__, "__builtins__": builtins}
    namespace["__package__"] = module.__package__
    exec(_module_code(str(module.__file__)), namespace)
    built: tuple[Rule, ...] = namespace["RULES"]
    for rule, rebuilt in zip(module.RULES, built, strict=True):
        for f in dataclasses.fields(Rule):
            object.__setattr__(rule, f.name, getattr(rebuilt, f.name))


@pytest.fixture(autouse=True)
def _rules_rebuilt_under_mutmut() -> None:
    """The policy rules are built into `RULES` when their modules are imported (each module's
    `_rule` helper, rules_security's `_cluster` wrapper), which in mutmut's forked run happened
    with the original code, and while recording, outside any test. Under mutmut each test
    therefore rebuilds them first: every rules module while recording (so each test is
    recorded as calling `_rule`), only the mutated module under a mutant. Outside mutmut
    nothing happens."""
    run = os.environ.get("MUTANT_UNDER_TEST", "")
    if not _under_mutmut():
        return
    import tpuray.policies as pack

    modules = [m for m in vars(pack).values() if isinstance(m, ModuleType) and m.__name__.startswith(_RULES_PREFIX)]
    if run != "stats":
        modules = [m for m in modules if run.rpartition(".")[0] == m.__name__]
    for module in modules:
        _rebuild_rules(module)
    if modules:
        pack.RULES_BY_NAME.clear()
        pack.RULES_BY_NAME.update({r.name: r for r in pack.RULES})
        assert len(pack.RULES_BY_NAME) == len(pack.RULES), "rule names must be unique"


_RULES_PREFIX = "tpuray.policies.rules_"


def mocked(stack: str) -> StackRun:
    # Under `make mutation` the cached run was made with the original code, and by an earlier
    # test: run the program again so that this test both records and sees a mutant's effect.
    if _under_mutmut():
        return run_stack(stack)
    return _cached_run(stack)


@pytest.fixture(params=STACKS)
def stack_run(request: pytest.FixtureRequest) -> StackRun:
    return mocked(request.param)
