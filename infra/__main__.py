"""Pulumi entry point (Pulumi.yaml `main: infra/`). Deliberately thin: see infra/program.py."""

import sys
from pathlib import Path

# The language host puts only infra/ on sys.path; the program imports from the repo root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra.program import main  # noqa: E402

main()
