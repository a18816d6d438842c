"""Label keys shared by the rendered KubeRay objects, the emulator and the apps' selectors."""

# Ray node labels on TPU worker groups (workerGroupSpecs[].labels).
MARKET_TYPE = "ray.io/market-type"  # Ray's own key: spot | on-demand
CAPACITY_TIER = "tpuray.dev/capacity-tier"  # spot | reservation | on-demand | flex-start
SLICE_POOL = "tpuray.dev/slice-pool"
GENERATION = "tpuray.dev/generation"  # v4 | v5e | v5p | v6e | tpu7x
# The group's shape as Ray names it (v6e-16): the one label of a group that autoscaler v2 knows
# before a node exists and that tells two shapes of one generation apart (Ray refuses custom
# labels under ray.io/, so Ray's own ray.io/tpu-pod-type, set on a running host, cannot be it).
TPU_POD_TYPE = "tpuray.dev/tpu-pod-type"

# Ray's own node labels on TPU hosts (Ray sets them; ray_apps/slices.py repeats them, because
# ray_apps must not import tpuray; tests/test_labels.py holds the two together).
RAY_TPU_SLICE_NAME = "ray.io/tpu-slice-name"
RAY_TPU_WORKER_ID = "ray.io/tpu-worker-id"
RAY_TPU_TOPOLOGY = "ray.io/tpu-topology"
RAY_TPU_POD_TYPE = "ray.io/tpu-pod-type"
RAY_ACCELERATOR_TYPE = "ray.io/accelerator-type"
# KubeRay's label naming a pod's RayCluster (what a RayJob's clusterSelector matches).
RAY_CLUSTER = "ray.io/cluster"
# KubeRay's other pod labels (ray-operator v1.5.0 utils/constant.go): the worker group, head or
# worker, and (RayMultiHostIndexing) a multi-host replica's index, unique name and host index.
RAY_GROUP = "ray.io/group"
RAY_NODE_TYPE = "ray.io/node-type"
RAY_REPLICA_INDEX = "ray.io/worker-group-replica-index"
RAY_REPLICA_NAME = "ray.io/worker-group-replica-name"
RAY_HOST_INDEX = "ray.io/replica-host-index"
# The GKE TPU webhook's replica label, `<group>-<replica index>` (ai-on-gke/kuberay-tpu-webhook),
# which Ray's KubeRay autoscaler provider groups a multi-host replica's pods by.
TPU_WEBHOOK_REPLICA = "replicaIndex"
# KubeRay annotation: how long a RayCluster may stay initializing.
RAY_INITIALIZING_TIMEOUT = "ray.io/initializing-timeout"

# Kubernetes and GKE node labels: a node's GKE node pool (one per multi-host TPU slice), its
# machine type and name (well-known labels).
GKE_NODEPOOL = "cloud.google.com/gke-nodepool"
NODE_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
NODE_HOSTNAME = "kubernetes.io/hostname"
# Joint-substrate bookkeeping on emulated nodes (tpuray/local/substrate/nodes.py), never on GKE.
EMULATED_TIER = "tpuray.dev/emulated-tier"
EMULATED_RESERVATION = "tpuray.dev/emulated-reservation"

# Kubernetes node selectors.
GKE_TPU_ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
GKE_TPU_TOPOLOGY = "cloud.google.com/gke-tpu-topology"
COMPUTE_CLASS = "cloud.google.com/compute-class"
# GKE dynamic slicing / subslicing pod annotation: the slice a pod gets, when it differs from the pool's.
GKE_TPU_SLICE_TOPOLOGY = "cloud.google.com/gke-tpu-slice-topology"
# The system (CPU) node pool's node label, what Ray heads select.
SYSTEM_POOL = "tpuray.dev/pool"
TPU_RESOURCE = "google.com/tpu"
# Node labels GKE sets per capacity tier (tpuray/capacity.py). No worker group selects them (GKE
# picks a replica's tier from the ComputeClass, docs/capacity.md); Spot nodes also carry
# gke-spot=true as a NoSchedule taint, which TPU worker pods tolerate.
GKE_SPOT = "cloud.google.com/gke-spot"
GKE_FLEX_START = "cloud.google.com/gke-flex-start"
# The NoSchedule taint of nodes GKE creates for a ProvisioningRequest (queued provisioning); pods
# admitted through one tolerate it (GKE's Ray TPU DWS sample, kubernetes-engine-samples
# tpu/dws/rayjob-tpu-v6e-dws.yaml; tpuray/desired/queues.py puts it on the pool's flavor).
GKE_QUEUED = "cloud.google.com/gke-queued"
# Compute Engine reservation affinity key of a node pool that consumes a specific reservation.
RESERVATION_AFFINITY_KEY = "compute.googleapis.com/reservation-name"

RAY_KINDS = ("RayCluster", "RayJob", "RayService")


# Where each KubeRay kind holds its RayCluster spec, under `spec` (None: `spec` itself).
RAY_CLUSTER_SPEC_KEY = {"RayCluster": None, "RayJob": "rayClusterSpec", "RayService": "rayClusterConfig"}


def ray_cluster_spec_at(manifest: dict) -> tuple[str, object] | None:
    """(path, value) of the RayCluster spec inside a KubeRay object, e.g. ("spec.rayClusterSpec",
    {...}); the value is whatever is there (None when missing). None for other kinds."""
    kind = manifest.get("kind")
    if kind not in RAY_CLUSTER_SPEC_KEY:
        return None
    spec = manifest.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    key = RAY_CLUSTER_SPEC_KEY[kind]
    return ("spec", spec) if key is None else (f"spec.{key}", spec.get(key))


def ray_cluster_spec(manifest: dict) -> dict:
    """The RayCluster spec inside any KubeRay object ({} when it has none)."""
    found = ray_cluster_spec_at(manifest)
    if found is None:
        spec = manifest.get("spec")
        return spec if isinstance(spec, dict) else {}
    return found[1] if isinstance(found[1], dict) else {}


# Kueue (tpuray/desired/queues.py): the LocalQueue a workload waits in and its WorkloadPriorityClass
# (sigs.k8s.io/kueue pkg/controller/constants: QueueLabel, WorkloadPriorityClassLabel).
KUEUE_QUEUE_NAME = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"

# Google Cloud resource labels for cost allocation and the stack's budget filter (lowercase
# keys without '/' or '.': GCP label rules). On the cluster and on every node pool.
COST_STACK = "tpuray-stack"
COST_POOL = "tpuray-pool"
COST_TIER = "tpuray-tier"  # spot | reservation | on-demand | flex-start | system

# The Kubernetes recommended label (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/)
# tpuray puts on every object it renders (infra/components/workloads.py, capacity_chain.py).
# `tpuray check` reads it as "rendered by tpuray": such an object is held to this project's
# conventions as on a stack; any other is foreign (tpuray.policies.evaluate).
MANAGED_BY = "app.kubernetes.io/managed-by"
RENDERED_BY_TPURAY = {MANAGED_BY: "tpuray"}

# Pod template labels tpuray sets on every Ray pod: what NetworkPolicies select on. KubeRay's
# own ray.io/cluster value is generated for RayJob and RayService clusters, so it cannot be named.
RAY_OBJECT = "tpuray.dev/ray-object"  # the RayJob / RayService / RayCluster the pod belongs to
RAY_NODE = "tpuray.dev/ray-node"  # head | worker | submitter
# On the RayJob submitter pod instead of RAY_OBJECT: the one pod outside the object that its
# head's admin NetworkPolicy admits (infra/components/network.py).
SUBMITTER_OF = "tpuray.dev/submitter-of"
# Emulator bookkeeping on its raylets (head | tpu-host), never on GKE.
EMULATOR_ROLE = "tpuray.dev/role"
# Pod template annotation: the pinned rayproject/ray -tpu base a built image is FROM (the
# image's OCI label org.opencontainers.image.base.name, repeated where policies can read it).
BASE_IMAGE = "tpuray.dev/base-image"
# Pod template annotation: the image of this project's (ray-tpu | serve-llm) that a preview shows
# the -tpu base in place of, until its digest is known; `pulumi up` refuses to deploy without it
# (infra/components/workloads.py), and policies read it (tpuray/policies/rules_llm.py).
IMAGE_PENDING = "tpuray.dev/image-pending"
