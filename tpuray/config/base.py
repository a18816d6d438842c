"""The base of every stack config model, and the config's namespace and top-level keys.

Every model rejects unknown keys by name and never reads a boolean as a number; the messages of
what fails go through tpuray/config/checks.py, one line each.
"""

from __future__ import annotations

from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

NAMESPACE = "tpuray"
CONFIG_KEYS = (
    "environment",
    "gcp",
    "cluster",
    "slicePools",
    "ray",
    "workloads",
    "prices",
    "terraform",
    "observability",
    "images",
    "queues",
)


class ConfigModel(BaseModel):
    # Unknown keys are typos more often than not: reject them by name.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_as_number(cls, value: Any, info: ValidationInfo) -> Any:
        """Pydantic's lax mode reads `slices: true` as 1 slice: a number is never a boolean here.
        Numbers written as strings stay valid (`pulumi config set --path` stores "2")."""
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and _is_number(field.annotation):
            raise PydanticCustomError("number_not_boolean", "input should be a number, not true or false")
        return value


def _is_number(annotation: Any) -> bool:
    kinds = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    return any(kind in (int, float) for kind in kinds)
