"""The synthetic housing data set and its preprocessing, in plain numpy.

Kept free of Ray and JAX so that the same functions run in Ray Data tasks, inside the
training workers, in the Serve replica (to preprocess raw request features exactly as at
training time) and in unit tests.

The data set is generated deterministically from a seed (no network download): five raw
columns on very different scales (square metres in the hundreds, distances in km, income
in thousands), a skewed distance, and a non-linear target. That makes normalisation and
feature engineering matter, which is the point of the pipeline.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

RAW_COLUMNS: tuple[str, ...] = ("sqft", "rooms", "age_years", "distance_km", "income_k")
TARGET_COLUMN = "price_k"
FEATURE_COLUMNS: tuple[str, ...] = ("log_sqft", "sqft_per_room", "age_years", "log1p_distance", "log_income")

Batch = Mapping[str, np.ndarray]


def generate_rows(num_rows: int, seed: int = 0) -> dict[str, np.ndarray]:
    """The first num_rows rows of the synthetic data set for this seed (same call, same data)."""
    if num_rows < 0:
        raise ValueError(f"num_rows must be >= 0, got {num_rows}")
    rng = np.random.default_rng(seed)
    sqft = np.exp(rng.normal(7.0, 0.35, num_rows))
    rooms = np.clip(np.round(sqft / 300.0 + rng.normal(0.0, 0.7, num_rows)), 1, 8)
    age = rng.uniform(0.0, 80.0, num_rows)
    distance = rng.exponential(8.0, num_rows)
    income = np.exp(rng.normal(math.log(60.0), 0.4, num_rows))
    price = (
        40.0
        + 0.11 * sqft
        + 9.0 * rooms
        - 0.9 * age
        + 120.0 * np.exp(-distance / 5.0)
        + 1.6 * income
        + rng.normal(0.0, 12.0, num_rows)
    )
    return {
        "id": np.arange(num_rows, dtype=np.int64),
        "sqft": sqft,
        "rooms": rooms,
        "age_years": age,
        "distance_km": distance,
        "income_k": income,
        TARGET_COLUMN: price,
    }


def engineer(batch: Batch) -> dict[str, np.ndarray]:
    """Raw columns -> model features (unnormalised). Target passes through when present."""
    missing = [c for c in RAW_COLUMNS if c not in batch]
    if missing:
        raise KeyError(f"batch lacks raw columns {missing}; expected {list(RAW_COLUMNS)}")
    sqft = np.asarray(batch["sqft"], dtype=np.float64)
    rooms = np.asarray(batch["rooms"], dtype=np.float64)
    if np.any(sqft <= 0) or np.any(rooms <= 0) or np.any(np.asarray(batch["income_k"]) <= 0):
        raise ValueError("sqft, rooms and income_k must be positive")
    if np.any(np.asarray(batch["distance_km"]) < 0):
        raise ValueError("distance_km must be >= 0")
    out = {
        "log_sqft": np.log(sqft),
        "sqft_per_room": sqft / rooms,
        "age_years": np.asarray(batch["age_years"], dtype=np.float64),
        # Distances are exponential: log1p turns the long tail into something an MLP with
        # standardised inputs handles without a few rows dominating.
        "log1p_distance": np.log1p(np.asarray(batch["distance_km"], dtype=np.float64)),
        "log_income": np.log(np.asarray(batch["income_k"], dtype=np.float64)),
    }
    if TARGET_COLUMN in batch:
        out[TARGET_COLUMN] = np.asarray(batch[TARGET_COLUMN], dtype=np.float64)
    return out


@dataclass(frozen=True)
class FeatureStats:
    """Mean and standard deviation of every feature and of the target.

    Fitted once on the training data and stored in each checkpoint, so that Serve applies
    the very same normalisation to request features and undoes it on predictions.
    """

    feature_mean: tuple[float, ...]
    feature_std: tuple[float, ...]
    target_mean: float
    target_std: float

    def __post_init__(self) -> None:
        if len(self.feature_mean) != len(FEATURE_COLUMNS) or len(self.feature_std) != len(FEATURE_COLUMNS):
            raise ValueError(f"stats must have {len(FEATURE_COLUMNS)} features")
        if min(self.feature_std) <= 0 or self.target_std <= 0:
            raise ValueError("standard deviations must be > 0")

    def to_dict(self) -> dict[str, object]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> FeatureStats:
        return cls(
            feature_mean=tuple(float(x) for x in data["feature_mean"]),  # type: ignore[union-attr]
            feature_std=tuple(float(x) for x in data["feature_std"]),  # type: ignore[union-attr]
            target_mean=float(data["target_mean"]),  # type: ignore[arg-type]
            target_std=float(data["target_std"]),  # type: ignore[arg-type]
        )


def _safe_std(value: float) -> float:
    # A constant column would divide by zero; 1.0 leaves it centred and harmless.
    return value if value > 1e-12 else 1.0


def fit_stats(engineered: Batch) -> FeatureStats:
    """Stats from one in-memory batch of engineered features (tests, small data)."""
    return FeatureStats(
        feature_mean=tuple(float(np.mean(engineered[c])) for c in FEATURE_COLUMNS),
        feature_std=tuple(_safe_std(float(np.std(engineered[c]))) for c in FEATURE_COLUMNS),
        target_mean=float(np.mean(engineered[TARGET_COLUMN])),
        target_std=_safe_std(float(np.std(engineered[TARGET_COLUMN]))),
    )


def stats_from_moments(means: Mapping[str, float], stds: Mapping[str, float]) -> FeatureStats:
    """Stats from per-column moments computed elsewhere (Ray Data aggregations)."""
    return FeatureStats(
        feature_mean=tuple(float(means[c]) for c in FEATURE_COLUMNS),
        feature_std=tuple(_safe_std(float(stds[c])) for c in FEATURE_COLUMNS),
        target_mean=float(means[TARGET_COLUMN]),
        target_std=_safe_std(float(stds[TARGET_COLUMN])),
    )


def normalise_features(engineered: Batch, stats: FeatureStats) -> np.ndarray:
    """Engineered columns -> float32 matrix [rows, len(FEATURE_COLUMNS)], standardised."""
    x = np.stack([np.asarray(engineered[c], dtype=np.float64) for c in FEATURE_COLUMNS], axis=1)
    x = (x - np.asarray(stats.feature_mean)) / np.asarray(stats.feature_std)
    return x.astype(np.float32)


def to_model_batch(batch: Batch, stats: FeatureStats | Mapping[str, object]) -> dict[str, np.ndarray]:
    """Raw rows -> {"x": float32 [B, F], "y": float32 [B]}: the training batch format."""
    if not isinstance(stats, FeatureStats):
        stats = FeatureStats.from_dict(stats)
    eng = engineer(batch)
    if TARGET_COLUMN not in eng:
        raise KeyError(f"training batch lacks the target column {TARGET_COLUMN!r}")
    y = (eng[TARGET_COLUMN] - stats.target_mean) / stats.target_std
    return {"x": normalise_features(eng, stats), "y": y.astype(np.float32)}


def instances_to_features(instances: Sequence[Sequence[float]], stats: FeatureStats) -> np.ndarray:
    """Request instances (each a list in RAW_COLUMNS order) -> normalised model input."""
    arr = np.asarray(instances, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != len(RAW_COLUMNS):
        raise ValueError(f"each instance must have {len(RAW_COLUMNS)} values in the order {list(RAW_COLUMNS)}")
    raw = {c: arr[:, i] for i, c in enumerate(RAW_COLUMNS)}
    return normalise_features(engineer(raw), stats)


def denormalise_target(y: np.ndarray, stats: FeatureStats) -> np.ndarray:
    return np.asarray(y, dtype=np.float64) * stats.target_std + stats.target_mean
