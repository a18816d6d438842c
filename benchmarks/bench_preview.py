"""Time `tpuray preview STACK` per stack, as a user runs it: a fresh process each time,
beside a floor measured in the same run.

The floor is a bare mocked Pulumi program in a fresh process: it imports the same SDKs
(pulumi, pulumi_gcp, pulumi_kubernetes) and declares a handful of resources under the mock
engine, one from each SDK module the stacks' programs load (pulumi_gcp container, compute,
serviceaccount, projects, storage, monitoring, billing; pulumi_kubernetes core/v1,
networking/v1, a CustomResource), with no config validation, no strict input checks and no
policy pack. Each pulumi_gcp module costs its whole import (compute alone about a second), so
a floor that skipped one the program needs (Cloud NAT is a compute Router) would charge that
import to tpuray. The ratio preview / floor is
what tpuray itself adds; the target (issue 9) is at most 1.8x for every stack.

Usage: python benchmarks/bench_preview.py [--repeat N]
       python benchmarks/bench_preview.py --floor-program   (the floor itself, one run)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 5.0
TARGET_RATIO = 1.8


def floor_program() -> None:
    """The bare mocked program: same SDKs, a handful of resources, nothing of tpuray."""
    import pulumi
    import pulumi_gcp as gcp
    import pulumi_kubernetes as k8s

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
            return f"{args.name}-id", dict(args.inputs)

        def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
            return {}

    def program() -> None:
        provider = gcp.Provider("gcp", project="p", region="us-central1")
        opts = pulumi.ResourceOptions(provider=provider)
        account = gcp.serviceaccount.Account("sa", account_id="floor-nodes", opts=opts)
        cluster = gcp.container.Cluster(
            "gke", name="floor", location="us-central1", initial_node_count=1, remove_default_node_pool=True, opts=opts
        )
        gcp.container.NodePool(
            "pool",
            cluster=cluster.name,
            location="us-central1",
            node_count=1,
            node_config={"machine_type": "e2-standard-4", "service_account": account.email},
            opts=opts,
        )
        gcp.compute.Router("router", name="floor-router", network="default", region="us-central1", opts=opts)
        gcp.projects.IAMMember("logs", project="p", role="roles/logging.logWriter", member="user:a@b.c", opts=opts)
        gcp.storage.Bucket("bucket", name="floor-bucket", location="US", opts=opts)
        gcp.monitoring.NotificationChannel("channel", type="email", labels={"email_address": "a@b.c"}, opts=opts)
        gcp.billing.Budget(
            "budget", billing_account="000000-000000-000000", amount={"specified_amount": {"units": "1"}}, opts=opts
        )
        kube = k8s.Provider("k8s", kubeconfig="{}")
        kopts = pulumi.ResourceOptions(provider=kube)
        k8s.core.v1.Namespace("ns", metadata={"name": "ray"}, opts=kopts)
        k8s.networking.v1.NetworkPolicy("deny", metadata={"name": "deny"}, spec={"pod_selector": {}}, opts=kopts)
        k8s.apiextensions.CustomResource(
            "job", api_version="ray.io/v1", kind="RayJob", metadata={"name": "job"}, spec={}, opts=kopts
        )

    pulumi.runtime.set_mocks(Mocks(), project="floor", stack="floor", preview=True)
    pulumi.runtime.test(program)()


def time_command(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--floor-program", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor_program:
        floor_program()
        return 0
    stacks = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (REPO / "stacks").glob("Pulumi.*.yaml"))
    floor_cmd = [sys.executable, str(Path(__file__).resolve()), "--floor-program"]
    # Interleaved rounds (floor, then each stack) so that load on a shared machine hits both alike.
    floors: list[float] = []
    times: dict[str, list[float]] = {stack: [] for stack in stacks}
    for _ in range(args.repeat):
        floors.append(time_command(floor_cmd))
        for stack in stacks:
            times[stack].append(time_command([sys.executable, "-m", "tpuray.cli", "preview", stack, "--json"]))
    floor = statistics.median(floors)
    print(f"{'stack':10} {'median s':>9} {'max s':>7} {'floor s':>8} {'ratio':>6}")
    print(f"  (targets: < {TARGET_SECONDS:.0f} s and <= {TARGET_RATIO}x the floor; {args.repeat} runs each)")
    worst = 0.0
    for stack in stacks:
        median = statistics.median(times[stack])
        worst = max(worst, median / floor)
        print(f"{stack:10} {median:9.2f} {max(times[stack]):7.2f} {floor:8.2f} {median / floor:5.2f}x")
    print(f"worst ratio {worst:.2f}x (target <= {TARGET_RATIO}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
