"""`tpuray render STACK --out DIR`: every in-cluster object of the stack, one YAML file each."""

from __future__ import annotations

import argparse
from pathlib import Path

from tpuray.preview.mockrun import run_stack
from tpuray.preview.render import write_manifests


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("render", help="write the stack's Kubernetes objects as YAML (kubectl apply -f DIR)")
    p.add_argument("stack", help="a stack name in stacks/ or a path to a Pulumi.<name>.yaml")
    p.add_argument("--out", required=True, type=Path, help="output folder (created if missing)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    stack_run = run_stack(args.stack)
    for path in write_manifests(stack_run, args.out):
        print(path)
    return 0
