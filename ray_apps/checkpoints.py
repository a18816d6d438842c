"""Finding and fetching checkpoints in storage (gs:// on GKE, a local directory in tests).

Train names its checkpoint directories checkpoint_step_<8 digits> under
<storage_uri>/<run_name>/, so "latest" is the highest step whose files are all there.
Both the Train driver (to reuse the normalisation stats when resuming) and the Serve
checkpoint backend (to load a model given a run directory) use this.
"""

from __future__ import annotations

import json
import re
import tempfile

import pyarrow.fs as pafs

from ray_apps.model import META_FILE, PARAMS_FILE
from ray_apps.runtime import filesystem

CHECKPOINT_DIR_RE = re.compile(r"checkpoint_step_(\d+)$")


def checkpoint_dir_name(step: int) -> str:
    return f"checkpoint_step_{step:08d}"


def _is_complete(fs: pafs.FileSystem, path: str) -> bool:
    # A checkpoint interrupted mid-upload lacks one of its files: never pick it.
    infos = fs.get_file_info([f"{path}/{META_FILE}", f"{path}/{PARAMS_FILE}"])
    return all(i.type == pafs.FileType.File for i in infos)


def uri_of(uri: str, path: str) -> str:
    """`path` (of `uri`'s filesystem) as a URI with `uri`'s scheme."""
    if "://" in path:
        return path
    scheme = uri.split("://", 1)[0] + "://" if "://" in uri else ""
    return scheme + path


def find_latest(uri: str) -> tuple[str, int] | None:
    """(checkpoint uri, step) for a checkpoint directory or a run directory; None if none yet."""
    fs, root = filesystem(uri)
    root = root.rstrip("/")
    if _is_complete(fs, root):
        with fs.open_input_stream(f"{root}/{META_FILE}") as f:
            step = int(json.loads(f.read().decode())["step"])
        return uri_of(uri, root), step
    # Recursive, and checkpoint folders found from their files' paths: on GCS a folder Ray Train
    # uploaded into has no object of its own, and pyarrow's GcsFileSystem lists only objects
    # (gcsfs.cc GetFileInfo(FileSelector) calls ListObjects, not ListObjectsAndPrefixes), so a
    # non-recursive listing of the run folder shows none of its checkpoints
    # (https://github.com/apache/arrow/issues/35993). The GCS emulator answers the same way.
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    folders: dict[int, str] = {}
    for info in infos:
        top, _, rest = info.path[len(root) + 1 :].partition("/")
        m = CHECKPOINT_DIR_RE.search(top)
        if m and rest and info.type == pafs.FileType.File:
            folders[int(m.group(1))] = f"{root}/{top}"
    candidates = list(folders.items())
    for step, path in sorted(candidates, reverse=True):
        if _is_complete(fs, path):
            return uri_of(uri, path), step
    return None


def fetch(uri: str) -> str:
    """A local directory holding the checkpoint at uri (copied from remote storage if needed)."""
    if "://" not in uri or uri.startswith("file://"):
        return uri.removeprefix("file://")
    fs, path = filesystem(uri)
    local = tempfile.mkdtemp(prefix="tpuray-ckpt-")
    pafs.copy_files(path, local, source_filesystem=fs, destination_filesystem=pafs.LocalFileSystem())
    return local
