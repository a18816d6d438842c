"""Literal expectations for the stacks in stacks/, written from the public facts
(shared/reference/tpu-facts.md section 1: GKE labels, machine types, hosts and chips per
host), never computed by tpuray.catalog. A broken catalog fails the tests that use these.

tests/test_catalog.py keeps the catalog's own table test against the same facts.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    generation: str
    accelerator: str  # cloud.google.com/gke-tpu-accelerator
    topology: str
    machine_type: str
    hosts: int  # VMs per slice = numOfHosts = node count of a slice's node pool
    chips: int  # google.com/tpu per pod = chips per VM
    ray_accelerator_type: str
    pod_type: str  # Ray's TPU pod type: what names a worker group and its TPU-<pod type>-head

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1


V6E_4X4 = Shape("v6e", "tpu-v6e-slice", "4x4", "ct6e-standard-4t", 4, 4, "TPU-V6E", "v6e-16")
V6E_2X2 = Shape("v6e", "tpu-v6e-slice", "2x2", "ct6e-standard-4t", 1, 4, "TPU-V6E", "v6e-4")
V5E_4X4 = Shape("v5e", "tpu-v5-lite-podslice", "4x4", "ct5lp-hightpu-4t", 4, 4, "TPU-V5LITEPOD", "v5litepod-16")
V5E_2X4_ONE_VM = Shape("v5e", "tpu-v5-lite-podslice", "2x4", "ct5lp-hightpu-8t", 1, 8, "TPU-V5LITEPOD", "v5litepod-8")

# stack -> slice pool -> its shape, then its cross-generation fallbacks in order
POOLS: dict[str, dict[str, list[Shape]]] = {
    "dev": {"v6e-dev": [V6E_4X4], "v6e-serve-dev": [V6E_2X2]},
    "staging": {"v6e-train": [V6E_4X4], "v5e-serve": [V5E_2X4_ONE_VM], "v6e-notebook": [V6E_2X2]},
    "prod": {"v6e-train": [V6E_4X4, V5E_4X4], "v5e-serve": [V5E_2X4_ONE_VM]},
}
PROJECTS = {"dev": "acme-ml-dev", "staging": "acme-ml-staging", "prod": "acme-ml-prod"}
# Service accounts: <accountId>@<project>.iam.gserviceaccount.com
NODE_SERVICE_ACCOUNTS = {s: f"tpuray-{s}-nodes@{p}.iam.gserviceaccount.com" for s, p in PROJECTS.items()}
WORKLOAD_SERVICE_ACCOUNTS = {s: f"tpuray-{s}-ray@{p}.iam.gserviceaccount.com" for s, p in PROJECTS.items()}


def shape(stack: str, pool: str) -> Shape:
    return POOLS[stack][pool][0]


def fallbacks(stack: str, pool: str) -> list[Shape]:
    return POOLS[stack][pool][1:]
