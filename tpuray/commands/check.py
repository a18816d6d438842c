"""`tpuray check PATH... [--json]`: the policy pack's Kubernetes rules on plain YAML manifests.

Same rules, same analyzer as `tpuray preview` (tpuray.policies.evaluate.check_manifests);
stack-only rules (node pools, the GKE cluster) are disabled because plain manifests have no stack.
"""

from __future__ import annotations

import argparse
import json

from tpuray import terminal
from tpuray.config import RayConfig
from tpuray.policies.evaluate import check_manifests

ENVIRONMENTS = ("dev", "staging", "prod")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="run the policy pack's Kubernetes rules on YAML manifests (files or folders)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="YAML files or folders (multi-document)")
    p.add_argument("--json", action="store_true", help='print {"violations": [...]} as JSON')
    p.add_argument("--env", choices=ENVIRONMENTS, default="prod",
                   help="enforcement levels of policies/policy-config.<env>.json (default prod)")  # fmt: skip
    p.add_argument("--ray-version", default=RayConfig().version,
                   help="the pinned Ray version images must carry (default: the project's pin)")  # fmt: skip
    p.add_argument("--allow-image", action="append", default=[], metavar="PATTERN",
                   help="an extra allowed TPU image (glob), e.g. 'vllm/vllm-tpu:*'")  # fmt: skip
    p.add_argument("--conventions", action="store_true",
                   help="hold every manifest to this project's conventions (default: only those labelled "
                        "app.kubernetes.io/managed-by: tpuray; on others they are advisory)")  # fmt: skip
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    violations = check_manifests(args.paths, args.env, args.ray_version, args.allow_image, args.conventions)
    if args.json:
        print(json.dumps({"violations": [v.as_json() for v in violations]}, indent=2))
    else:
        out = terminal.console(soft_wrap=True)
        for v in violations:
            colour = "red" if v.level == "mandatory" else "yellow"
            out.print(terminal.styled((v.level, colour), " ", (v.policy, "bold"), f" {v.resource} ({v.file or ''})"))
            out.print(f"  {v.message}")
        mandatory = sum(v.level == "mandatory" for v in violations)
        out.print(f"{len(violations)} violation(s), {mandatory} mandatory")
    return 1 if any(v.level == "mandatory" for v in violations) else 0
