"""The model (a small MLP regression in plain JAX + optax) and its checkpoint files.

No Ray here: the training loop in ray_apps.train and the Serve replica both use these
functions, and unit tests exercise them in-process.

Checkpoint layout (one directory, written by Train rank 0, persisted by Ray Train):
- params.npz     model parameters, keys "layer{i}_w" / "layer{i}_b";
- opt_state.npz  optax state leaves in tree order ("leaf{i}"), rebuilt against a fresh
                 optimizer.init(params) so no pickle is involved;
- meta.json      step, model config, feature stats, the per-step history of the run
                 (step, loss, attempt) and the list of attempts (where each one resumed).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ray_apps.features import FEATURE_COLUMNS, FeatureStats

Params = list[dict[str, Any]]  # [{"w": [in, out], "b": [out]}, ...]
CHECKPOINT_FORMAT = "tpuray-mlp/1"
META_FILE = "meta.json"
PARAMS_FILE = "params.npz"
OPT_STATE_FILE = "opt_state.npz"


@dataclass(frozen=True)
class ModelConfig:
    in_dim: int = len(FEATURE_COLUMNS)
    hidden: tuple[int, ...] = (32, 32)
    learning_rate: float = 1e-2
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["hidden"] = list(self.hidden)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        return cls(
            in_dim=int(data["in_dim"]),
            hidden=tuple(int(h) for h in data["hidden"]),
            learning_rate=float(data["learning_rate"]),
            seed=int(data["seed"]),
        )


def init_params(config: ModelConfig) -> Params:
    """He-initialised weights as numpy arrays (host memory: callers choose the sharding)."""
    rng = np.random.default_rng(config.seed)
    sizes = [config.in_dim, *config.hidden, 1]
    params: Params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        w = rng.normal(0.0, np.sqrt(2.0 / fan_in), (fan_in, fan_out)).astype(np.float32)
        params.append({"w": w, "b": np.zeros((fan_out,), np.float32)})
    return params


def apply(params: Params, x: Any, xp: Any = jnp) -> Any:
    """Forward pass -> predictions [B]. xp=numpy runs it without JAX (the Serve replica)."""
    h = x
    for layer in params[:-1]:
        h = xp.maximum(h @ layer["w"] + layer["b"], 0.0)
    out = h @ params[-1]["w"] + params[-1]["b"]
    return out[:, 0]


def mse_loss(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((apply(params, x) - y) ** 2)


def make_optimizer(config: ModelConfig) -> optax.GradientTransformation:
    return optax.adam(config.learning_rate)


def make_train_step(
    optimizer: optax.GradientTransformation,
) -> Callable[[Params, Any, jax.Array, jax.Array], tuple[Params, Any, jax.Array]]:
    """A jitted SPMD step: with batches sharded over the 'data' mesh and replicated params,
    XLA inserts the cross-host gradient all-reduce itself (ICI on TPU, gloo on CPU)."""

    @jax.jit
    def step(params: Params, opt_state: Any, x: jax.Array, y: jax.Array) -> tuple[Params, Any, jax.Array]:
        loss, grads = jax.value_and_grad(mse_loss)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step


def make_accumulating_step(
    optimizer: optax.GradientTransformation,
) -> Callable[[Params, Any, Sequence[tuple[jax.Array, jax.Array]]], tuple[Params, Any, jax.Array]]:
    """One optimizer update from several micro-batches, their gradients averaged: an elastic run
    that keeps its global batch on fewer slices (batch policy `global`) takes more of them."""
    grad = jax.jit(jax.value_and_grad(mse_loss))

    @jax.jit
    def update(params: Params, opt_state: Any, grads: Any) -> tuple[Params, Any]:
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    def step(
        params: Params, opt_state: Any, batches: Sequence[tuple[jax.Array, jax.Array]]
    ) -> tuple[Params, Any, jax.Array]:
        losses, total = [], None
        for x, y in batches:
            loss, g = grad(params, x, y)
            losses.append(loss)
            total = g if total is None else jax.tree_util.tree_map(jnp.add, total, g)
        k = len(batches)
        params, opt_state = update(params, opt_state, jax.tree_util.tree_map(lambda a: a / k, total))
        return params, opt_state, sum(losses) / k

    return step


def to_host(tree: Any) -> Any:
    """Pull a (replicated) pytree back to numpy on this host.

    Uses the first addressable shard: on multi-host meshes a replicated global array is not
    fully addressable, yet each host holds a complete copy.
    """

    def leaf(a: Any) -> np.ndarray:
        if isinstance(a, jax.Array):
            return np.asarray(a.addressable_shards[0].data)
        return np.asarray(a)

    return jax.tree_util.tree_map(leaf, tree)


@dataclass
class TrainingState:
    """Everything a checkpoint holds, on the host."""

    step: int
    params: Params
    opt_state_leaves: list[np.ndarray] | None
    model_config: ModelConfig
    stats: FeatureStats
    history: list[dict[str, Any]] = field(default_factory=list)  # [{"step", "loss", "attempt"}]
    attempts: list[dict[str, Any]] = field(default_factory=list)  # [{"attempt", "start_step", "resumed_from"}]

    def opt_state(self, optimizer: optax.GradientTransformation) -> Any:
        """The optimizer state rebuilt on the tree structure of optimizer.init(params)."""
        template = optimizer.init(self.params)
        if self.opt_state_leaves is None:
            return template
        treedef = jax.tree_util.tree_structure(template)
        return jax.tree_util.tree_unflatten(treedef, [np.asarray(v) for v in self.opt_state_leaves])


def save_checkpoint(directory: str | os.PathLike[str], state: TrainingState, opt_state: Any = None) -> Path:
    """Write a checkpoint directory (local path; Ray Train uploads it to storage_path)."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    params = to_host(state.params)
    np.savez(path / PARAMS_FILE, **{f"layer{i}_{k}": v for i, layer in enumerate(params) for k, v in layer.items()})
    if opt_state is not None:
        leaves = jax.tree_util.tree_leaves(to_host(opt_state))
        np.savez(path / OPT_STATE_FILE, **{f"leaf{i}": v for i, v in enumerate(leaves)})
    meta = {
        "format": CHECKPOINT_FORMAT,
        "step": state.step,
        "model_config": state.model_config.to_dict(),
        "stats": state.stats.to_dict(),
        "history": state.history,
        "attempts": state.attempts,
    }
    (path / META_FILE).write_text(json.dumps(meta, indent=1))
    return path


def read_meta(directory: str | os.PathLike[str]) -> dict[str, Any]:
    meta = json.loads((Path(directory) / META_FILE).read_text())
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{directory} is not a {CHECKPOINT_FORMAT} checkpoint (format={meta.get('format')!r})")
    return meta


def load_checkpoint(directory: str | os.PathLike[str]) -> TrainingState:
    path = Path(directory)
    meta = read_meta(path)
    config = ModelConfig.from_dict(meta["model_config"])
    with np.load(path / PARAMS_FILE) as npz:
        n_layers = len(config.hidden) + 1
        params = [{"w": npz[f"layer{i}_w"], "b": npz[f"layer{i}_b"]} for i in range(n_layers)]
    leaves: list[np.ndarray] | None = None
    if (path / OPT_STATE_FILE).exists():
        with np.load(path / OPT_STATE_FILE) as npz:
            leaves = [npz[f"leaf{i}"] for i in range(len(npz.files))]
    return TrainingState(
        step=int(meta["step"]),
        params=params,
        opt_state_leaves=leaves,
        model_config=config,
        stats=FeatureStats.from_dict(meta["stats"]),
        history=list(meta.get("history", [])),
        attempts=list(meta.get("attempts", [])),
    )


def step_history_problems(history: Sequence[dict[str, Any]], first_step: int = 1) -> list[str]:
    """What is wrong with a checkpoint's step history: duplicated or missing steps.

    A resumed run continues at checkpoint step + 1 and the history it inherits stops at that
    checkpoint, so a correct history is exactly first_step..last with each step once.
    """
    steps = [int(h["step"]) for h in history]
    problems: list[str] = []
    seen: set[int] = set()
    dups = sorted({s for s in steps if s in seen or seen.add(s)})  # type: ignore[func-returns-value]
    if dups:
        problems.append(f"duplicated steps: {dups}")
    if steps:
        missing = sorted(set(range(first_step, max(steps) + 1)) - set(steps))
        if missing:
            problems.append(f"missing steps: {missing}")
        if steps != sorted(steps):
            problems.append("steps out of order")
    return problems


def attempt_problems(attempts: Sequence[dict[str, Any]]) -> list[str]:
    """Each attempt must start right after the checkpoint it resumed from (or at 1)."""
    problems: list[str] = []
    for a in attempts:
        expected = int(a["resumed_from"] or 0) + 1
        if int(a["start_step"]) != expected:
            problems.append(f"attempt {a['attempt']} started at {a['start_step']}, expected {expected}")
    return problems
