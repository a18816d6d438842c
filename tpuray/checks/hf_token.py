"""Finding a Hugging Face token held in plain text, in stack config or rendered objects.

A Hugging Face user access token is "hf_" followed by letters and digits
(huggingface.co/docs/hub/security-tokens); 30+ of them here, so that words like "hf_token"
or "hf_overrides" never match. One home for the pattern: the stack check (tpuray/desired/llm_stack.py)
and the policy rule `hf-token-not-plaintext` (tpuray/policies/rules_secrets.py) both use it.
"""

from __future__ import annotations

import re
from typing import Any

HF_TOKEN = re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")


def plaintext_token_paths(value: Any, path: str = "") -> list[str]:
    """Paths (a.b[0].c) of the strings in value that hold a Hugging Face token."""
    if isinstance(value, str):
        return [path or "."] if HF_TOKEN.search(value) else []
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in plaintext_token_paths(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in plaintext_token_paths(v, f"{path}[{i}]")]
    return []
