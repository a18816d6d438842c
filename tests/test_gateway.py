"""The Serve Gateway: rendered from stack config, validated against the Gateway API CRD schemas
(tpuray/data/schemas/gateway-api, standard channel v1.2.1) and GKE's policy CRDs
(tpuray/data/schemas/gke-gateway); see each folder's PROVENANCE.md."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import pytest
from conftest import mocked

from tpuray.checks.schemas import SCHEMA_DIR, schema_errors
from tpuray.config import ConfigError, read_stack_file, resolve_stack_file
from tpuray.config.checks import parse_stack_config
from tpuray.preview.render import manifests


def objects(stack: str, kind: str) -> list[dict[str, Any]]:
    return [m for m in manifests(mocked(stack)) if m["kind"] == kind]


def test_prod_gateway_route_and_health_check_conform_to_their_crd_schemas() -> None:
    rendered = objects("prod", "Gateway") + objects("prod", "HTTPRoute") + objects("prod", "HealthCheckPolicy")
    assert [m["kind"] for m in rendered] == ["Gateway", "HTTPRoute", "HealthCheckPolicy"]
    assert [line for m in rendered for line in schema_errors(m)] == []


def test_prod_gateway_is_an_internal_https_load_balancer_with_a_certificate_manager_certificate() -> None:
    (gateway,) = objects("prod", "Gateway")
    assert gateway["spec"]["gatewayClassName"] == "gke-l7-rilb"
    assert gateway["spec"]["listeners"] == [
        {
            "name": "https",
            "protocol": "HTTPS",
            "port": 443,
            "hostname": "serve.ml.acme.internal",
            "tls": {"mode": "Terminate", "options": {"networking.gke.io/cert-manager-certs": "tpuray-prod-serve"}},
            "allowedRoutes": {"namespaces": {"from": "Same"}},
        }
    ]


def test_the_route_sends_everything_to_the_rayservice_serve_service_on_port_8000() -> None:
    (route,) = objects("prod", "HTTPRoute")
    assert route["spec"]["parentRefs"] == [{"name": "tpuray-prod-serve-gateway", "sectionName": "https"}]
    assert route["spec"]["rules"][0]["backendRefs"] == [{"name": "tpuray-prod-serve-serve-svc", "port": 8000}]


def test_the_load_balancer_health_checks_serves_own_health_endpoint() -> None:
    (policy,) = objects("prod", "HealthCheckPolicy")
    assert policy["spec"]["default"]["config"]["httpHealthCheck"] == {
        "portSpecification": "USE_SERVING_PORT",
        "requestPath": "/-/healthz",
    }


def test_a_misspelled_listener_field_is_a_schema_failure_naming_it() -> None:
    gateway = copy.deepcopy(objects("prod", "Gateway")[0])
    gateway["spec"]["listeners"][0]["hostName"] = gateway["spec"]["listeners"][0].pop("hostname")
    (error,) = schema_errors(gateway)
    assert "spec.listeners.0" in error and "'hostName' was unexpected" in error


def test_a_wrong_tls_mode_is_a_schema_failure() -> None:
    gateway = copy.deepcopy(objects("prod", "Gateway")[0])
    gateway["spec"]["listeners"][0]["tls"]["mode"] = "Reencrypt"
    (error,) = schema_errors(gateway)
    assert "spec.listeners.0.tls.mode" in error and "'Reencrypt' is not one of" in error


@pytest.mark.parametrize("folder", ["gateway-api", "gke-gateway"])
def test_schema_files_match_their_recorded_provenance(folder: str) -> None:
    path = SCHEMA_DIR / folder
    recorded = {}
    for line in (path / "PROVENANCE.md").read_text().splitlines():
        parts = line.split()
        if len(parts) == 2 and len(parts[0]) == 64:
            recorded[parts[1]] = parts[0]
    actual = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.glob("*.yaml"))}
    assert recorded == actual and len(actual) == 2


def _prod_with_gateway(**changes: Any) -> dict[str, Any]:
    raw = read_stack_file(resolve_stack_file("prod")[1])
    gateway = raw["workloads"]["serve"]["gateway"]
    for key, value in changes.items():
        if value is None:
            gateway.pop(key, None)
        else:
            gateway[key] = value
    return raw


def test_an_external_gateway_renders_iap_and_admits_only_google_front_ends(tmp_path: Path) -> None:
    from infra.components.network import gateway_objects, object_policies

    raw = _prod_with_gateway(
        className="gke-l7-global-external-managed",
        proxyOnlySubnetCidr=None,
        iap={"clientId": "123.apps.googleusercontent.com", "oauthSecretName": "iap-oauth"},
        tls={"secretName": "serve-tls"},
    )
    cfg = parse_stack_config(raw, "prod")
    rendered = gateway_objects(cfg, "tpuray-prod-serve")
    assert [m["kind"] for m in rendered] == ["Gateway", "HTTPRoute", "HealthCheckPolicy", "GCPBackendPolicy"]
    assert rendered[0]["spec"]["listeners"][0]["tls"]["certificateRefs"] == [
        {"kind": "Secret", "group": "", "name": "serve-tls"}
    ]
    assert [line for m in rendered for line in schema_errors(m)] == []
    assert rendered[3]["spec"]["default"]["iap"]["oauth2ClientSecret"] == {"name": "iap-oauth"}
    serve_policy = object_policies(cfg, "RayService", "tpuray-prod-serve")[-1]
    assert serve_policy["spec"]["ingress"][0]["from"] == [
        {"ipBlock": {"cidr": "35.191.0.0/16"}},
        {"ipBlock": {"cidr": "130.211.0.0/22"}},
    ]


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        (
            {"proxyOnlySubnetCidr": None},
            "tpuray:workloads.serve.gateway.proxyOnlySubnetCidr: missing; gke-l7-rilb proxies connect from the "
            "region's proxy-only subnet, and the Serve NetworkPolicy admits only that range",
        ),
        (
            {"tls": {"certificateManager": ["a"], "secretName": "b"}},
            "tpuray:workloads.serve.gateway.tls: set exactly one of certificateManager (Certificate Manager "
            "certificate names) or secretName (a kubernetes.io/tls Secret in the Ray namespace)",
        ),
        (
            {"className": "gke-l7-global-external-managed"},
            "tpuray:workloads.serve.gateway.iap: missing; an external Gateway in front of Ray Serve must sit "
            "behind Identity-Aware Proxy (clientId, oauthSecretName)",
        ),
        (
            {"proxyOnlySubnetCidr": "10.129.0.0/33"},
            "tpuray:workloads.serve.gateway.proxyOnlySubnetCidr: '10.129.0.0/33' is not a CIDR block "
            "('10.129.0.0/33' does not appear to be an IPv4 or IPv6 network); e.g. 10.128.0.0/16",
        ),
        (
            {"iap": {"clientId": "x", "oauthSecretName": "y"}},
            "tpuray:workloads.serve.gateway.iap: Identity-Aware Proxy is for gke-l7-global-external-managed; "
            "remove it or change className",
        ),
    ],
)
def test_gateway_config_mistakes_are_one_clear_line(changes: dict[str, Any], line: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_stack_config(_prod_with_gateway(**changes), "prod")
    assert err.value.lines == [line]
