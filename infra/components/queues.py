"""KueueQueues: the stack's Kueue objects (tpuray/desired/queues.py builds them from tpuray:queues).

Declared as pulumi-kubernetes CustomResources, never inside Helm or a ConfigGroup, so the policy
pack sees them. Team namespaces other than the workloads namespace are declared here with the
same Pod Security labels; the workloads namespace is RayWorkloads', which the LocalQueues wait for.
Kueue itself is a prerequisite of the cluster (docs/capacity.md "Queues").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from tpuray import labels
from tpuray.config import StackConfig
from tpuray.desired import pod_security, queues


class KubeObject(k8s.apiextensions.CustomResource):
    """A custom resource whose fields are not all under `spec` (a WorkloadPriorityClass's `value`):
    the Python CustomResource of pulumi-kubernetes takes `spec` only, so the whole manifest is its
    inputs here, under the same type token (kubernetes:<apiVersion>:<kind>)."""

    def __init__(self, resource_name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        version = pulumi.ResourceOptions(version=k8s._utilities.get_version())
        pulumi.CustomResource.__init__(
            self,
            f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}",
            resource_name,
            dict(manifest),
            pulumi.ResourceOptions.merge(opts, version),
        )


@dataclass(frozen=True)
class KueueQueuesArgs:
    config: StackConfig
    provider: k8s.Provider
    after: list[pulumi.Resource] = field(default_factory=list)  # what creates the workloads namespace


# pragma: no mutate start (the Pulumi resources themselves: the golden files and tests/test_queues.py check them)
class KueueQueues(pulumi.ComponentResource):
    def __init__(self, name: str, args: KueueQueuesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpuray:index:KueueQueues", name, None, opts)
        cfg = args.config
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)
        namespaces: list[pulumi.Resource] = [
            k8s.core.v1.Namespace(
                f"{name}-ns-{ns}",
                metadata={"name": ns, "labels": {**labels.RENDERED_BY_TPURAY, **pod_security.namespace_labels()}},
                opts=k8s_opts,
            )
            for ns in queues.extra_namespaces(cfg)
        ]
        for manifest in queues.objects(cfg):
            meta: dict[str, Any] = manifest["metadata"]
            after = [*args.after, *namespaces] if "namespace" in meta else []
            KubeObject(
                f"{name}-{manifest['kind'].lower()}-{meta.get('namespace', 'cluster')}-{meta['name']}",
                manifest,
                pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=after)),
            )
        self.register_outputs({})


# pragma: no mutate end
