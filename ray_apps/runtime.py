"""Connecting the CLIs to Ray: the cluster they run in on GKE, or a loopback-only local one."""

from __future__ import annotations

import os
import sys
from typing import Any

import pyarrow.fs as pafs

from ray_apps.contracts import STORAGE_EMULATOR_ENV


def ensure_ray(address: str | None = None, **local_kwargs: Any) -> None:
    """Connect to a running cluster, or start a private local one on 127.0.0.1.

    On GKE the RayJob entrypoint runs under the job supervisor, which sets RAY_ADDRESS:
    we join that cluster. Without an address we start a local cluster that binds to
    loopback only, without a dashboard, and with RAY_AUTH_MODE set explicitly: Ray 2.60
    would otherwise enable token auth and write ~/.ray/auth_token, which breaks other
    people's later `ray start` on the same machine.
    """
    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        use_loopback_only()
    import ray

    if ray.is_initialized():
        return
    if address:
        ray.init(address=address)
        return
    ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1", **local_kwargs)


def use_loopback_only() -> None:
    """Make a local cluster keep every address on 127.0.0.1 and skip token auth.

    Ray rewrites 127.0.0.1 to the machine's network address unless
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (read when ray is imported, and by every Ray child
    process, hence the environment variable plus the already-imported constant).
    """
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = False  # type: ignore[attr-defined]


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path) for gs://... or a local path.

    On GKE pyarrow resolves gs:// itself (GcsFileSystem with the pod's Workload Identity
    credentials). pyarrow's GcsFileSystem (google-cloud-cpp) does not read
    STORAGE_EMULATOR_HOST, and its default credentials look for a metadata server, which
    hangs where there is none; so when the variable is set, gs:// goes to that endpoint with
    anonymous credentials, as google-cloud-storage's own client does."""
    host = os.environ.get(STORAGE_EMULATOR_ENV)
    if uri.startswith("gs://") and host:
        scheme, _, endpoint = host.rpartition("://")
        fs = pafs.GcsFileSystem(anonymous=True, endpoint_override=endpoint, scheme=scheme or "http")
        return fs, uri[len("gs://") :].rstrip("/")
    if "://" not in uri:
        uri = os.path.abspath(uri)
    return pafs.FileSystem.from_uri(uri)


def custom_filesystem(uri: str) -> tuple[pafs.FileSystem | None, str]:
    """What Ray's readers and RunConfig take: (None, uri) when Ray resolves the URI itself,
    or (filesystem, path without the scheme) when `filesystem` had to build one."""
    if uri.startswith("gs://") and os.environ.get(STORAGE_EMULATOR_ENV):
        return filesystem(uri)
    return None, uri


def join(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *parts])
