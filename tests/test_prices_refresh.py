"""`tpuray prices refresh`: recorded Cloud Billing Catalog responses, read through the client
library's own message types and, end to end, served over HTTP to the real CloudCatalogClient
(REST transport) on 127.0.0.1. No part of the client is mocked."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from tests.conftest import REPO
from tpuray.cost import billing

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", category=FutureWarning)
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import billing_v1

FIXTURES = REPO / "tests" / "fixtures" / "billing"
COMPUTE = "services/6F81-5844-456A"
TPU = "services/E000-3F24-B8AA"


def _recorded(name: str) -> Any:
    return billing_v1.ListSkusResponse.from_json((FIXTURES / name).read_text()).skus


def _prices(region: str = "us-east5") -> dict[tuple[str, str], tuple[float, str]]:
    return {
        (p.generation, p.tier): (p.price, p.sku_id)
        for p in billing.parse_skus(_recorded("skus-compute-engine.json"), [region])
    }


def test_recorded_compute_engine_skus_give_per_chip_hour_prices_per_generation_and_tier() -> None:
    assert _prices() == {
        ("v5e", "on-demand"): (1.2, "C5E8-1B93-07F4"),
        ("v5e", "spot"): (0.6, "4E07-96AB-D3C2"),
        ("v5p", "on-demand"): (4.2, "B8D1-2C6F-95E0"),
        ("v5p", "spot"): (1.68, "6A3C-E5F1-08B9"),
        ("v6e", "on-demand"): (2.7, "A1C4-07D2-9E31"),
        ("v6e", "spot"): (1.215, "5D20-8F3B-1A6E"),
        ("v6e", "1-year"): (1.89, "7C91-3E4F-B20A"),
        ("v6e", "3-year"): (1.22, "9A63-D1E0-4F58"),
    }


def test_a_preemptible_sku_with_usage_type_on_demand_is_the_spot_price() -> None:
    (sku,) = [s for s in _recorded("skus-compute-engine.json") if s.sku_id == "5D20-8F3B-1A6E"]
    assert sku.category.usage_type == "OnDemand"
    assert billing.tier_of(sku.category.usage_type, sku.description) == "spot"


def test_units_and_nanos_make_the_price_and_the_first_tier_counts() -> None:
    (v5e,) = [s for s in _recorded("skus-compute-engine.json") if s.sku_id == "C5E8-1B93-07F4"]
    assert len(v5e.pricing_info[0].pricing_expression.tiered_rates) == 2
    assert billing.unit_price(v5e) == (1.2, "2026-11-01T08:00:00+00:00")


def test_a_sku_of_another_region_is_not_taken() -> None:
    assert _prices("us-central1")[("v6e", "on-demand")] == (2.7, "2F4B-A8C7-63D1")
    assert ("v5p", "on-demand") not in _prices("us-central1")


def test_the_newest_of_two_skus_for_one_price_wins() -> None:
    # 0B7E-52A9-C6D8 is the same v6e chip-hour at $3.00, effective 2024-10-30: superseded.
    assert _prices()[("v6e", "on-demand")] == (2.7, "A1C4-07D2-9E31")


def test_gpu_reserved_and_per_pod_skus_are_not_chip_hour_prices() -> None:
    ids = {p.sku_id for p in billing.parse_skus(_recorded("skus-compute-engine.json"), ["us-east5"])}
    assert not ids & {"E3F2-6C1A-4B7D", "D2F6-4A0E-7B13"}  # H100 GPU; Reserved TpuV6e
    assert billing.parse_skus(_recorded("skus-cloud-tpu.json"), ["us-central2"]) == []  # Tpu-v4 Pod


# ---------------------------------------------------------------------------- the real client


class _Catalog(BaseHTTPRequestHandler):
    """The v1 REST API's two list calls, answered from the recorded JSON, two SKUs a page."""

    PAGE = 2
    status = 200

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urlparse(self.path)
        query = parse_qs(url.query)
        type(self).requests.append(url.path)  # before answering: the client may be faster than us
        if self.status != 200:
            body: Any = {"error": {"code": self.status, "message": "Permission 'billing.services.list' denied", "status": "PERMISSION_DENIED"}}  # fmt: skip
        elif url.path == "/v1/services":
            body = json.loads((FIXTURES / "services.json").read_text())
        elif url.path in (f"/v1/{COMPUTE}/skus", f"/v1/{TPU}/skus"):
            assert query.get("currencyCode") == ["USD"], query
            name = "skus-compute-engine.json" if COMPUTE in url.path else "skus-cloud-tpu.json"
            skus = json.loads((FIXTURES / name).read_text())["skus"]
            start = int(query.get("pageToken", ["0"])[0])
            end = start + self.PAGE
            body = {"skus": skus[start:end], "nextPageToken": str(end) if end < len(skus) else ""}
        else:
            body, self.status = {"error": {"code": 404, "message": url.path, "status": "NOT_FOUND"}}, 404
        data = json.dumps(body).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def catalog_api() -> Iterator[tuple[Any, type[_Catalog]]]:
    handler = type("Catalog", (_Catalog,), {"requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = billing_v1.CloudCatalogClient(
        credentials=AnonymousCredentials(),
        transport="rest",
        client_options={"api_endpoint": f"http://127.0.0.1:{server.server_address[1]}"},
    )
    yield client, handler
    server.shutdown()
    server.server_close()


def test_refresh_through_the_client_library_pages_through_every_sku(catalog_api: Any) -> None:
    client, handler = catalog_api
    prices = billing.fetch(client, ["us-east5"])
    assert len(prices) == 8
    assert handler.requests.count(f"/v1/{COMPUTE}/skus") == 6  # 12 SKUs, 2 a page
    assert handler.requests.count(f"/v1/{TPU}/skus") == 1


def test_refresh_writes_a_dated_snapshot_with_the_sku_of_every_price(catalog_api: Any, tmp_path: Path) -> None:
    client, _ = catalog_api
    out = tmp_path / "prices.yaml"
    billing.write_snapshot(
        billing.build_snapshot(billing.fetch(client, ["us-east5"]), ["us-east5"], dt.date(2026, 11, 30)), out
    )
    doc = yaml.safe_load(out.read_text())
    assert doc["snapshot"] == {
        "source": "Cloud Billing Catalog API (cloudbilling.googleapis.com/v1)",
        "date": "2026-11-30",
    }
    assert doc["regions"]["us-east5"]["v6e"]["spot"] == {
        "price": 1.215,
        "source": "Cloud Billing Catalog API (cloudbilling.googleapis.com/v1) services/6F81-5844-456A",
        "date": "2026-11-30",
        "sku_id": "5D20-8F3B-1A6E",
        "description": "Preemptible TpuV6e Chip Hour in Columbus",
        "region": "us-east5",
        "effective_time": "2026-11-01T08:00:00+00:00",
        "refreshed": "2026-11-30",
    }
    assert doc["regions"]["us-east5"]["v5p"]["1-year"] == {
        "unknown": "no 1-year SKU for v5p in us-east5 (Cloud Billing Catalog API (cloudbilling.googleapis.com/v1), 2026-11-30)"
    }


def test_refresh_keeps_the_snapshot_figures_of_generations_not_priced_per_chip(catalog_api: Any) -> None:
    client, _ = catalog_api
    doc = billing.build_snapshot(billing.fetch(client, ["us-central2"]), ["us-central2"], dt.date(2026, 11, 30))
    assert doc["regions"]["us-central2"]["v4"]["on-demand"]["price"] == 3.22  # published page, kept
    assert doc["regions"]["us-central2"]["tpu7x"]["spot"] == {
        "unknown": "Cloud Billing Catalog API (cloudbilling.googleapis.com/v1) does not price tpu7x per chip-hour; "
        "not in the previous snapshot either"
    }


def test_an_api_error_is_one_line(catalog_api: Any) -> None:
    client, handler = catalog_api
    handler.status = 403
    with pytest.raises(billing.RefreshError, match=r"^Cloud Billing Catalog API call failed: .*billing.services.list"):
        billing.fetch(client, ["us-east5"])


def test_refresh_without_credentials_fails_with_one_line_naming_them(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG")}
    env.update(HOME=str(tmp_path), NO_GCE_CHECK="true", CLOUDSDK_CONFIG=str(tmp_path / "gcloud"))
    out = subprocess.run(
        [sys.executable, "-m", "tpuray.cli", "prices", "refresh", "--out", str(tmp_path / "p.yaml")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: tpuray prices refresh needs Application Default Credentials for the Cloud Billing Catalog API "
        "(cloudbilling.googleapis.com): run `gcloud auth application-default login` or set "
        "GOOGLE_APPLICATION_CREDENTIALS to a service-account key file"
    ]
    assert not (tmp_path / "p.yaml").exists()


def test_refresh_prices_the_regions_of_the_example_stacks_by_default() -> None:
    from tpuray.commands.prices import stack_regions

    assert stack_regions() == ["us-east5"]
