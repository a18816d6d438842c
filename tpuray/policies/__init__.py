"""The tpuray policy rules, importable without starting a policy pack.

policies/__main__.py turns RULES into a pulumi-policy PolicyPack (for `pulumi preview
--policy-pack policies`); `tpuray preview` and `tpuray check` run the very same policies
through the pack's analyzer (tpuray.policies.analyzer). Rules are written once.
"""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy

from tpuray.policies import (
    rules_computeclass,
    rules_crd,
    rules_hardening,
    rules_kuberay,
    rules_llm,
    rules_network,
    rules_podsecurity,
    rules_queues,
    rules_secrets,
    rules_security,
    rules_stack,
    rules_tpu,
    rules_versions,
    rules_workload,
)
from tpuray.policies.core import Rule

PACK_NAME = "tpuray"
PACK_DESCRIPTION = "TPU slice topology, capacity and security rules for Ray on GKE (tpuray)."
# Rules without their own level use this one; every rule sets its own today.
PACK_ENFORCEMENT = EnforcementLevel.MANDATORY

RULES: tuple[Rule, ...] = (
    *rules_tpu.RULES,
    *rules_workload.RULES,
    *rules_llm.RULES,
    *rules_stack.RULES,
    *rules_computeclass.RULES,
    *rules_crd.RULES,
    *rules_kuberay.RULES,
    *rules_security.RULES,
    *rules_secrets.RULES,
    *rules_podsecurity.RULES,
    *rules_hardening.RULES,
    *rules_network.RULES,
    *rules_versions.RULES,
    *rules_queues.RULES,
)
RULES_BY_NAME: dict[str, Rule] = {r.name: r for r in RULES}
assert len(RULES_BY_NAME) == len(RULES), "rule names must be unique"


def pulumi_policies() -> list[ResourceValidationPolicy | StackValidationPolicy]:
    return [r.as_pulumi_policy() for r in RULES]
