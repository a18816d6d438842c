"""Label keys shared by the rendered KubeRay objects, the emulator and the apps' selectors."""

# Ray node labels on TPU worker groups (workerGroupSpecs[].labels).
MARKET_TYPE = "ray.io/market-type"  # Ray's own key: spot | on-demand
CAPACITY_TIER = "tpuray.dev/capacity-tier"  # spot | reservation | on-demand | flex-start
SLICE_POOL = "tpuray.dev/slice-pool"
GENERATION = "tpuray.dev/generation"  # v4 | v5e | v5p | v6e | tpu7x

# Kubernetes node selectors.
GKE_TPU_ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
GKE_TPU_TOPOLOGY = "cloud.google.com/gke-tpu-topology"
COMPUTE_CLASS = "cloud.google.com/compute-class"
TPU_RESOURCE = "google.com/tpu"
# Node labels GKE sets per capacity tier (tpuray/capacity.py): a worker group per tier pins its
# pods to that tier's nodes. Spot nodes also carry gke-spot=true as a NoSchedule taint.
GKE_SPOT = "cloud.google.com/gke-spot"
GKE_FLEX_START = "cloud.google.com/gke-flex-start"
GKE_RESERVATION_NAME = "cloud.google.com/reservation-name"
# Compute Engine reservation affinity key of a node pool that consumes a specific reservation.
RESERVATION_AFFINITY_KEY = "compute.googleapis.com/reservation-name"

RAY_KINDS = ("RayJob", "RayService", "RayCluster")


def ray_cluster_spec(manifest: dict) -> dict:
    """The RayCluster spec inside any KubeRay object."""
    spec = manifest.get("spec") or {}
    if manifest.get("kind") == "RayJob":
        return spec.get("rayClusterSpec") or {}
    if manifest.get("kind") == "RayService":
        return spec.get("rayClusterConfig") or {}
    return spec


# Google Cloud resource labels for cost allocation and the stack's budget filter (lowercase
# keys without '/' or '.': GCP label rules). On the cluster and on every node pool.
COST_STACK = "tpuray-stack"
COST_POOL = "tpuray-pool"
COST_TIER = "tpuray-tier"  # spot | reservation | on-demand | flex-start | system

# Pod template labels tpuray sets on every Ray pod: what NetworkPolicies select on. KubeRay's
# own ray.io/cluster value is generated for RayJob and RayService clusters, so it cannot be named.
RAY_OBJECT = "tpuray.dev/ray-object"  # the RayJob / RayService / RayCluster the pod belongs to
RAY_NODE = "tpuray.dev/ray-node"  # head | worker
# Pod template annotation: the pinned rayproject/ray -tpu base a built image is FROM (the
# image's OCI label org.opencontainers.image.base.name, repeated where policies can read it).
BASE_IMAGE = "tpuray.dev/base-image"
