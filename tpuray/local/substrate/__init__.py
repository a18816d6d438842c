"""The joint local substrate's stand-ins for what GKE runs around the real API server and the
real KubeRay operator (docs/testing.md, "The joint substrate"): emulated GKE TPU nodes per slice
pool and capacity tier (nodes.py), a scheduler step that binds whole slices (scheduler.py), the
GKE TPU webhook's mutation (tpu_webhook.py) and a pod runner (pod_runner.py).

Everything here talks to the API server over HTTPS on 127.0.0.1 through `kube.Kube`.
"""
