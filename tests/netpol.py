"""Kubernetes NetworkPolicy ingress semantics, evaluated on rendered objects (no cluster needed).

The emulator cannot enforce NetworkPolicies, so the tests that ask "may this pod reach that
port of that pod" evaluate the rendered policies here, by the rules of
https://kubernetes.io/docs/concepts/services-networking/network-policies/:
- a pod is isolated for ingress when some policy with `Ingress` in policyTypes selects it;
  an isolated pod admits a connection when at least one selecting policy has an ingress rule
  whose `from` matches the source and whose `ports` match the port; a pod no policy selects
  admits everything;
- a rule without `from` matches every source, one without `ports` every port (`endPort` ends
  a range); a peer with only podSelector means pods of the policy's namespace, only
  namespaceSelector any pod of the matching namespaces, both: both must match;
- an empty selector matches everything; matchLabels and matchExpressions are ANDed.
Egress is the mirror image (`egress_admits`): a pod is isolated for egress when some policy with
`Egress` in policyTypes selects it; then a connection leaves only when a selecting policy has an
egress rule whose `to` matches the destination (a pod by its labels and namespace, or an address
by ipBlock, `except` excluded) and whose `ports` match port and protocol.
Only what the rendered policies use is modelled: numbered ports (not named ones); TCP and UDP.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

ALL_PORTS = (1, 65535)


@dataclass(frozen=True)
class Pod:
    labels: dict[str, str]
    namespace: str = "ray"
    namespace_labels: dict[str, str] = field(default_factory=dict)
    ip: str = "10.8.0.10"  # a pod address inside the pods range


def matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def _peer_matches(peer: dict[str, Any], source: Pod, namespace: str) -> bool:
    if "ipBlock" in peer:
        block = peer["ipBlock"]
        ip = ipaddress.ip_address(source.ip)
        return ip in ipaddress.ip_network(block["cidr"]) and not any(
            ip in ipaddress.ip_network(c) for c in block.get("except", [])
        )
    pods, namespaces = peer.get("podSelector"), peer.get("namespaceSelector")
    in_namespace = (
        matches(namespaces, {**source.namespace_labels, "kubernetes.io/metadata.name": source.namespace})
        if namespaces is not None
        else source.namespace == namespace
    )
    return in_namespace and (pods is None or matches(pods, source.labels))


def _selecting(policies: list[dict[str, Any]], target: Pod) -> list[dict[str, Any]]:
    return [
        p
        for p in policies
        if "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
        and p["metadata"].get("namespace", target.namespace) == target.namespace
        and matches(p["spec"]["podSelector"], target.labels)
    ]


def admitted_ranges(policies: list[dict[str, Any]], source: Pod, target: Pod) -> list[tuple[int, int]]:
    """The TCP port ranges on `target` that `source` may connect to, merged and sorted."""
    selecting = _selecting(policies, target)
    if not selecting:
        return [ALL_PORTS]
    ranges = []
    for policy in selecting:
        for rule in policy["spec"].get("ingress", []):
            peers = rule.get("from")
            if peers and not any(_peer_matches(p, source, target.namespace) for p in peers):
                continue
            for p in rule.get("ports") or [{"port": ALL_PORTS[0], "endPort": ALL_PORTS[1]}]:
                if p.get("protocol", "TCP") == "TCP":
                    ranges.append((int(p["port"]), int(p.get("endPort", p["port"]))))
    merged: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if merged and a <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def admits(policies: list[dict[str, Any]], source: Pod, target: Pod, first: int, last: int | None = None) -> bool:
    """Whether every port of first..last on `target` admits connections from `source`."""
    last = first if last is None else last
    return any(a <= first and last <= b for a, b in admitted_ranges(policies, source, target))


def _selecting_egress(policies: list[dict[str, Any]], source: Pod) -> list[dict[str, Any]]:
    return [
        p
        for p in policies
        if "Egress" in p["spec"].get("policyTypes", [])
        and p["metadata"].get("namespace", source.namespace) == source.namespace
        and matches(p["spec"]["podSelector"], source.labels)
    ]


def _port_matches(entry: dict[str, Any], port: int, protocol: str) -> bool:
    first = int(entry["port"])
    return entry.get("protocol", "TCP") == protocol and first <= port <= int(entry.get("endPort", first))


def egress_admits(
    policies: list[dict[str, Any]], source: Pod, destination: Pod | str, port: int, protocol: str = "TCP"
) -> bool:
    """Whether `source` may open a connection to `destination` (a pod, or an IP address) on port/protocol."""
    selecting = _selecting_egress(policies, source)
    if not selecting:
        return True
    target = destination if isinstance(destination, Pod) else Pod({}, namespace="", ip=destination)
    for policy in selecting:
        for rule in policy["spec"].get("egress", []):
            peers = rule.get("to")
            # An address is no pod: only ipBlock peers can match it (its namespace is "").
            if peers and not any(_peer_matches(peer, target, source.namespace) for peer in peers):
                continue
            ports = rule.get("ports")
            if not ports or any(_port_matches(p, port, protocol) for p in ports):
                return True
    return False
