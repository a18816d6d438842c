"""`tpuray topology [--generation G] [--all] [--json]`: print the TPU catalog.

The table shows the headline topologies (the ones GKE's and Cloud TPU's tables list) unless
--all asks for every topology the documented rule allows; --json always lists every shape.
"""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from tpuray import catalog, terminal


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topology", help="print the TPU catalog (every generation and topology)")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.add_argument("--generation", choices=list(catalog.GENERATIONS), help="only this generation")
    p.add_argument("--all", action="store_true", help="every topology GKE accepts, not only the headline ones")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    every = [s for s in catalog.all_shapes() if args.generation in (None, s.generation)]
    if args.json:
        print(json.dumps([s.as_json() for s in every], indent=2))
        return 0
    shapes = every if args.all else [s for s in catalog.headline_shapes() if s in every]
    table = Table(title="TPU slice catalog", show_lines=False)
    for column in (
        "generation",
        "topology",
        "chips",
        "hosts",
        "chips/host",
        "machine type",
        "gke-tpu-accelerator",
        "Ray accelerator",
        "pod type",
        "placement",
    ):
        table.add_column(column, justify="right" if column in ("chips", "hosts", "chips/host") else "left")
    for s in shapes:
        table.add_row(
            s.generation,
            s.topology,
            str(s.chips),
            str(s.hosts),
            str(s.chips_per_host),
            s.machine_type,
            s.gke_accelerator,
            s.ray_accelerator_type,
            s.pod_type,
            s.placement.value,
        )
    out = terminal.console(width=160)
    out.print(table)
    if len(shapes) < len(every):
        out.print(f"{len(shapes)} of {len(every)} shapes (headline topologies); --all lists every one")
    return 0
