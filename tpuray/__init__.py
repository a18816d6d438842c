"""tpuray: Ray workloads on GKE TPU slices, declared with Pulumi."""
