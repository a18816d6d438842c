"""What every benchmark script does with its figures: print them and write them as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_results(results: dict[str, Any], out: Path) -> None:
    out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    print(f"wrote {out}")
