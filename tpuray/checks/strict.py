"""Strict mocks: every resource input checked against the installed provider SDK's own types.

Pulumi mocks accept any input, so a misspelled `node_config` key or a placement policy
without its required `type` previews clean and fails minutes into `pulumi up`. This module
checks what the mock engine receives against the pinned SDKs (pulumi-gcp, pulumi-kubernetes):

- the resource class comes from the SDK's own resource-module registry (type token -> class);
- each input's type comes from the class's `_internal_init` signature, and nested objects from
  the SDK's `*ArgsDict` TypedDicts (their `Required`/`NotRequired` keys);
- the engine hands inputs over as camelCase wire names with numbers as floats; they are mapped
  back to the SDK's snake_case Python names through the SDK's own name tables (each `*Args`
  input type's getters), and integral floats become ints where the SDK wants an int;
- enums come from the SDK's docstrings where they give one ("Supports a single value: COMPACT",
  "Possible values are: `A`, `B`");
- the check itself is typeguard's `check_type` (unknown keys, missing required keys, a list
  where an object belongs and the reverse, wrong scalar types) over TypedDicts built from the
  SDK's, with `pulumi.Input`/`Output`/`Awaitable` wrappers removed (inputs reach the mocks resolved).

Nothing here is a hand-written schema: remove a key from the SDK and the check follows.
Kubernetes custom resources (RayJob, ComputeClass, ...) have free-form `spec`s in the SDK;
their specs are validated against the CRD schemas elsewhere (tpuray.checks.schemas).
"""

from __future__ import annotations

import collections.abc as cabc
import difflib
import functools
import importlib
import inspect
import re
import sys
import typing
from typing import Any, ForwardRef, Literal, NotRequired, Required, TypedDict, Union

import pulumi
import typeguard
from pulumi import _types as pulumi_types
from pulumi.runtime import rpc

_NONE = type(None)
# Component resources of this program are not provider resources: nothing to check against.
_UNCHECKED_PACKAGES = ("tpuray",)
_ENUM_SENTENCE = re.compile(
    r"(?:Supports a single value:|(?:Possible|Accepted|Valid) values are:?)\s+(?P<items>[^.]*?)\.(?:\s|$)"
)
_ENUM_ITEM = re.compile(r'^[`"]*(?P<v>[A-Za-z][A-Za-z0-9_]*)[`"]*$')


class StrictInputError(Exception):
    """An input the provider SDK would refuse: one line per violation."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


def _resource_class(type_token: str) -> type | None:
    package_name = type_token.split(":")[2 if type_token.startswith("pulumi:providers:") else 0]
    try:  # importing the SDK registers its resource modules (as the program's import does)
        importlib.import_module(f"pulumi_{package_name}")
    except ImportError:
        return None
    if type_token.startswith("pulumi:providers:"):
        package = rpc._RESOURCE_PACKAGES.get(type_token.split(":")[2])  # noqa: SLF001 - the SDK's own registry
        info = getattr(package[0], "pkg_info", None) if package else None
        return getattr(sys.modules.get(info["fqn"]) or __import__(info["fqn"]), info["class"]) if info else None
    try:
        pkg, mod, _ = type_token.split(":")
    except ValueError:
        return None
    module = rpc.get_resource_module(pkg, mod, "")
    info = getattr(module, "mod_info", None)
    if not info or type_token not in info["classes"]:
        return None
    fqn = info["fqn"]
    return getattr(sys.modules.get(fqn) or __import__(fqn, fromlist=["_"]), info["classes"][type_token])


def _resolve(ref: Any, module: str) -> Any:
    """A ForwardRef written in an SDK module ('NodePoolPlacementPolicyArgsDict', 'outputs.X')."""
    if not isinstance(ref, ForwardRef):
        return ref
    text = ref.__forward_arg__
    if text.startswith(("Output[", "outputs.")):
        return None  # pulumi.Input's Output[T] and output types: inputs arrive resolved, as dicts
    try:
        return eval(text, vars(sys.modules[module]))  # noqa: S307 - an annotation from the SDK's own source
    except (NameError, AttributeError):
        return None


def _is_wrapper(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    return tp is None or origin is cabc.Awaitable or tp is pulumi.Output or origin is pulumi.Output


@functools.cache
def _args_class(dict_type: type) -> type | None:
    """The `*Args` input type beside a `*ArgsDict` TypedDict: it holds the wire-name table and docs."""
    name = dict_type.__name__.removesuffix("Dict")
    return getattr(sys.modules[dict_type.__module__], name, None)


@functools.cache
def _param_docs(cls: type) -> dict[str, str]:
    doc = inspect.getdoc(cls.__init__) or ""
    found = re.findall(r":param\s+(?:\S+\s+)?(\w+):\s*(.*?)(?=\n\s*:param|\Z)", doc, flags=re.S)
    return {name: " ".join(text.split()) for name, text in found}


def doc_enum(doc: str) -> tuple[str, ...] | None:
    """The values a docstring says a string input accepts, if it lists them exhaustively."""
    match = _ENUM_SENTENCE.search(doc)
    if not match:
        return None
    items = [i for i in re.split(r",\s*|\s+and\s+|\s+or\s+", match["items"]) if i.strip()]
    values = [_ENUM_ITEM.match(i.strip().removeprefix("and ").removeprefix("or ")) for i in items]
    if not values or not all(values):
        return None
    return tuple(v["v"] for v in values if v)


def _plain(tp: Any, module: str, doc: str = "") -> Any:
    """The SDK annotation without Input/Output/Awaitable, ArgsDicts made plain, enums as Literal."""
    tp = _resolve(tp, module)
    origin = typing.get_origin(tp)
    if origin is Union:
        # The engine drops unset (None) inputs, so Optional adds nothing to check.
        members = [_resolve(a, module) for a in typing.get_args(tp)]
        members = [m for m in members if not _is_wrapper(m) and m is not _NONE]
        dicts = [m for m in members if _is_typed_dict(m)]
        inputs = [m for m in members if isinstance(m, type) and pulumi_types.is_input_type(m)]
        if dicts:  # Union['XArgs', 'XArgsDict', 'outputs.X']: a dict is what reaches the wire
            members = dicts[:1]
        elif inputs:  # pulumi.InputType['XArgs'] = Union[XArgs, Mapping[str, Any]]: the typed one
            members = inputs[:1]
        if not members:
            return Any
        plain = [_plain(m, module, doc) for m in members]
        plain = list(dict.fromkeys(plain))
        return plain[0] if len(plain) == 1 else Union[tuple(plain)]  # noqa: UP007 - built at run time
    if origin in (cabc.Sequence, list, typing.List):  # noqa: UP006
        (item,) = typing.get_args(tp) or (Any,)
        return list[_plain(item, module)]
    if origin in (cabc.Mapping, dict, typing.Dict):  # noqa: UP006
        _, value = typing.get_args(tp) or (str, Any)
        return dict[str, _plain(value, module)]
    if _is_typed_dict(tp):
        return _plain_typed_dict(tp)
    if isinstance(tp, type) and pulumi_types.is_input_type(tp):
        return _plain_input_type(tp)
    if tp is str and doc:
        values = doc_enum(doc)
        if values:
            return Literal[values]
    if tp is _NONE or tp is None:
        return _NONE
    return tp


def _is_typed_dict(tp: Any) -> bool:
    return isinstance(tp, type) and typing.is_typeddict(tp)


def _is_sdk_object(tp: type) -> bool:
    return pulumi_types.is_input_type(tp) or pulumi_types.is_output_type(tp)


@functools.cache
def _plain_typed_dict(dict_type: type) -> Any:
    args_cls = _args_class(dict_type)
    docs = _param_docs(args_cls) if args_cls else {}
    fields: dict[str, Any] = {}
    raw = dict_type.__annotations__
    for key, annotation in raw.items():
        annotation = _resolve(annotation, dict_type.__module__)
        required = key in dict_type.__required_keys__
        if typing.get_origin(annotation) in (NotRequired, Required):
            required = typing.get_origin(annotation) is Required
            annotation = typing.get_args(annotation)[0]
        plain = _plain(annotation, dict_type.__module__, docs.get(key, ""))
        fields[key] = Required[plain] if required else NotRequired[plain]
    result = TypedDict(dict_type.__name__, fields)  # type: ignore[operator]
    _TYPED_DICT_NAMES[result] = _wire_names(args_cls) if args_cls else {}
    return result


@functools.cache
def _plain_input_type(cls: type) -> Any:
    # An input type with no ArgsDict beside it (pulumi-kubernetes' older style): its __init__.
    sibling = getattr(sys.modules[cls.__module__], f"{cls.__name__}Dict", None)
    if _is_typed_dict(sibling):
        return _plain_typed_dict(sibling)
    result = _signature_typed_dict(cls.__init__, cls.__name__, cls.__module__, _param_docs(cls))
    _TYPED_DICT_NAMES[result] = _wire_names(cls)
    return result


def _signature_typed_dict(fn: Any, name: str, module: str, docs: dict[str, str]) -> Any:
    fields: dict[str, Any] = {}
    for param in list(inspect.signature(fn).parameters.values())[1:]:
        if param.kind is not param.KEYWORD_ONLY and param.kind is not param.POSITIONAL_OR_KEYWORD:
            continue
        if param.name in ("resource_name", "opts", "__props__", "__self__"):
            continue
        plain = _plain(param.annotation, module, docs.get(param.name, ""))
        required = param.default is inspect.Parameter.empty
        fields[param.name] = Required[plain] if required else NotRequired[plain]
    return TypedDict(name, fields)  # type: ignore[operator]


@functools.cache
def resource_schema(type_token: str) -> tuple[Any, dict[str, str]] | None:
    """(plain TypedDict of the resource's inputs, wire name -> python name) from the SDK."""
    cls = _resource_class(type_token)
    if cls is None and type_token.startswith("kubernetes:"):
        # A custom resource (RayJob, ComputeClass): the SDK types its envelope, the CRD its spec.
        from pulumi_kubernetes.apiextensions import CustomResource

        cls = CustomResource
    if cls is None:
        return None
    module = sys.modules[cls.__module__]
    args_cls = getattr(module, f"{cls.__name__}Args", None)
    docs = _param_docs(args_cls) if args_cls else {}
    schema = _signature_typed_dict(cls._internal_init, cls.__name__, cls.__module__, docs)  # noqa: SLF001
    if args_cls is not None:  # required inputs: the Args class's __init__ has no default for them
        required = {
            p.name for p in inspect.signature(args_cls.__init__).parameters.values() if p.default is p.empty
        } - {"self", "__self__"}
        fields = {
            k: (Required[typing.get_args(v)[0]] if k in required else v) for k, v in schema.__annotations__.items()
        }
        schema = TypedDict(cls.__name__, fields)  # type: ignore[operator]
    names = _wire_names(args_cls) if args_cls else {}
    return schema, names


@functools.cache
def _wire_names(args_cls: type) -> dict[str, str]:
    if not pulumi_types.is_input_type(args_cls):
        return {}
    return {wire: py for py, wire in pulumi_types.input_type_py_to_pulumi_names(args_cls).items()}


def _to_python(value: Any, plain: Any, names: dict[str, str] | None = None) -> Any:
    """Wire value -> the value the SDK's Python types describe (snake_case keys, ints)."""
    origin = typing.get_origin(plain)
    if origin is Union:
        options = [a for a in typing.get_args(plain) if a is not _NONE]
        if value is None or not options:
            return value
        for option in options:  # the member whose shape matches the value
            if isinstance(value, dict) and (_is_typed_dict(option) or typing.get_origin(option) is dict):
                return _to_python(value, option)
            if isinstance(value, list) and typing.get_origin(option) is list:
                return _to_python(value, option)
        return _to_python(value, options[0])
    if origin in (Required, NotRequired):
        return _to_python(value, typing.get_args(plain)[0])
    if _is_typed_dict(plain) and isinstance(value, dict):
        table = names if names is not None else _TYPED_DICT_NAMES.get(plain, {})
        hints = plain.__annotations__
        out = {}
        for key, item in value.items():
            py = table.get(key, key)
            out[py] = _to_python(item, hints[py]) if py in hints else item
        return out
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(plain)
        return [_to_python(v, item) for v in value]
    if origin is dict and isinstance(value, dict):
        _, item = typing.get_args(plain)
        return {k: _to_python(v, item) for k, v in value.items()}
    if plain is int and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# plain TypedDict -> its wire-name table (filled as plain TypedDicts are built)
_TYPED_DICT_NAMES: dict[Any, dict[str, str]] = {}


def _path(err: typeguard.TypeCheckError) -> tuple[str, str]:
    """typeguard's path ('value of key 'x' of item 0 of ...') as 'a.b[0].x', and its message."""
    parts = []
    for element in reversed(list(err._path)):  # noqa: SLF001 - typeguard keeps the path here
        key = re.match(r"value of key (.+)$", element)
        item = re.match(r"item (\d+)$", element)
        if key:
            parts.append("." + key.group(1).strip("'\""))
        elif item:
            parts.append(f"[{item.group(1)}]")
    return "".join(parts), str(err.args[0]) if err.args else str(err)


def _unwrap(plain: Any) -> Any:
    while typing.get_origin(plain) in (Required, NotRequired):
        plain = typing.get_args(plain)[0]
    return plain


def _type_name(plain: Any) -> str:
    plain = _unwrap(plain)
    if _is_typed_dict(plain):
        return f"an object ({plain.__name__})"
    if typing.get_origin(plain) is Literal:
        return "one of " + ", ".join(typing.get_args(plain))
    if typing.get_origin(plain) is list:
        return f"a list of {_type_name(typing.get_args(plain)[0])}"
    if typing.get_origin(plain) is dict:
        return f"a map of {_type_name(typing.get_args(plain)[1])}"
    return typeguard._utils.get_type_name(plain).rsplit(".", 1)[-1]  # noqa: SLF001


def _explain(plain: Any, message: str) -> str:
    """What went wrong at one input, in the SDK's own terms."""
    plain = _unwrap(plain)
    if _is_typed_dict(plain) and (extra := re.search(r"extra key\(s\): (.+)$", message)):
        known = sorted(plain.__annotations__)
        parts = []
        for key in re.findall(r'"([^"]+)"', extra.group(1)):
            snake = re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()
            close = difflib.get_close_matches(snake, known, n=1, cutoff=0.6)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            parts.append(f'unknown key "{key}"{hint}')
        return "; ".join(parts) + f"; {plain.__name__} has no such key"
    if _is_typed_dict(plain) and (missing := re.search(r"missing required key\(s\): (.+)$", message)):
        return f"missing required key(s) {missing.group(1)}; {plain.__name__} requires " + ", ".join(
            sorted(plain.__required_keys__)
        )
    return f"{message.removeprefix('is ')}; the SDK expects {_type_name(plain)}"


def _lookup(plain: Any, path: str) -> Any:
    """The plain type at a dotted path (for naming what the SDK expects there)."""
    for part in re.findall(r"\.(\w+)|\[\d+\]", path):
        while typing.get_origin(plain) in (Required, NotRequired, Union):
            args = [a for a in typing.get_args(plain) if a is not _NONE]
            plain = args[0]
        if part and _is_typed_dict(plain):
            plain = plain.__annotations__.get(part, Any)
        elif not part and typing.get_origin(plain) is list:
            plain = typing.get_args(plain)[0]
    return plain


def _envelope_only(type_token: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs of a custom resource without the top-level fields its packaged CRD declares."""
    from tpuray.checks import schemas

    _, group_version, kind = type_token.split(":", 2)
    manifest = {"apiVersion": group_version, "kind": kind}
    declared = (
        set(schemas.openapi_schema(group_version, kind).get("properties", {}))
        if schemas.has_schema(manifest)
        else set()
    )
    envelope = {"apiVersion", "kind", "metadata", "spec"}
    return {k: v for k, v in inputs.items() if k in envelope or k not in declared}


def check_inputs(type_token: str, name: str, inputs: dict[str, Any]) -> list[str]:
    """One line per input the provider SDK would refuse; [] when the resource is clean."""
    if type_token.split(":")[0] in _UNCHECKED_PACKAGES:
        return []
    found = resource_schema(type_token)
    if found is None:
        return [f'{type_token} "{name}": unknown resource type for the pinned provider SDKs']
    schema, names = found
    inputs = {k: v for k, v in inputs.items() if not k.startswith("__")}
    if type_token.startswith("kubernetes:"):
        # A custom resource's fields beside its envelope (a Kueue WorkloadPriorityClass's `value`):
        # the provider sends them as the Node SDK's `otherFields` (pulumi-kubernetes issue 2363),
        # and crd-schema holds them to the CRD (infra/components/queues.py KubeObject).
        inputs = _envelope_only(type_token, inputs)
    value = _to_python(inputs, schema, names)
    try:
        typeguard.check_type(value, schema, collection_check_strategy=typeguard.CollectionCheckStrategy.ALL_ITEMS)
    except typeguard.TypeCheckError as err:
        path, message = _path(err)
        where = path.lstrip(".") or "inputs"
        return [f'{type_token} "{name}": {where}: {_explain(_lookup(schema, path), message)}']
    return []
