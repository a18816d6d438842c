"""Policy pack entry point: the CLI runs `python __main__.py` here and reads the gRPC port it prints.

Constructing PolicyPack starts the analyzer server and blocks, so nothing else may import
this file; the rules themselves are importable from tpuray.policies.
"""

import sys
from pathlib import Path

# The CLI starts the pack with policies/ as its working directory: make the repo importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import PolicyPack  # noqa: E402

from tpuray.policies import PACK_DESCRIPTION, PACK_ENFORCEMENT, PACK_NAME, pulumi_policies  # noqa: E402

PolicyPack(
    name=PACK_NAME,
    policies=pulumi_policies(),
    enforcement_level=PACK_ENFORCEMENT,
    description=PACK_DESCRIPTION,
)
