"""The hardening rules (tpuray/policies/rules_hardening.py) on hand-built resources: the
branches and messages no policy fixture reaches, and which resource each stack finding blames
(its urn). Literal messages; the fixtures' messages are in fixtures/policies/messages.json."""

from __future__ import annotations

from typing import Any

from tpuray.policies import rules_hardening as rules
from tpuray.policies.core import Finding, Resource

CLUSTER = "gcp:container/cluster:Cluster"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
SECRETS = "Kubernetes Secrets (the Ray auth token) are not encrypted with your Cloud KMS key: set tpuray:cluster.secretsKmsKey"


def ray_cluster(name: str, namespace: str, images: list[Any]) -> Resource:
    containers = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    props = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"headGroupSpec": {"template": {"spec": {"containers": containers}}}},
    }
    return Resource("kubernetes:ray.io/v1:RayCluster", name, props, urn=f"urn:{name}")


def network_policy(name: str, spec: dict[str, Any]) -> Resource:
    props = {"kind": "NetworkPolicy", "metadata": {"name": name, "namespace": "ray"}, "spec": spec}
    return Resource(NETWORK_POLICY, name, props, urn=f"urn:{name}")


DENY = network_policy("deny", {"podSelector": {"matchLabels": {}}, "policyTypes": ["Ingress"]})


def test_an_encrypted_state_without_a_key_is_not_encrypted_with_the_users_key() -> None:
    cluster = Resource(CLUSTER, "c", {"name": "main", "databaseEncryption": {"state": "ENCRYPTED"}})
    assert list(rules._secrets_encryption(cluster, {})) == [
        f"Cluster main: databaseEncryption.state is 'ENCRYPTED'; {SECRETS}"
    ]


def test_a_key_with_a_decrypted_state_names_the_state() -> None:
    cluster = Resource(CLUSTER, "c", {"name": "main", "databaseEncryption": {"state": "DECRYPTED", "keyName": "k"}})
    assert list(rules._secrets_encryption(cluster, {})) == [
        f"Cluster main: databaseEncryption.state is 'DECRYPTED'; {SECRETS}"
    ]


def test_a_daily_maintenance_window_is_a_window() -> None:
    cluster = Resource(
        CLUSTER, "c", {"name": "main", "maintenancePolicy": {"dailyMaintenanceWindow": {"startTime": "03:00"}}}
    )
    assert list(rules._maintenance_window(cluster, {})) == []


def test_a_pod_selector_with_empty_match_labels_selects_every_pod_for_a_default_deny() -> None:
    assert rules._is_default_deny(DENY) is True


def test_an_http_listener_is_judged_and_the_next_https_listener_too() -> None:
    spec = {"listeners": [{"protocol": "HTTP"}, {"protocol": "HTTPS", "tls": {}}]}
    gateway = Resource(
        "kubernetes:gateway.networking.k8s.io/v1:Gateway",
        "g",
        {"kind": "Gateway", "metadata": {"name": "serve"}, "spec": spec},
    )
    assert list(rules._serve_gateway(gateway, {})) == [
        "Gateway/serve: spec.listeners[0].protocol is 'HTTP'; Serve requests and their answers would cross the network "
        "in clear text: use HTTPS with a certificate",
        "Gateway/serve: spec.listeners[1].tls names no certificate; set certificateRefs (a kubernetes.io/tls Secret) or "
        "options networking.gke.io/cert-manager-certs (Certificate Manager)",
    ]


def test_binary_authorization_judges_every_image_after_one_without_an_image_and_blames_its_object() -> None:
    cluster = Resource(
        CLUSTER, "gke", {"name": "gke", "binaryAuthorization": {"evaluationMode": "PROJECT_SINGLETON_POLICY_ENFORCE"}}
    )
    policy = Resource(
        "gcp:binaryauthorization/policy:Policy",
        "p",
        {"admissionWhitelistPatterns": [{"namePattern": "r/ray@sha256:aa"}]},
    )
    train = ray_cluster("train", "ray", [None, "r/ray@sha256:bb", "r/ray:2.60.0"])
    where = "RayCluster/train: spec.headGroupSpec.template.spec.containers"
    assert list(rules._binary_authorization([cluster, policy, train], {})) == [
        Finding(
            f"{where}[1].image is 'r/ray@sha256:bb', which the stack's Binary Authorization policy does not allow; the "
            "pods would be refused: add it to tpuray:cluster.binaryAuthorization.allowedImages",
            "urn:train",
        ),
        Finding(
            f"{where}[2].image is 'r/ray:2.60.0', a tag; the cluster enforces Binary Authorization, which admits the "
            "project's images by digest: pin it as <image>@sha256:<digest>",
            "urn:train",
        ),
    ]


def test_pod_security_judges_a_declared_namespace_after_one_the_stack_does_not_declare() -> None:
    labels = {"pod-security.kubernetes.io/enforce": "privileged"}
    namespace = Resource(
        "kubernetes:core/v1:Namespace",
        "ns",
        {"kind": "Namespace", "metadata": {"name": "ray", "labels": labels}},
        urn="urn:ns",
    )
    found = list(
        rules._namespace_pod_security([ray_cluster("a", "other", ["x"]), ray_cluster("b", "ray", ["x"]), namespace], {})
    )
    assert found == [
        Finding(
            "Namespace/ray: metadata.labels['pod-security.kubernetes.io/enforce'] is 'privileged'; the API server admits "
            "any pod, privileged ones included, into the Ray namespace: label it restricted",
            "urn:ns",
        )
    ]


def test_a_namespace_without_default_deny_blames_its_ray_object() -> None:
    assert list(rules._network_policies([ray_cluster("b", "ray", ["x"])], {})) == [
        Finding(
            "RayCluster/b: namespace 'ray' has no default-deny ingress NetworkPolicy; any pod of the cluster reaches the "
            "Ray head's GCS, dashboard and client ports: declare one (podSelector {}, policyTypes [Ingress])",
            "urn:b",
        )
    ]


def test_an_ingress_rule_open_to_everyone_after_a_narrow_one_is_found_and_blames_its_policy() -> None:
    spec = {"podSelector": {"app": "x"}, "ingress": [{"from": [{"podSelector": {}}]}, {"ports": [{"port": 6379}]}]}
    found = list(rules._network_policies([ray_cluster("b", "ray", ["x"]), DENY, network_policy("open", spec)], {}))
    assert found == [
        Finding(
            "NetworkPolicy/open: spec.ingress[1] admits 6379 (GCS) from everywhere; these Ray ports run code for whoever "
            "reaches them: name the pods, namespaces or CIDRs that may connect",
            "urn:open",
        )
    ]
