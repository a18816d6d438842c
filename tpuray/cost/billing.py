"""TPU prices from the Cloud Billing Catalog API, through Google's client library
(`google-cloud-billing`, `CloudCatalogClient.list_services` / `list_skus`), written to
tpuray/data/prices.yaml as a dated snapshot by `tpuray prices refresh`.

What the catalog holds, as public catalog fetchers read it (sources cited in docs/cost.md):
- v5e, v5p and v6e SKUs are in the Compute Engine service (services/6F81-5844-456A), priced
  per chip-hour; their descriptions carry `TpuV5e`, `TpuV5p`, `TpuV6e`
  (skypilot-org/skypilot sky/catalog/data_fetchers/fetch_gcp.py; dstackai/gpuhunt
  src/gpuhunt/providers/gcp.py). v2-v4 are in the Cloud TPU service, priced per device or
  pod, not per chip: a refresh keeps the snapshot's figures for those (and for TPU7x).
- Spot TPU SKUs may carry usageType `OnDemand`; "Preemptible" in the description marks them
  (fetch_gcp.py: "'usageType' of preemptible TPUs are 'OnDemand'").
- Commitments are usageType `Commit1Yr` / `Commit3Yr` (the API's Category.usage_type).
Each written price records its SKU id, description, region, effective time and refresh date.
"""

from __future__ import annotations

import datetime as dt
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tpuray import capacity, catalog
from tpuray.config import price_tiers
from tpuray.cost import pricebook

SERVICES = ("Compute Engine", "Cloud TPU")  # display names, looked up with list_services
SOURCE = "Cloud Billing Catalog API (cloudbilling.googleapis.com/v1)"
# Generation -> description tokens (lowercase, letters and digits only) of per-chip-hour SKUs.
PER_CHIP_TOKENS = {"v5e": ("tpuv5e", "tpuv5lite"), "v5p": ("tpuv5p",), "v6e": ("tpuv6e",)}
SKIPPED_WORDS = ("reserved", "sole tenancy", "premium")  # not a price of a plain chip-hour
CREDENTIALS_HELP = (
    "tpuray prices refresh needs Application Default Credentials for the Cloud Billing Catalog API "
    "(cloudbilling.googleapis.com): run `gcloud auth application-default login` or set "
    "GOOGLE_APPLICATION_CREDENTIALS to a service-account key file"
)


class RefreshError(Exception):
    """A refresh that cannot complete; the message is one line for the user."""


@dataclass(frozen=True)
class SkuPrice:
    generation: str
    tier: str  # a price_tiers() value or a pricebook.COMMITMENTS value
    region: str
    price: float  # USD per chip-hour
    sku_id: str
    description: str
    effective_time: str
    service: str

    def entry(self, refreshed: dt.date) -> dict[str, Any]:
        return {
            "price": round(self.price, 6),
            "source": f"{SOURCE} {self.service}",
            "date": refreshed.isoformat(),
            "sku_id": self.sku_id,
            "description": self.description,
            "region": self.region,
            "effective_time": self.effective_time,
            "refreshed": refreshed.isoformat(),
        }


def generation_of(description: str) -> str | None:
    key = re.sub(r"[^a-z0-9]", "", description.lower())
    return next((g for g, tokens in PER_CHIP_TOKENS.items() if any(t in key for t in tokens)), None)


def tier_of(usage_type: str, description: str) -> str | None:
    """The price key of a SKU: a commitment's, else its capacity tier's (tpuray/capacity.py rows)."""
    if usage_type == "Commit1Yr":
        return "1-year"
    if usage_type == "Commit3Yr":
        return "3-year"
    tier = capacity.tier_of_sku(usage_type, description)
    return None if tier is None else tier.price_key


def unit_price(sku: Any) -> tuple[float, str] | None:
    """USD per unit of the SKU's first pricing tier and its effective time; None unless hourly USD."""
    if not sku.pricing_info:
        return None
    info = sku.pricing_info[0]
    expr = info.pricing_expression
    rates = sorted(expr.tiered_rates, key=lambda r: r.start_usage_amount)
    if expr.usage_unit != "h" or not rates or rates[0].unit_price.currency_code != "USD":
        return None
    money = rates[0].unit_price
    return round(money.units + money.nanos / 1e9, 9), info.effective_time.isoformat()


def parse_skus(skus: Iterable[Any], regions: Iterable[str], service: str = "") -> list[SkuPrice]:
    """Per-chip-hour TPU prices in `regions` from Sku messages (google.cloud.billing_v1.Sku)."""
    wanted = set(regions)
    found: dict[tuple[str, str, str], SkuPrice] = {}
    for sku in skus:
        generation = generation_of(sku.description)
        if generation is None or any(w in sku.description.lower() for w in SKIPPED_WORDS):
            continue
        tier = tier_of(sku.category.usage_type, sku.description)
        priced = unit_price(sku)
        if tier is None or priced is None:
            continue
        for region in sorted(wanted & set(sku.service_regions)):
            p = SkuPrice(generation, tier, region, priced[0], sku.sku_id, sku.description, priced[1], service)
            key = (region, generation, tier)
            # Two SKUs for one price: keep the newest, then the lowest id, so a refresh is repeatable.
            if key not in found or (p.effective_time, found[key].sku_id) > (found[key].effective_time, p.sku_id):
                found[key] = p
    return sorted(found.values(), key=lambda p: (p.region, p.generation, p.tier))


def _quiet_import() -> None:
    """Import the client library without its Python-version FutureWarning (the CLI says one line)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, message="You are using a Python version")
        import google.api_core.exceptions  # noqa: F401
        import google.cloud.billing_v1  # noqa: F401


def fetch(client: Any, regions: Iterable[str]) -> list[SkuPrice]:
    """List the TPU services' SKUs through the client library and parse them."""
    _quiet_import()
    from google.api_core import exceptions
    from google.cloud.billing_v1 import ListSkusRequest

    regions = list(regions)
    try:
        services = {s.display_name: s.name for s in client.list_services()}
        missing = [name for name in SERVICES if name not in services]
        if missing:
            raise RefreshError(f"the Cloud Billing Catalog lists no service named {missing[0]!r}")
        prices: list[SkuPrice] = []
        for name in SERVICES:
            skus = client.list_skus(request=ListSkusRequest(parent=services[name], currency_code="USD"))
            prices += parse_skus(skus, regions, services[name])
    except exceptions.GoogleAPICallError as err:
        raise RefreshError(f"Cloud Billing Catalog API call failed: {err.message or err}") from None
    return sorted(prices, key=lambda p: (p.region, p.generation, p.tier))


def default_client() -> Any:
    """CloudCatalogClient with Application Default Credentials, or a RefreshError naming them."""
    _quiet_import()
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud import billing_v1

    try:
        return billing_v1.CloudCatalogClient()
    except DefaultCredentialsError:
        raise RefreshError(CREDENTIALS_HELP) from None


def build_snapshot(prices: list[SkuPrice], regions: Iterable[str], refreshed: dt.date) -> dict[str, Any]:
    """The prices.yaml document: every region, generation and tier, priced or `unknown` with why.
    Generations the catalog does not price per chip keep the current snapshot's entries."""
    by_key = {(p.region, p.generation, p.tier): p for p in prices}
    current = pricebook.snapshot()["regions"]
    doc_regions: dict[str, Any] = {}
    for region in sorted(set(regions)):
        gens: dict[str, Any] = {}
        for gen in catalog.GENERATIONS:
            if gen not in PER_CHIP_TOKENS:
                kept = current.get(region, {}).get(gen)
                why = f"{SOURCE} does not price {gen} per chip-hour; not in the previous snapshot either"
                gens[gen] = kept or {t: {"unknown": why} for t in price_tiers()}
                continue
            tiers: dict[str, Any] = {}
            for tier in (*price_tiers(), *pricebook.COMMITMENTS):
                p = by_key.get((region, gen, tier))
                tiers[tier] = (
                    p.entry(refreshed)
                    if p
                    else {"unknown": f"no {tier} SKU for {gen} in {region} ({SOURCE}, {refreshed.isoformat()})"}
                )
            gens[gen] = tiers
        doc_regions[region] = gens
    return {
        "snapshot": {"source": SOURCE, "date": refreshed.isoformat()},
        "hours_per_month": pricebook.hours_per_month(),
        "regions": doc_regions,
    }


HEADER = """# TPU prices per chip-hour, USD: a dated snapshot written by `tpuray prices refresh`
# from the Cloud Billing Catalog API. See docs/cost.md. Each price records its SKU id,
# description, region, effective time and refresh date; `unknown` says why there is none.
"""


def write_snapshot(doc: dict[str, Any], path: Path) -> None:
    path.write_text(HEADER + yaml.safe_dump(doc, sort_keys=False, width=120))
