"""The pre-loaded preview process of `tpuray diff` (tpuray/preview/fork.py): each forked
preview runs its own tree's tpuray, as a fresh interpreter with PYTHONPATH=tree did.

Stand-in trees, one `run` for all of them: each tree's tpuray/cli.py is a few lines, so
the test checks the process pool, not a real preview (test_diff.py runs real ones)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import REPO
from tpuray.preview import fork as preview_fork
from tpuray.preview.diff import DiffError, preview_sides

CLIS = {
    "reports": (
        "import os, sys\n"
        "def main():\n"
        "    print(__file__, sys.argv[1:], os.getcwd(), os.environ['PYTHONPATH'])\n"
        "    print('to stderr', file=sys.stderr)\n"
        "    return 1\n"
    ),
    "hangs": "import time\ndef main():\n    time.sleep(60)\n",
    "breaks": "raise ImportError('this tree cannot import its CLI')\n",
    "missing": None,  # no such folder
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, preview_fork.Finished]]:
    trees = {}
    for name, source in CLIS.items():
        tree = tmp_path_factory.mktemp(name)
        if source is None:
            trees[name] = tree / "gone"
            continue
        (tree / "tpuray").mkdir()
        (tree / "tpuray" / "__init__.py").write_text("")
        (tree / "tpuray" / "cli.py").write_text(source)
        trees[name] = tree
    work = [(trees[name], "dev") for name in CLIS]
    # Nothing pre-loaded: the stand-in CLIs import nothing of it (test_diff.py pre-loads).
    results = preview_fork.run(work, dict(os.environ), jobs=4, timeout_s=2, preload=())
    return {name: (trees[name], result) for name, result in zip(CLIS, results, strict=True)}


def test_a_forked_preview_imports_its_own_trees_tpuray_in_that_tree(finished: dict) -> None:
    tree, result = finished["reports"]
    assert result.stdout == f"{tree}/tpuray/cli.py ['preview', 'dev', '--json'] {tree} {tree}\n"
    assert result.stderr == "to stderr\n"
    assert result.code == 1


def test_a_preview_still_running_at_the_timeout_is_killed_and_has_no_exit_code(finished: dict) -> None:
    _, result = finished["hangs"]
    assert result.code is None


def test_a_tree_whose_cli_does_not_import_exits_1_with_the_traceback_on_stderr(finished: dict) -> None:
    _, result = finished["breaks"]
    assert result.code == 1
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert result.stderr.rstrip().endswith("ImportError: this tree cannot import its CLI")


def test_a_tree_that_is_not_there_exits_1_naming_the_folder(finished: dict) -> None:
    tree, result = finished["missing"]
    assert result.code == 1
    assert f"FileNotFoundError: [Errno 2] No such file or directory: '{tree}'" in result.stderr


def test_a_preview_process_that_cannot_start_is_an_error_naming_its_exit_status(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONHOME=str(tmp_path / "no-python-here"))
    with pytest.raises(preview_fork.PreviewProcessError, match="^the preview process exited 1: "):
        preview_fork.run([(tmp_path, "dev")], env, jobs=1, timeout_s=5, preload=())


def test_tpuray_diff_reports_a_failed_preview_process_as_a_diff_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_: object, **__: object) -> None:
        raise preview_fork.PreviewProcessError("the preview process exited 1: boom")

    monkeypatch.setattr(preview_fork, "run", fail)
    with pytest.raises(DiffError, match="^the preview process exited 1: boom$"):
        preview_sides([(REPO, "dev")], jobs=1)
