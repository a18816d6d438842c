"""The checks a stack and its manifests are held to besides the policy pack: GCP names, ranges,
versions, zones, maintenance windows, consistency across keys (run by tpuray/config/checks.py);
the packaged CRD schemas, their CEL rules, Pod Security, strict mock types, the deploy identity's
permissions and the KubeRay version floors (run by the policies and the preview)."""
