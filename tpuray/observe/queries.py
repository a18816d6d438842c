"""The documented metric names (tpuray/data/metrics.yaml) and PromQL checks against them."""

from __future__ import annotations

from functools import cache
from typing import Any

import promql_parser
import yaml

from tpuray.paths import DATA_DIR

METRICS_FILE = DATA_DIR / "metrics.yaml"


@cache
def documented() -> dict[str, Any]:
    return yaml.safe_load(METRICS_FILE.read_text())


def documented_names() -> set[str]:
    return set(documented()["metrics"])


def metric_names(query: str) -> list[str]:
    """Every metric a PromQL query selects, in order. Raises ValueError when it does not parse."""
    names: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names.append(node.name)

    promql_parser.walk(promql_parser.parse(query), pre_visit=visit)
    return names


def query_problems(query: str) -> list[str]:
    """'' when the query parses and names only documented metrics, else one line per problem."""
    try:
        names = metric_names(query)
    except ValueError as err:
        return [f"does not parse ({err}): {query}"]
    if not names:
        return [f"selects no metric: {query}"]
    known = documented_names()
    return [f"{name} is not in tpuray/data/metrics.yaml: {query}" for name in names if name not in known]


def selector(**labels: str) -> str:
    """A PromQL label matcher list, in the order given: selector(a="x") -> '{a="x"}'."""
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
