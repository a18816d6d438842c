"""The control plane's DNS endpoint, chosen per environment (tpuray:cluster.dnsEndpoint).

Before (issue 36, item 7): every stack rendered `dnsEndpointConfig.allowExternalTraffic: true`
(reachable from the internet, gated by IAM only) while prod's stack said its control plane was
"reachable from the VPC only". Now each stack states its choice: dev and staging keep the
IAM-authorised DNS endpoint GitHub-hosted runners deploy through; prod turns it off, deploys
through the private IP endpoint from a runner inside its VPC, and `tpuray preview` shows which.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.conftest import REPO, mocked
from tests.stack_edits import errors
from tpuray.commands.preview import cluster_security_summary

CLUSTER = "gcp:container/cluster:Cluster"
CHOSEN = {"dev": "public-iam", "staging": "public-iam", "prod": "off"}


def _cluster(stack: str) -> dict[str, Any]:
    (cluster,) = [r.inputs for r in mocked(stack).of_type(CLUSTER)]
    return cluster


def _kubeconfig(stack: str) -> dict[str, Any]:
    (provider,) = [r.inputs for r in mocked(stack).resources if r.type == "pulumi:providers:kubernetes"]
    return yaml.safe_load(provider["kubeconfig"])


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_each_stack_file_states_its_dns_endpoint(stack: str) -> None:
    raw = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    assert raw["config"]["tpuray:cluster"]["dnsEndpoint"] == CHOSEN[stack]


def test_prod_takes_no_user_traffic_over_the_dns_endpoint_and_dev_does() -> None:
    assert _cluster("prod")["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": False}}
    assert _cluster("dev")["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": True}}


def test_prod_deploys_through_the_private_ip_endpoint_with_the_clusters_ca() -> None:
    (cluster,) = _kubeconfig("prod")["clusters"]
    assert cluster["cluster"] == {"server": "https://172.16.0.2", "certificate-authority-data": "bW9jay1jYQ=="}
    (user,) = _kubeconfig("prod")["users"]
    assert user["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"


def test_dev_deploys_through_the_dns_endpoint() -> None:
    (cluster,) = _kubeconfig("dev")["clusters"]
    assert cluster["cluster"] == {"server": "https://gke-tpuray-dev-mock.us-east5.gke.goog"}


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_the_preview_cluster_line_shows_the_dns_endpoint(stack: str) -> None:
    assert cluster_security_summary(_cluster(stack)).startswith(f"dnsEndpoint={CHOSEN[stack]} ")


def test_a_bare_off_which_yaml_reads_as_false_is_refused_with_the_quoting_hint() -> None:
    assert errors("prod", lambda c: c["cluster"].update(dnsEndpoint=False)) == [
        'tpuray:cluster.dnsEndpoint: false is invalid; a bare off reads as false in YAML: write "off" (quoted)'
    ]


def test_an_unknown_dns_endpoint_mode_is_refused_naming_the_two() -> None:
    assert errors("dev", lambda c: c["cluster"].update(dnsEndpoint="vpc-sc")) == [
        "tpuray:cluster.dnsEndpoint: 'vpc-sc' is invalid; input should be 'public-iam' or 'off'"
    ]


def test_a_stack_without_a_dns_endpoint_deploys_from_a_runner_inside_its_vpc() -> None:
    jobs = yaml.safe_load((REPO / ".github" / "workflows" / "deploy.yml").read_text())["jobs"]
    runners = {stack: jobs[stack]["with"].get("runs-on") for stack in CHOSEN}
    assert runners == {"dev": None, "staging": None, "prod": '["self-hosted", "linux", "x64", "tpuray-prod"]'}
    pulumi = yaml.safe_load((REPO / ".github" / "workflows" / "pulumi.yml").read_text())
    assert pulumi["jobs"]["pulumi"]["runs-on"] == "${{ fromJSON(inputs.runs-on) }}"
    assert pulumi.get("on", pulumi.get(True))["workflow_call"]["inputs"]["runs-on"]["default"] == '"ubuntu-latest"'
