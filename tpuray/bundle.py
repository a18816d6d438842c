"""The app bundle: `ray_apps/` as the working_dir zip Ray's runtime_env downloads and unpacks.

Layout. Ray unpacks a remote (gs://, https://) working_dir zip by stripping its single
top-level directory (`download_and_unpack_package` calls `unzip_package(...,
remove_top_level_directory=True)` in ray/_private/runtime_env/packaging.py of the pinned
Ray 2.60, and `get_top_level_dir_from_compressed_package` decides what is stripped). So
the bundle holds one wrapper directory, `tpuray-apps/`, with the package inside it:

    tpuray-apps/ray_apps/__init__.py
    tpuray-apps/ray_apps/...
    tpuray-apps/ray_apps/bundle.json      <- {"sources_sha256": ...}, what the job reports

After Ray strips `tpuray-apps/`, the job's working directory holds `ray_apps/` and
`python -m ray_apps.train` imports it. A zip whose single top-level entry is `ray_apps/`
would lose that directory instead (`WRONG_LAYOUT_ROOT`, kept for the regression test).

Reproducible. Entries are sorted, stored (no compression: the bytes do not depend on the
zlib build), with a fixed 1980-01-01 timestamp and fixed permissions. Same sources, same
bytes, same name: `tpuray-apps-<sha256(zip)[:16]>.zip`.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tpuray.shared import REPO_ROOT

PACKAGE = "ray_apps"
WRAPPER = "tpuray-apps"  # the single top-level directory Ray strips
WRONG_LAYOUT_ROOT = ""  # no wrapper: ray_apps/ itself is the top-level directory Ray strips
MANIFEST = "bundle.json"  # inside ray_apps/: the sources digest the running job reports
NAME_PREFIX = "tpuray-apps-"
HASH_CHARS = 16
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest timestamp a zip can hold
_SKIP_DIRS = {"__pycache__"}
_SKIP_SUFFIXES = {".pyc", ".pyo"}


class BundleError(ValueError):
    """The bundle location or sources are unusable."""


@dataclass(frozen=True)
class Bundle:
    data: bytes
    sha256: str
    sources_sha256: str
    files: tuple[str, ...]  # paths inside the zip

    @property
    def name(self) -> str:
        return f"{NAME_PREFIX}{self.sha256[:HASH_CHARS]}.zip"

    def uri(self, location: str) -> str:
        """gs://bucket/prefix/tpuray-apps-<hash>.zip for a bundle location gs://bucket/prefix."""
        return f"{location.rstrip('/')}/{self.name}"

    def write(self, out_dir: Path) -> Path:
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / self.name
        path.write_bytes(self.data)
        return path


def source_files(package_dir: Path) -> list[Path]:
    """Every file of the package, sorted by relative path; no bytecode or caches."""
    if not (package_dir / "__init__.py").is_file():
        raise BundleError(f"{package_dir} is not a Python package (no __init__.py)")
    found = [
        p
        for p in package_dir.rglob("*")
        if p.is_file()
        and p.suffix not in _SKIP_SUFFIXES
        and not _SKIP_DIRS.intersection(p.relative_to(package_dir).parts)
        and p.name != MANIFEST
    ]
    return sorted(found, key=lambda p: p.relative_to(package_dir).as_posix())


def sources_digest(package_dir: Path) -> str:
    digest = hashlib.sha256()
    for path in source_files(package_dir):
        digest.update(path.relative_to(package_dir).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o100644 << 16  # a regular file, rw-r--r--
    info.create_system = 3  # Unix, whatever machine builds it
    return info


def build(package_dir: Path | None = None, wrapper: str = WRAPPER) -> Bundle:
    """Build the bundle in memory. `wrapper=""` gives the wrong layout (tests only)."""
    package_dir = package_dir or REPO_ROOT / PACKAGE
    root = f"{wrapper}/{PACKAGE}" if wrapper else PACKAGE
    sources = sources_digest(package_dir)
    members = [(f"{root}/{p.relative_to(package_dir).as_posix()}", p.read_bytes()) for p in source_files(package_dir)]
    members.append((f"{root}/{MANIFEST}", json.dumps({"sources_sha256": sources}, sort_keys=True).encode() + b"\n"))
    members.sort()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in members:
            archive.writestr(_entry(name), content)
    data = buffer.getvalue()
    return Bundle(
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
        sources_sha256=sources,
        files=tuple(name for name, _ in members),
    )


@lru_cache(maxsize=4)
def _cached(package_dir: Path, stamp: tuple[tuple[str, int, int], ...]) -> Bundle:
    return build(package_dir)


def current(package_dir: Path | None = None) -> Bundle:
    """The bundle of the sources as they are now (rebuilt when a file changes)."""
    package_dir = package_dir or REPO_ROOT / PACKAGE
    stamp = tuple((p.as_posix(), p.stat().st_mtime_ns, p.stat().st_size) for p in source_files(package_dir))
    return _cached(package_dir, stamp)


def split_gs(uri: str) -> tuple[str, str]:
    """gs://bucket/some/key -> ("bucket", "some/key")."""
    if not uri.startswith("gs://") or len(uri) <= len("gs://"):
        raise BundleError(f"{uri!r} is not a gs://BUCKET/... URI")
    bucket, _, key = uri[len("gs://") :].partition("/")
    return bucket, key
