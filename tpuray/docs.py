"""Sections of docs/ generated from the code, between marker comments:

    <!-- BEGIN GENERATED: NAME (python -m tpuray.docs) -->
    ...
    <!-- END GENERATED: NAME -->

`python -m tpuray.docs` rewrites every section; `python -m tpuray.docs --check` exits 1 and
names the stale ones (tests/test_docs_generated.py runs the same check), so a rule added to the
registry without its docs row fails the fast suite.

Sections:
- `policy-rules` in docs/policies.md: the rule table, from tpuray.policies.RULES (name, profile,
  kinds, description) and the enforcement levels of policies/policy-config.<environment>.json;
- `config-keys` in docs/configuration.md: every stack config key with its type, default, bounds
  and description, from StackConfig.model_json_schema() (descriptions: the fields'
  `Field(description=...)`, else the model's docstring for an object key).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
ENVIRONMENTS = ("dev", "staging", "prod")


def _levels(environment: str) -> dict[str, str]:
    raw = json.loads((REPO / "policies" / f"policy-config.{environment}.json").read_text())
    # An entry of properties alone keeps the level `all` gives it (as the analyzer reads it).
    return {
        k: v if isinstance(v, str) else str(v["enforcementLevel"])
        for k, v in raw.items()
        if isinstance(v, str) or "enforcementLevel" in v
    }


def policy_rule_table() -> str:
    """One row per rule of the pack, in registry order, with its profile (gke: breaks on GKE;
    project: this project's convention, advisory in `tpuray check` on manifests tpuray did not render)."""
    from tpuray.policies import RULES

    levels = {env: _levels(env) for env in ENVIRONMENTS}
    rows = ["| name | profile | applies to | default | check | description |", "|---|---|---|---|---|---|"]
    for rule in RULES:
        kinds = "stack" if rule.is_stack else ", ".join(dict.fromkeys(t.rsplit(":", 1)[-1] for t in rule.types))
        default = rule.level.value
        others: dict[str, list[str]] = {}
        for env, config in levels.items():
            level = config.get(rule.name, config.get("all", default))
            if level != default:
                others.setdefault(level, []).append(env)
        if others:
            default += " (" + "; ".join(f"{level} in {', '.join(envs)}" for level, envs in others.items()) + ")"
        check = "yes" if rule.kubernetes else "no"
        rows.append(f"| `{rule.name}` | {rule.profile} | {kinds} | {default} | {check} | {rule.description} |")
    return "\n".join(rows) + "\n"


def _type(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in schema:
        return "object"
    if "anyOf" in schema:
        return " or ".join(_type(s, defs) for s in schema["anyOf"])
    if "enum" in schema:
        return " / ".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}), defs)}"
    if kind == "object" and "additionalProperties" in schema and isinstance(schema["additionalProperties"], dict):
        return f"map of {_type(schema['additionalProperties'], defs)}"
    return {"integer": "int", "number": "number", "boolean": "bool", "string": "string", "null": "null"}.get(kind, kind)


def _bounds(schema: dict[str, Any]) -> str:
    marks = {
        "minimum": ">=",
        "exclusiveMinimum": ">",
        "maximum": "<=",
        "exclusiveMaximum": "<",
        "minLength": "length >=",
    }
    parts = [f"{sign} {schema[key]}" for key, sign in marks.items() if key in schema]
    for option in schema.get("anyOf", []):
        parts += [f"{sign} {option[key]}" for key, sign in marks.items() if key in option]
    return ", ".join(parts)


def _object(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any] | None:
    """The object definition a property holds (directly, in a list, or or-null)."""
    for candidate in [schema, schema.get("items", {}), *schema.get("anyOf", [])]:
        if "$ref" in candidate:
            return defs[candidate["$ref"].rsplit("/", 1)[-1]]
        if candidate.get("type") == "array" and "$ref" in candidate.get("items", {}):
            return defs[candidate["items"]["$ref"].rsplit("/", 1)[-1]]
    return None


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def config_key_table() -> str:
    """Every key under `tpuray:`, depth first, in the models' field order."""
    from tpuray.config import NAMESPACE, StackConfig

    schema = StackConfig.model_json_schema(by_alias=True)
    defs = schema.get("$defs", {})
    rows = ["| key | type | default | bounds | description |", "|---|---|---|---|---|"]

    def walk(model: dict[str, Any], prefix: str) -> None:
        required = set(model.get("required", []))
        for name, prop in model.get("properties", {}).items():
            if not prefix and name == "stack":
                continue  # the stack's name, from the file name: not a key
            key = f"{prefix}{name}" if prefix else f"{NAMESPACE}:{name}"
            inner = _object(prop, defs)
            is_list = prop.get("type") == "array" or any(o.get("type") == "array" for o in prop.get("anyOf", []))
            default = "required" if name in required else json.dumps(prop.get("default")) if "default" in prop else ""
            text = prop.get("description") or (inner or {}).get("description", "")
            rows.append(
                f"| `{key}` | {_cell(_type(prop, defs))} | {_cell(default)} | {_bounds(prop)} | {_cell(text)} |"
            )
            if inner is not None:
                walk(inner, f"{key}{'[]' if is_list else ''}.")

    walk(schema, "")
    return "\n".join(rows) + "\n"


SECTIONS: dict[str, tuple[Path, Callable[[], str]]] = {
    "policy-rules": (DOCS / "policies.md", policy_rule_table),
    "config-keys": (DOCS / "configuration.md", config_key_table),
}


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- BEGIN GENERATED: {re.escape(name)} [^\n]*-->\n)(.*?)(<!-- END GENERATED: {re.escape(name)} -->)",
        re.S,
    )


def render(name: str, text: str) -> str:
    """`text` with section `name` replaced by what the code generates now."""
    _, generate = SECTIONS[name]
    pattern = _pattern(name)
    if not pattern.search(text):
        raise ValueError(f"no <!-- BEGIN GENERATED: {name} --> ... <!-- END GENERATED: {name} --> markers")
    body = generate()
    return pattern.sub(lambda m: m.group(1) + body + m.group(3), text, count=1)


def stale() -> list[str]:
    """The sections whose text in docs/ differs from what the code generates."""
    return [name for name, (path, _) in SECTIONS.items() if render(name, path.read_text()) != path.read_text()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tpuray.docs", description="regenerate docs/ sections")
    parser.add_argument("--check", action="store_true", help="exit 1 when a generated section is stale")
    args = parser.parse_args(argv)
    if args.check:
        names = stale()
        for name in names:
            print(f"stale: {name} in {SECTIONS[name][0].relative_to(REPO)}; run `python -m tpuray.docs`")
        return 1 if names else 0
    for name, (path, _) in SECTIONS.items():
        path.write_text(render(name, path.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
