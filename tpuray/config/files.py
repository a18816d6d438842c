"""Stack files: where they are, their names, and their `tpuray:` keys (namespace stripped)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tpuray.config.base import NAMESPACE
from tpuray.errors import ConfigError, yaml_problem


def stacks_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "stacks"


STACK_FILE = re.compile(r"^Pulumi\.(.+)\.ya?ml$")


def stack_files(folder: Path | None = None) -> list[Path]:
    """The Pulumi.<stack>.yaml files of a stacks folder (default: this repository's stacks/)."""
    return sorted((folder if folder is not None else stacks_dir()).glob("Pulumi.*.yaml"))


def stack_names(folder: Path | None = None) -> list[str]:
    return [name_of_stack_file(p) for p in stack_files(folder)]


def name_of_stack_file(path: Path) -> str:
    match = STACK_FILE.match(path.name)
    if not match:
        raise ConfigError([f"stack file {str(path)!r}: name must be Pulumi.<stack>.yaml"])
    return match.group(1)


def stack_name(stack: str) -> str:
    """The name of a stack given as a name ("dev") or a stack file path (stacks/Pulumi.dev.yaml)."""
    path = Path(stack)
    return name_of_stack_file(path) if path.suffix in (".yaml", ".yml") else stack


def stack_file_in(folder: Path, stack: str) -> Path:
    """Where a stack's file is in a stacks folder (which need not be this checkout's)."""
    return folder / f"Pulumi.{stack}.yaml"


def resolve_stack_file(stack: str) -> tuple[str, Path]:
    """A stack name in stacks/ or a path to a Pulumi.<name>.yaml -> (name, path)."""
    path = Path(stack)
    if path.suffix in (".yaml", ".yml") or path.exists():
        name = name_of_stack_file(path)
        if not path.is_file():
            raise ConfigError([f"stack file {str(path)!r}: not found"])
        return name, path
    path = stack_file_in(stacks_dir(), stack)
    if not path.is_file():
        known = stack_names()
        raise ConfigError([f"stack {stack!r}: no stacks/Pulumi.{stack}.yaml; valid: {', '.join(known)}"])
    return stack, path


def read_stack_file(path: Path) -> dict[str, Any]:
    """The `tpuray:` keys of a Pulumi stack file, namespace stripped."""
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except UnicodeDecodeError as err:
        raise ConfigError([f"stack file {str(path)!r}: not UTF-8 text ({err.reason} at byte {err.start})"]) from None
    except yaml.YAMLError as err:
        raise ConfigError([f"stack file {str(path)!r}: not valid YAML{yaml_problem(err)}"]) from None
    if not isinstance(doc, dict):
        raise ConfigError(
            [f"stack file {str(path)!r}: must be a mapping with a 'config' key, not {type(doc).__name__}"]
        )
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError([f"stack file {str(path)!r}: 'config' must be a mapping"])
    raw: dict[str, Any] = {}
    for key, value in config.items():
        ns, _, name = str(key).partition(":")
        if ns == NAMESPACE:
            if isinstance(value, dict) and "secure" in value:
                raise ConfigError([f"{key}: secret values cannot be read offline; keep tpuray config in plain text"])
            raw[name] = value
    return raw
