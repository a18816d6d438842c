"""Evaluate a CRD's `x-kubernetes-validations` CEL rules the way the API server does, with cel-python.

cel-python (import `celpy`, pinned in requirements.lock) is a pure-Python CEL implementation:
it needs no compiler or native wheel on the 2-core CI machine, it is the CEL library
Cloud Custodian uses and keeps, and it runs the standard functions and macros the CRD
rules use (has, all, exists, size, matches, startsWith, duration, dyn). The Kubernetes
CEL libraries are not part of standard CEL; the functions of them a packaged CRD uses
are added here (EXTENSIONS), and a test fails when a packaged rule calls a function that
neither celpy nor this table provides.

What the API server does and we copy (https://kubernetes.io/docs/reference/using-api/cel/):
- schema defaults are applied before the rules run;
- property names are escaped (`net.ipv4.x` is `self.net__dot__ipv4__dot__x`);
- a rule that reads `oldSelf` is a transition rule and only runs on update: a manifest is
  checked as a create, so those rules are skipped;
- a rule whose evaluation errors fails like a rule that returns false.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from itertools import pairwise
from typing import Any

import celpy
from celpy import celtypes

from tpuray.checks.schemas import crds, name_of, openapi_schema, with_defaults
from tpuray.checks.unknown import UNKNOWN

# ---------------------------------------------------------------------------- Kubernetes CEL libraries
# Kubernetes' extended strings and lists libraries (cel-go ext.Strings, k8s lists library):
# https://kubernetes.io/docs/reference/using-api/cel/#cel-options-language-features-and-libraries


def _split(s: celtypes.StringType, sep: celtypes.StringType, n: Any = None) -> celtypes.ListType:
    parts = str(s).split(str(sep)) if n is None or int(n) < 0 else str(s).split(str(sep), max(int(n) - 1, 0))
    return celtypes.ListType([celtypes.StringType(p) for p in (parts if n is None or int(n) != 0 else [])])


def _replace(s: Any, old: Any, new: Any, n: Any = None) -> celtypes.StringType:
    return celtypes.StringType(str(s).replace(str(old), str(new), -1 if n is None else int(n)))


def _substring(s: Any, start: Any, end: Any = None) -> celtypes.StringType:
    return celtypes.StringType(str(s)[int(start) : None if end is None else int(end)])


def _join(items: Any, sep: Any = "") -> celtypes.StringType:
    return celtypes.StringType(str(sep).join(str(i) for i in items))


def _is_sorted(items: Any) -> celtypes.BoolType:
    return celtypes.BoolType(all(a <= b for a, b in pairwise(items)))


EXTENSIONS: dict[str, Any] = {
    "split": _split,
    "replace": _replace,
    "substring": _substring,
    "join": _join,
    "lowerAscii": lambda s: celtypes.StringType(str(s).lower()),
    "upperAscii": lambda s: celtypes.StringType(str(s).upper()),
    "trim": lambda s: celtypes.StringType(str(s).strip()),
    "charAt": lambda s, i: celtypes.StringType(str(s)[int(i) : int(i) + 1]),
    "indexOf": lambda s, sub: celtypes.IntType(str(s).find(str(sub))),
    "lastIndexOf": lambda s, sub: celtypes.IntType(str(s).rfind(str(sub))),
    "isSorted": _is_sorted,
    "sum": lambda items: sum(items, celtypes.IntType(0)),
    "min": lambda items: min(items),
    "max": lambda items: max(items),
}
# The macros and functions celpy itself provides (celpy.evaluation.base_functions and its macros).
BUILTIN_MACROS = frozenset({"has", "all", "exists", "exists_one", "map", "filter", "dyn"})

# ---------------------------------------------------------------------------- property-name escaping

RESERVED = frozenset(
    "true false null in as break const continue else for function if import let loop package namespace "
    "return var void while".split()
)


def escape(name: str) -> str:
    """A schema property name as CEL sees it (Kubernetes' escaping rules)."""
    if name in RESERVED:
        return f"__{name}__"
    out = name.replace("__", "__underscores__")
    return out.replace(".", "__dot__").replace("-", "__dash__").replace("/", "__slash__")


class _Unknown(Exception):
    """The value holds something only known after deployment: the rule cannot be judged now."""


def _integer(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "integer"


def to_cel(value: Any, schema: dict[str, Any]) -> Any:
    """A plain value as CEL sees it under its schema (escaped names, schema integers as ints)."""
    if value is UNKNOWN:
        raise _Unknown
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        out = {}
        for key, item in value.items():
            if isinstance(props, dict):
                sub, name = props.get(key, {}), escape(key) if key in props else key
            else:
                sub, name = extra if isinstance(extra, dict) else {}, key
            out[celtypes.StringType(name)] = to_cel(item, sub)
        return celtypes.MapType(out)
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        return celtypes.ListType([to_cel(v, items) for v in value])
    if isinstance(value, float) and value.is_integer() and _integer(schema):
        return celtypes.IntType(int(value))
    return celpy.json_to_cel(value)


# ---------------------------------------------------------------------------- evaluation


@cache
def _env() -> celpy.Environment:
    """Built on first use: celpy compiles its LALR grammar then (about 0.3 s of CPU)."""
    return celpy.Environment()


@cache
def program(rule: str) -> celpy.Runner:
    return _env().program(_env().compile(rule), functions=EXTENSIONS)


def is_transition_rule(rule: dict[str, Any]) -> bool:
    return re.search(r"\boldSelf\b", rule["rule"]) is not None


def _children(value: Any, schema: dict[str, Any], path: str) -> Iterator[tuple[Any, dict[str, Any], str]]:
    if isinstance(value, dict):
        props, extra = schema.get("properties"), schema.get("additionalProperties")
        for key, item in value.items():
            if isinstance(props, dict) and key in props:
                yield item, props[key], f"{path}.{key}" if path else key
            elif not isinstance(props, dict) and isinstance(extra, dict):
                yield item, extra, f"{path}[{key!r}]"
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            yield item, schema["items"], f"{path}[{i}]"


def _check(value: Any, schema: dict[str, Any], path: str) -> Iterator[tuple[str, str, str]]:
    """(field path, message, rule) for every rule that fails at or below this node."""
    if value is None:
        return
    for rule in schema.get("x-kubernetes-validations", ()):
        if is_transition_rule(rule):
            continue
        try:
            result = program(rule["rule"]).evaluate({"self": to_cel(value, schema)})
        except _Unknown:
            continue
        except celpy.CELEvalError as err:
            yield path, f"rule could not be evaluated ({err.args[0]})", rule["rule"]
            continue
        if result is not True and not (isinstance(result, celtypes.BoolType) and bool(result)):
            where = f"{path}{rule['fieldPath']}" if rule.get("fieldPath") else path
            yield where, rule.get("message") or "failed rule", rule["rule"]
    for item, sub, where in _children(value, schema, path):
        yield from _check(item, sub, where)


# Verdicts by the object's JSON text: a verdict depends only on the object and the packaged
# CRD, and one process (the test suite, `tpuray check` over many files) meets the same rendered
# RayJob and RayService many times; celpy interprets each rule at about 8 ms per object (the
# fast suite: 901 objects, 234 distinct, 7.5 CPU s of CEL). Insertion-ordered JSON, so the
# lines come in the order an uncached evaluation gives; an object holding a value only known
# after deployment is not JSON and is evaluated each time.
_VERDICTS: dict[str, tuple[str, ...]] = {}
_VERDICTS_KEPT = 1024


def rule_failures(manifest: dict[str, Any]) -> list[str]:
    """One line per failing x-kubernetes-validations rule: field, the CRD's message, the rule."""
    try:
        key = json.dumps(manifest)
    except TypeError:
        return _rule_failures(manifest)
    verdict = _VERDICTS.get(key)
    if verdict is None:
        if len(_VERDICTS) >= _VERDICTS_KEPT:
            del _VERDICTS[next(iter(_VERDICTS))]
        verdict = _VERDICTS[key] = tuple(_rule_failures(manifest))
    return list(verdict)


def _rule_failures(manifest: dict[str, Any]) -> list[str]:
    schema = openapi_schema(manifest["apiVersion"], manifest["kind"])
    obj = with_defaults(manifest, schema)
    return [
        f"{name_of(manifest)}: {path or '(root)'}: {message} (CEL rule: {rule})"
        for path, message, rule in _check(obj, schema, "")
    ]


def function_names(rule: str) -> set[str]:
    """Every function and macro a rule calls (global f(x) and receiver x.f(y) forms)."""
    names: set[str] = set()
    for tree in _env().compile(rule).iter_subtrees():
        if tree.data == "ident_arg":
            names.add(str(tree.children[0]))
        elif tree.data == "member_dot_arg":
            names.add(str(tree.children[1]))
    return names


def all_rules() -> Iterator[tuple[str, str]]:
    """(Kind, rule) for every x-kubernetes-validations rule of every packaged CRD version."""

    def walk(schema: Any) -> Iterator[str]:
        if isinstance(schema, dict):
            for rule in schema.get("x-kubernetes-validations", ()):
                yield rule["rule"]
            for value in schema.values():
                yield from walk(value)
        elif isinstance(schema, list):
            for value in schema:
                yield from walk(value)

    for crd in crds().values():
        for version in crd.versions:
            for rule in walk(openapi_schema(f"{crd.group}/{version}", crd.kind)):
                yield crd.kind, rule
