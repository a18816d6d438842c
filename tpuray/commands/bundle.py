"""`tpuray bundle [--out DIR] [--json]`: build the app bundle the rendered objects reference.

The zip is reproducible (tpuray/bundle.py): the deploy workflow builds it, uploads it to
<tpuray:workloads.bundleUri>/<name> and then runs `pulumi up`, whose RayJob and RayService
name that same object.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tpuray import bundle, terminal
from tpuray.config.checks import load_stack


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bundle", help="build the ray_apps/ working_dir zip, named by its content hash")
    p.add_argument("--out", type=Path, default=Path("dist"), help="directory to write the zip to (default dist/)")
    p.add_argument("--json", action="store_true", help="print {path, name, sha256, sources_sha256[, uri]} as JSON")
    p.add_argument("--stack", default=None, help="also print the gs:// URI the stack's objects name (its bundleUri)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    built = bundle.build()
    path = built.write(args.out)
    info = {"path": str(path), "name": built.name, "sha256": built.sha256, "sources_sha256": built.sources_sha256}
    if args.stack:
        info["uri"] = built.uri(load_stack(args.stack).workloads.bundle_uri)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        terminal.console().print(f"{path} ({len(built.data)} bytes, {len(built.files)} files) sha256 {built.sha256}")
    return 0
