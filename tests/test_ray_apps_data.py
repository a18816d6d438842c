"""Data preprocessing and file writing (pure numpy/pyarrow: no Ray cluster)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from ray_apps import data, features


def _raw(n: int = 256) -> dict[str, np.ndarray]:
    return features.generate_rows(n, seed=1)


def test_generate_rows_is_deterministic_for_a_seed() -> None:
    a, b = features.generate_rows(100, seed=3), features.generate_rows(100, seed=3)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["sqft"], features.generate_rows(100, seed=4)["sqft"])


def test_engineer_produces_every_feature_column_and_keeps_the_target() -> None:
    eng = features.engineer(_raw())
    assert set(features.FEATURE_COLUMNS) <= set(eng)
    assert features.TARGET_COLUMN in eng
    np.testing.assert_allclose(eng["log_sqft"], np.log(_raw()["sqft"]))


def test_engineer_rejects_a_batch_missing_a_raw_column() -> None:
    raw = _raw()
    del raw["income_k"]
    with pytest.raises(KeyError, match="income_k"):
        features.engineer(raw)


def test_engineer_rejects_non_positive_sizes() -> None:
    raw = _raw(4)
    raw["sqft"][0] = 0.0
    with pytest.raises(ValueError, match="positive"):
        features.engineer(raw)


def test_model_batch_is_standardised_float32_with_the_fitted_stats() -> None:
    raw = _raw(2048)
    stats = features.fit_stats(features.engineer(raw))
    batch = features.to_model_batch(raw, stats)
    assert batch["x"].dtype == np.float32 and batch["x"].shape == (2048, len(features.FEATURE_COLUMNS))
    np.testing.assert_allclose(batch["x"].mean(axis=0), 0.0, atol=1e-4)
    np.testing.assert_allclose(batch["x"].std(axis=0), 1.0, atol=1e-3)
    np.testing.assert_allclose(batch["y"].mean(), 0.0, atol=1e-4)


def test_feature_stats_round_trip_through_a_plain_dict() -> None:
    stats = features.fit_stats(features.engineer(_raw()))
    assert features.FeatureStats.from_dict(json.loads(json.dumps(stats.to_dict()))) == stats


def test_request_instances_are_preprocessed_like_training_rows() -> None:
    raw = _raw(8)
    stats = features.fit_stats(features.engineer(_raw(512)))
    instances = [[float(raw[c][i]) for c in features.RAW_COLUMNS] for i in range(8)]
    np.testing.assert_allclose(
        features.instances_to_features(instances, stats), features.to_model_batch(raw, stats)["x"], rtol=1e-6
    )


def test_request_instances_with_the_wrong_width_are_rejected() -> None:
    stats = features.fit_stats(features.engineer(_raw()))
    with pytest.raises(ValueError, match="5 values"):
        features.instances_to_features([[1.0, 2.0]], stats)


def test_write_synthetic_parquet_splits_rows_over_files(tmp_path: Path) -> None:
    paths = data.write_synthetic(str(tmp_path / "d"), rows=1000, fmt="parquet", files=3)
    assert len(paths) == 3
    assert sum(pq.read_table(p).num_rows for p in paths) == 1000
    assert data.detect_format(str(tmp_path / "d")) == "parquet"


def test_write_synthetic_jsonl_writes_one_json_object_per_line(tmp_path: Path) -> None:
    paths = data.write_synthetic(str(tmp_path / "j"), rows=10, fmt="jsonl", files=2)
    rows = [json.loads(line) for p in paths for line in Path(p).read_text().splitlines()]
    assert len(rows) == 10 and set(features.RAW_COLUMNS) <= set(rows[0])
    assert data.detect_format(str(tmp_path / "j")) == "jsonl"


def test_detect_format_fails_clearly_on_an_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no .parquet or .jsonl"):
        data.detect_format(str(tmp_path))


def test_data_cli_requires_a_data_uri() -> None:
    with pytest.raises(SystemExit):
        data.parse_args([])


def test_a_data_set_is_cached_when_eight_times_its_files_fit_in_half_the_object_store(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "part-00000.parquet").write_bytes(b"x" * 1000)
    (d / "part-00001.parquet").write_bytes(b"x" * 500)
    assert data.input_bytes(str(d)) == 1500
    assert data.fits_in_object_store(str(d), object_store_bytes=24_000)  # 8 x 1500 = half of 24 000
    assert not data.fits_in_object_store(str(d), object_store_bytes=23_999)


def test_parquet_footers_are_read_by_one_actor_per_ten_files_at_most_ray_datas_32() -> None:
    # Ray Data 2.60 would start 32 footer-reading actors (Python processes) for any read.
    assert [data.footer_readers(n) for n in (1, 4, 10, 11, 95, 320, 5000)] == [1, 1, 1, 2, 10, 32, 32]


def test_read_raw_sizes_ray_datas_footer_reader_pool_to_the_files_only_while_it_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray.data

    seen: list[str | None] = []
    monkeypatch.delenv("RAY_DATA_PARQUET_FOOTER_NUM_ACTORS", raising=False)
    monkeypatch.setattr(ray.data, "read_parquet", lambda *a, **k: seen.append(os.environ.get(data.FOOTER_READERS_ENV)))
    data.write_synthetic(str(tmp_path / "d"), rows=100, fmt="parquet", files=4)
    data.read_raw(str(tmp_path / "d"))
    assert seen == ["1"]
    assert "RAY_DATA_PARQUET_FOOTER_NUM_ACTORS" not in os.environ


def test_read_raw_leaves_a_footer_reader_pool_size_set_by_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray.data

    seen: list[str | None] = []
    monkeypatch.setenv("RAY_DATA_PARQUET_FOOTER_NUM_ACTORS", "8")
    monkeypatch.setattr(ray.data, "read_parquet", lambda *a, **k: seen.append(os.environ.get(data.FOOTER_READERS_ENV)))
    data.write_synthetic(str(tmp_path / "d"), rows=100, fmt="parquet", files=4)
    data.read_raw(str(tmp_path / "d"))
    assert seen == ["8"] and os.environ["RAY_DATA_PARQUET_FOOTER_NUM_ACTORS"] == "8"
