"""`tpuray prices refresh [--region R] [--out PATH]`: rewrite the price snapshot from the
Cloud Billing Catalog API (needs Application Default Credentials; see tpuray/cost/billing.py).
`tpuray prices show`: the snapshot's source, date and age."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from tpuray.config import read_stack_file, stack_files
from tpuray.cost import billing, pricebook
from tpuray.errors import UserError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prices", help="the TPU price snapshot: show it, or refresh it from the Cloud Billing Catalog")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    refresh = verbs.add_parser("refresh", help="rewrite tpuray/data/prices.yaml from the Cloud Billing Catalog API")
    refresh.add_argument("--region", action="append", help="a region to price (repeatable); default: every stack's")
    refresh.add_argument("--out", type=Path, default=pricebook.PRICES_FILE, help="where to write the snapshot")
    refresh.set_defaults(handler=run_refresh)
    show = verbs.add_parser("show", help="print the snapshot's source, date and age")
    show.set_defaults(handler=run_show)


def stack_regions() -> list[str]:
    """The regions the stacks in stacks/ deploy to."""
    regions = set()
    for path in stack_files():
        gcp = read_stack_file(path).get("gcp") or {}
        if isinstance(gcp, dict) and gcp.get("region"):
            regions.add(str(gcp["region"]))
    return sorted(regions)


def run_refresh(args: argparse.Namespace) -> int:
    regions = args.region or stack_regions()
    try:
        prices = billing.fetch(billing.default_client(), regions)
    except billing.RefreshError as err:
        raise UserError(str(err)) from None
    doc = billing.build_snapshot(prices, regions, dt.date.today())
    billing.write_snapshot(doc, args.out)
    print(f"wrote {args.out}: {len(prices)} TPU prices for {', '.join(regions)} from {billing.SOURCE}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    print(pricebook.age_text())
    return 0
