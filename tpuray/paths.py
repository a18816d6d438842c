"""Where the package's own files are: its data (tpuray/data, shipped with the package, each file
with its provenance) and, in a checkout, the repository root."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
DATA_DIR = PACKAGE_DIR / "data"
