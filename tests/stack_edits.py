"""The committed stacks' raw `tpuray:` config, edited one key at a time: the shared helper of the
tests of the apply-time config rules (tests/test_gcp_names.py, test_gcp_ranges.py,
test_maintenance_rules.py, test_stack_consistency.py, test_tpu_zones.py)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tpuray.config import ConfigError, read_stack_file, stacks_dir
from tpuray.config.checks import parse_stack_config

STACKS = {name: read_stack_file(stacks_dir() / f"Pulumi.{name}.yaml") for name in ("dev", "staging", "prod")}
Edit = Callable[[dict[str, Any]], Any]


def errors(stack: str, edit: Edit) -> list[str]:
    """The lines config refuses the stack with once `edit` changed its raw config."""
    raw = copy.deepcopy(STACKS[stack])
    edit(raw)
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw, stack)
    return info.value.lines
