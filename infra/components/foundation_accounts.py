"""The service accounts a stack's resources run as, which the Terraform foundation creates.

The stack creates no Google service account. terraform/modules/ci-identity creates the GKE
nodes' account (`<cluster>-nodes`) and the Ray pods' Workload Identity accounts (`<cluster>-ray`,
`<cluster>-serve`) and grants the environment's deploy identity what it needs on each account
only: `roles/iam.serviceAccountUser` on the nodes' (the cluster and its node pools run as it),
`roles/iam.serviceAccountAdmin` on a workload account (the stack binds its Kubernetes service
accounts there). A deploy identity with project-wide service-account roles could act as, or set
the IAM policy of, every account of the project (issue 36, item 1). The names follow
`tpuray.checks.gcp_rules.service_account_id`; tests/test_foundation_contract.py checks that the
foundation creates every account a committed stack names.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from tpuray.checks.gcp_rules import service_account_email


@dataclass(frozen=True)
class FoundationAccount:
    """An existing service account, with the two outputs the program reads of an Account."""

    email: pulumi.Output[str]
    name: pulumi.Output[str]  # projects/PROJECT/serviceAccounts/EMAIL, what IAM members name


def existing(project: str, cluster_name: str, suffix: str) -> FoundationAccount:
    """The foundation's `<cluster>-<suffix>` account in `project`."""
    email = service_account_email(project, cluster_name, suffix)
    return FoundationAccount(
        email=pulumi.Output.from_input(email),
        name=pulumi.Output.from_input(f"projects/{project}/serviceAccounts/{email}"),
    )
