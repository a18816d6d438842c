"""A value the Pulumi engine cannot know during preview (an output of another resource): the
schema checks, the CEL rules and the policies all skip judging it."""

from __future__ import annotations


class Unknown:
    """A value the engine cannot know during preview (an output of another resource)."""

    _instance: Unknown | None = None

    def __new__(cls) -> Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unknown during preview>"


UNKNOWN = Unknown()
