"""The Ray Data pipeline: Parquet/JSONL files -> engineered, normalised features -> batches.

Stages:
1. write_synthetic (only when asked): the deterministic data set of ray_apps.features,
   written as several Parquet or JSONL files under a URI (gs://bucket/path on GKE, a local
   directory in tests). Written with pyarrow, not Ray, so it needs no cluster.
2. read_raw: ray.data.read_parquet / read_json(lines=True).
3. fit_stats: one distributed pass (Ray Data Mean/Std aggregations) over the engineered
   features, giving the normalisation the model and Serve both use.
4. prepare: map_batches(features.to_model_batch) -> {"x": float32 [B, F], "y": float32 [B]}.
5. iterate: Dataset/DataIterator.iter_jax_batches (global jax.Array batches sharded over
   the 'data' mesh) or, with numpy=True, iter_batches for comparison.

CLI:
    python -m ray_apps.data --data-uri URI [--generate-rows N] [--format parquet|jsonl]
                            [--numpy] [--batch-size B] [--seed S] [--files K]
prints one line per stage and a final 'TPURAY_RESULT {json}' line.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ray_apps import code_identity, features
from ray_apps.contracts import RESULT_PREFIX
from ray_apps.runtime import custom_filesystem, ensure_ray, filesystem

if TYPE_CHECKING:
    import ray.data

Format = Literal["parquet", "jsonl"]
FORMATS: tuple[str, ...] = ("parquet", "jsonl")
FOOTER_READERS_ENV = "RAY_DATA_PARQUET_FOOTER_NUM_ACTORS"
FOOTER_READERS_MAX = 32  # Ray Data 2.60's default pool size
FOOTER_BATCH_FILES = 10  # files per footer-reading call (RAY_DATA_PARQUET_FOOTER_BATCH_SIZE's default)
CACHE_EXPANSION = 8  # in-memory bytes per stored byte assumed for compressed Parquet/JSONL
CACHE_SHARE = 0.5  # the share of the cluster's object store a cached data set may take


def write_synthetic(uri: str, rows: int, fmt: Format = "parquet", seed: int = 0, files: int = 4) -> list[str]:
    """Write `rows` rows of the synthetic data set as `files` files under `uri`."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    if rows <= 0 or files <= 0:
        raise ValueError("rows and files must be > 0")
    fs, root = filesystem(uri)
    fs.create_dir(root, recursive=True)
    data = features.generate_rows(rows, seed=seed)
    written: list[str] = []
    for i, idx in enumerate(np.array_split(np.arange(rows), min(files, rows))):
        table = pa.table({k: v[idx] for k, v in data.items()})
        path = f"{root}/part-{i:05d}.{fmt}"
        if fmt == "parquet":
            with fs.open_output_stream(path) as out:
                pq.write_table(table, out)
        else:
            buf = io.StringIO()
            for row in table.to_pylist():
                buf.write(json.dumps(row) + "\n")
            with fs.open_output_stream(path) as out:
                out.write(buf.getvalue().encode())
        written.append(path)
    return written


def list_files(uri: str) -> list[str]:
    """The paths of the files under uri (recursively)."""
    fs, root = filesystem(uri)
    import pyarrow.fs as pafs

    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    return [i.path for i in infos if i.type == pafs.FileType.File]


def detect_format(uri: str) -> Format:
    """The format of the files under uri (by extension), so readers need not be told."""
    names = list_files(uri)
    if any(n.endswith(".parquet") for n in names):
        return "parquet"
    if any(n.endswith((".jsonl", ".json")) for n in names):
        return "jsonl"
    raise FileNotFoundError(f"no .parquet or .jsonl files under {uri}")


def footer_readers(files: int) -> int:
    """Footer-reading actors for listing `files` Parquet files: one per batch of
    FOOTER_BATCH_FILES, at most Ray Data's own default of FOOTER_READERS_MAX."""
    return max(1, min(FOOTER_READERS_MAX, -(-files // FOOTER_BATCH_FILES)))


def read_raw(uri: str, fmt: Format | None = None) -> ray.data.Dataset:
    """Ray Data 2.60 lists Parquet files by reading their footers on a pool of actors of a
    fixed size, 32 by default, whatever the number of files (ray/data/_internal/
    datasource_v2/formats/parquet/footer_file_indexer.py, RAY_DATA_PARQUET_FOOTER_NUM_ACTORS):
    32 Python processes to read the footers of 4 files. The pool is sized to the files
    instead, unless the environment already sets it. The indexer reads the variable when
    read_parquet builds it, in this process."""
    import ray.data

    fmt = fmt or detect_format(uri)
    fs, path = custom_filesystem(uri)
    if fmt == "parquet":
        saved = os.environ.get(FOOTER_READERS_ENV)
        if saved is None:
            os.environ[FOOTER_READERS_ENV] = str(footer_readers(len(list_files(uri))))
        try:
            return ray.data.read_parquet(path, filesystem=fs, file_extensions=["parquet"])
        finally:
            if saved is None:
                os.environ.pop(FOOTER_READERS_ENV, None)
    return ray.data.read_json(path, filesystem=fs, lines=True, file_extensions=["jsonl", "json"])


def _engineer_batch(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return features.engineer(batch)


def fit_stats(raw: ray.data.Dataset) -> features.FeatureStats:
    """Mean/std of every engineered feature and the target, computed by Ray Data."""
    from ray.data.aggregate import Mean, Std

    columns = [*features.FEATURE_COLUMNS, features.TARGET_COLUMN]
    engineered = raw.map_batches(_engineer_batch, batch_format="numpy")
    # ddof=0 matches numpy's np.std, which the unit tests and fit_stats use.
    aggs = [Mean(on=c, alias_name=f"mean:{c}") for c in columns] + [
        Std(on=c, ddof=0, alias_name=f"std:{c}") for c in columns
    ]
    result = engineered.aggregate(*aggs)
    return features.stats_from_moments(
        {c: result[f"mean:{c}"] for c in columns}, {c: result[f"std:{c}"] for c in columns}
    )


def prepare(raw: ray.data.Dataset, stats: features.FeatureStats) -> ray.data.Dataset:
    """Raw rows -> training batches {"x", "y"} (see features.to_model_batch)."""
    return raw.map_batches(features.to_model_batch, fn_kwargs={"stats": stats.to_dict()}, batch_format="numpy")


def input_bytes(uri: str) -> int:
    """Bytes of the files under uri, from the listing (nothing is read)."""
    import pyarrow.fs as pafs

    fs, root = filesystem(uri)
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    return sum(i.size or 0 for i in infos if i.type == pafs.FileType.File)


def fits_in_object_store(uri: str, object_store_bytes: float) -> bool:
    """Whether caching uri's data set in the object store is safe: its files, expanded
    CACHE_EXPANSION times (columnar compression), within CACHE_SHARE of the store."""
    return input_bytes(uri) * CACHE_EXPANSION <= object_store_bytes * CACHE_SHARE


def build_dataset(
    uri: str,
    fmt: Format | None = None,
    stats: features.FeatureStats | None = None,
    cache: bool | None = None,
) -> tuple[ray.data.Dataset, features.FeatureStats]:
    """The training dataset and the stats it is normalised with (fitted unless given).

    A Dataset is lazy: every consumer re-runs its whole pipeline, and Ray Train consumes it
    once per epoch (streaming_split), plus once here for the stats. With `cache` the raw
    rows are read once and the prepared batches computed once, materialized in the object
    store, as Ray Train's data guide recommends for a preprocessed data set that fits there
    (docs.ray.io/en/latest/train/user-guides/data-loading-preprocessing.html, "Caching the
    preprocessed dataset"); every epoch then streams those blocks to the workers through the
    same streaming_split and iter_jax_batches. `cache=None` decides by size against the
    cluster's object store (fits_in_object_store); a larger data set streams from storage
    every epoch."""
    raw = read_raw(uri, fmt)
    if cache is None:
        import ray

        cache = fits_in_object_store(uri, float(ray.cluster_resources().get("object_store_memory", 0)))
    if cache:
        raw = raw.materialize()
    if stats is None:
        stats = fit_stats(raw)
    ds = prepare(raw, stats)
    return (ds.materialize() if cache else ds), stats


def iterate(source: Any, batch_size: int, numpy: bool = False, drop_last: bool = True) -> Iterator[dict[str, Any]]:
    """Batches from a Dataset or a Train DataIterator shard.

    numpy=False: iter_jax_batches, global jax.Array batches sharded over a 1-D 'data' mesh;
    batch_size is per host and must divide by the local device count.
    drop_last=True keeps every step the same shape: one XLA compilation, and every host runs
    the same number of steps per epoch (a short last batch on one host would desynchronise
    the collective in the train step).
    """
    if numpy:
        return iter(source.iter_batches(batch_size=batch_size, batch_format="numpy", drop_last=drop_last))
    return iter(source.iter_jax_batches(batch_size=batch_size, drop_last=drop_last))


@dataclass
class BenchResult:
    path: str
    batches: int
    rows: int
    seconds: float
    rows_per_s: float
    batch_shape: list[int]
    batch_type: str


def bench(batches: Iterable[dict[str, Any]], path: str) -> BenchResult:
    """Consume batches and measure rows/s (the first batch includes pipeline start-up)."""
    start = time.perf_counter()
    n_batches = n_rows = 0
    shape: list[int] = []
    kind = ""
    for batch in batches:
        x = batch["x"]
        # Touch the data so lazy arrays are really materialised before timing stops.
        _ = float(np.asarray(x[:1]).sum()) if n_batches == 0 else None
        n_batches += 1
        n_rows += int(x.shape[0])
        shape, kind = list(x.shape), type(x).__module__ + "." + type(x).__name__
    seconds = time.perf_counter() - start
    return BenchResult(path, n_batches, n_rows, seconds, n_rows / seconds if seconds > 0 else 0.0, shape, kind)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ray_apps.data", description=__doc__.split("\n")[0])
    p.add_argument("--data-uri", required=True, help="gs://bucket/dir or a local directory")
    p.add_argument("--generate-rows", type=int, default=0, help="write this many synthetic rows first")
    p.add_argument("--format", choices=FORMATS, default=None, help="default: parquet when generating, else detected")
    p.add_argument("--numpy", action="store_true", help="iterate with iter_batches (numpy) instead of iter_jax_batches")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--files", type=int, default=4, help="files to write when generating")
    p.add_argument("--address", default=None, help="Ray address (default: RAY_ADDRESS, else a local 127.0.0.1 cluster)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    fmt: Format | None = args.format
    if args.generate_rows:
        fmt = fmt or "parquet"
        paths = write_synthetic(args.data_uri, args.generate_rows, fmt, seed=args.seed, files=args.files)
        print(f"wrote {args.generate_rows} rows in {len(paths)} {fmt} files under {args.data_uri}")
    ensure_ray(args.address)
    ds, stats = build_dataset(args.data_uri, fmt, cache=False)  # one pass: nothing to reuse
    print(f"stats: {json.dumps(stats.to_dict())}")
    result = bench(iterate(ds, args.batch_size, numpy=args.numpy), "numpy" if args.numpy else "jax")
    print(
        f"{result.path}: {result.batches} batches, {result.rows} rows in {result.seconds:.2f}s "
        f"({result.rows_per_s:,.0f} rows/s), batch {result.batch_shape} {result.batch_type}"
    )
    print(
        RESULT_PREFIX
        + json.dumps(
            {
                "data_uri": args.data_uri,
                "format": fmt or detect_format(args.data_uri),
                **asdict(result),
                "code": code_identity(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
