"""README's layout table names what the repository holds (issue 14: "README's layout table
matches the new layout"): every top-level folder git tracks has a row, every path a row names
exists, and the emulator package's modules are the ones its row lists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _layout_rows() -> dict[str, str]:
    """The table under '## Layout': first-column path -> its description."""
    section = (REPO / "README.md").read_text().split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return {m[1]: m[2] for m in re.finditer(r"^\| `([^`]+)` \| (.+) \|$", section, re.MULTILINE)}


def _tracked_top_level_folders() -> set[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\0")
    return {name.split("/", 1)[0] + "/" for name in listed if "/" in name}


def test_every_top_level_folder_git_tracks_has_a_row() -> None:
    folders = _tracked_top_level_folders()
    assert {"tpuray/", "infra/", "ray_apps/", "tests/"} <= folders  # the listing itself worked
    assert sorted(folders - set(_layout_rows())) == []


def test_every_path_a_row_names_exists() -> None:
    assert sorted(path for path in _layout_rows() if not (REPO / path).exists()) == []


def test_the_emulator_row_lists_the_emulator_packages_modules() -> None:
    row = _layout_rows()["tpuray/"]
    listed = row.split("`emulator/` (", 1)[1].split(")", 1)[0]
    named = set(re.findall(r"`(\w+)`", listed))
    modules = {p.stem for p in (REPO / "tpuray" / "local" / "emulator").glob("*.py")} - {"__init__", "__main__"}
    assert sorted(named) == sorted(modules)
