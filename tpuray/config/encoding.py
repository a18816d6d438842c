"""The stack config as the Pulumi engine hands it over (what `tpuray preview` sets for the mocks)."""

from __future__ import annotations

import json
from typing import Any

from tpuray.config.base import NAMESPACE


def pulumi_config_map(raw: dict[str, Any]) -> dict[str, str]:
    """The raw config as the Pulumi CLI passes it: namespaced keys, JSON-encoded non-strings."""
    return {f"{NAMESPACE}:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()}
