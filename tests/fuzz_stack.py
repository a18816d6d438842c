"""Random bad stack config for the CLI, shared by tests/test_fuzz_cli.py (a few hundred cases,
fixed seed, in `make test-fast`) and benchmarks/fuzz_cli.py (as many as asked, printing counts).

A case takes a committed stack, changes one key (a new value of any type, the key removed, or an
unknown key beside it), writes the stack file and runs the real `tpuray` CLI on it in-process.
`verdict` says what was wrong with the outcome, if anything: an exception that escaped
`tpuray.cli.main` (the traceback a user would see), an exit status other than 0, 1 or 2, an
error line that is not one `error: ` line, or a refusal that does not name the changed key.
"""

from __future__ import annotations

import contextlib
import io
import json
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from tpuray import cli
from tpuray.config import NAMESPACE, read_stack_file, stacks_dir

Path_ = tuple[str | int, ...]
# Values whose text Rich would read as markup or emoji, and other text users paste by mistake.
NASTY_TEXT = (
    "[bold]",
    "[/x]",
    "[/]",
    "gs://BUCKET[/PREFIX]",
    "projects/[PROJECT]/secrets/[NAME]",
    "]",
    "[",
    "[red]x[/red]",
    ":smile:",
    "",
    " ",
    "${VAR}",
    "gs://",
    "https://example.com/x",
    "null",
    "4x4x4x4",
    "v6e",
    "-1",
    "1e400",
    "ünïcödé",
)


def config_paths(value: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    """Every key and list item of a config tree, parents before children."""
    if prefix:
        yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from config_paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from config_paths(child, (*prefix, i))


def key_text(path: Path_) -> str:
    """A path as tpuray's messages name it: `tpuray:workloads.train.steps`, `tpuray:slicePools[0].name`."""
    out = f"{NAMESPACE}:"
    for i, part in enumerate(path):
        out += f"[{part}]" if isinstance(part, int) else ("" if i == 0 else ".") + str(part)
    return out


scalars = st.one_of(
    st.sampled_from(NASTY_TEXT),
    st.text(alphabet=st.sampled_from("ab1-_./:[]"), max_size=12),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(st.sampled_from(["name", "x", "[y]", "cidr", "spot"]), scalars, max_size=2),
)


# Keys that other keys use by value: a change there may be refused where it is used (a slice pool
# removed or renamed is refused as the workload's `pool` that no longer names a pool).
# The queues (tpuray:queues) use both: a quota names a pool and one of its tiers, and the workloads
# team must be able to hold the training job's slices.
USED_BY: dict[Path_, tuple[Path_, ...]] = {
    ("slicePools",): (("workloads",), ("queues",)),
    ("workloads",): (("queues",),),
    # tpuray:images.repository decides whether tpuray:ray.image must be pinned by digest (Binary Authorization).
    ("images",): (("ray",),),
}


@dataclass(frozen=True)
class Change:
    path: Path_
    action: str  # "set", "delete" or "add-unknown"
    value: Any = None

    def apply(self, raw: dict[str, Any]) -> dict[str, Any]:
        doc = json.loads(json.dumps(raw))
        parent: Any = doc
        for part in self.path[:-1]:
            parent = parent[part]
        last = self.path[-1]
        if self.action == "set":
            parent[last] = self.value
        elif self.action == "delete":
            del parent[last]
        elif isinstance(last, str):
            parent[f"{last}Typo"] = self.value
        else:  # an unknown item of a list is just a bad item
            parent[last] = self.value
        return doc

    def named_keys(self) -> list[str]:
        """The keys a refusal may name: the one changed (for an unknown key, the key added) or a
        key that holds it (removing `spot` from a tier is refused as the tier that names no capacity)."""
        path = self.path
        if self.action == "add-unknown" and isinstance(path[-1], str):
            path = (*path[:-1], f"{path[-1]}Typo")
        users = [key_text(user) for used, users in USED_BY.items() if path[: len(used)] == used for user in users]
        return [key_text(path[:n]) for n in range(len(path), 0, -1)] + users


def changes(raw: dict[str, Any]) -> st.SearchStrategy[Change]:
    paths = list(config_paths(raw))
    return st.builds(
        Change, st.sampled_from(paths), st.sampled_from(("set", "set", "set", "delete", "add-unknown")), values
    )


def stack_raw(stack: str) -> dict[str, Any]:
    return read_stack_file(stacks_dir() / f"Pulumi.{stack}.yaml")


def write_stack(folder: Path, name: str, raw: dict[str, Any]) -> Path:
    path = folder / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump({"config": {f"{NAMESPACE}:{k}": v for k, v in raw.items()}}, allow_unicode=True))
    return path


@dataclass(frozen=True)
class Outcome:
    code: int | None
    stdout: str
    stderr: str
    escaped: str | None  # the traceback of an exception that left cli.main

    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line]


def run_cli(argv: list[str]) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    escaped = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # argparse's own usage errors
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException:  # noqa: BLE001 - this is what the test looks for
            escaped = traceback.format_exc()
    return Outcome(code, out.getvalue(), err.getvalue(), escaped)


def verdict(change: Change, outcome: Outcome) -> str | None:
    """What is wrong with `outcome` for `change`; None when it is what a user should get."""
    if outcome.escaped is not None:
        return f"traceback:\n{outcome.escaped}"
    if "Traceback (most recent call last)" in outcome.stderr + outcome.stdout:
        return f"a traceback was printed:\n{outcome.stderr}"
    if outcome.code not in (0, 1, 2):
        return f"exit {outcome.code}, not 0, 1 or 2:\n{outcome.stderr}"
    if outcome.code == 2:
        lines = outcome.error_lines()
        if not lines or any(not line.startswith("error: ") for line in lines):
            return f"exit 2 without one 'error: ' line per problem:\n{outcome.stderr}"
        keys = change.named_keys()
        if not any(line.startswith(f"error: {key}") for key in keys for line in lines):
            return f"the refusal names neither {keys[0]} nor a key that holds it:\n{outcome.stderr}"
    return None
