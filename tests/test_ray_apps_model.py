"""The MLP, its train step and its checkpoint files, in-process (JAX on CPU, no Ray)."""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from ray_apps import features, model


@pytest.fixture(scope="module")
def batch() -> tuple[jnp.ndarray, jnp.ndarray, features.FeatureStats]:
    raw = features.generate_rows(512, seed=0)
    stats = features.fit_stats(features.engineer(raw))
    b = features.to_model_batch(raw, stats)
    return jnp.asarray(b["x"]), jnp.asarray(b["y"]), stats


def _train(params, opt_state, step_fn, x, y, n: int):  # type: ignore[no-untyped-def]
    losses = []
    for _ in range(n):
        params, opt_state, loss = step_fn(params, opt_state, x, y)
        losses.append(float(loss))
    return params, opt_state, losses


def test_loss_goes_down_over_a_few_steps(batch) -> None:  # type: ignore[no-untyped-def]
    x, y, _ = batch
    cfg = model.ModelConfig()
    opt = model.make_optimizer(cfg)
    params = model.init_params(cfg)
    _, _, losses = _train(params, opt.init(params), model.make_train_step(opt), x, y, 30)
    assert losses[-1] < 0.5 * losses[0]


def test_numpy_forward_pass_matches_the_jax_one(batch) -> None:  # type: ignore[no-untyped-def]
    x, _, _ = batch
    params = model.init_params(model.ModelConfig())
    np.testing.assert_allclose(
        model.apply(params, np.asarray(x), xp=np), np.asarray(model.apply(params, x)), rtol=1e-4, atol=1e-5
    )


def test_restored_checkpoint_continues_exactly_like_an_uninterrupted_run(batch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    x, y, stats = batch
    cfg = model.ModelConfig()
    opt = model.make_optimizer(cfg)
    step_fn = model.make_train_step(opt)
    p0 = model.init_params(cfg)
    straight, _, _ = _train(p0, opt.init(p0), step_fn, x, y, 10)

    half, half_opt, _ = _train(p0, opt.init(p0), step_fn, x, y, 5)
    state = model.TrainingState(step=5, params=half, opt_state_leaves=None, model_config=cfg, stats=stats)
    model.save_checkpoint(tmp_path, state, half_opt)
    restored = model.load_checkpoint(tmp_path)
    resumed, _, _ = _train(restored.params, restored.opt_state(opt), step_fn, x, y, 5)

    assert restored.step == 5 and restored.stats == stats and restored.model_config == cfg
    for a, b in zip(straight, resumed, strict=True):
        np.testing.assert_allclose(np.asarray(a["w"]), np.asarray(b["w"]), rtol=1e-5, atol=1e-6)


def test_checkpoint_keeps_history_and_attempts(tmp_path: Path, batch) -> None:  # type: ignore[no-untyped-def]
    _, _, stats = batch
    cfg = model.ModelConfig()
    history = [{"step": s, "loss": 1.0 / s, "attempt": 1} for s in range(1, 4)]
    attempts = [{"attempt": 1, "start_step": 1, "resumed_from": None}]
    state = model.TrainingState(3, model.init_params(cfg), None, cfg, stats, history, attempts)
    loaded = model.load_checkpoint(model.save_checkpoint(tmp_path, state))
    assert loaded.history == history and loaded.attempts == attempts and loaded.opt_state_leaves is None


def test_loading_a_directory_that_is_not_a_checkpoint_fails_clearly(tmp_path: Path) -> None:
    (tmp_path / model.META_FILE).write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="not a tpuray-mlp"):
        model.load_checkpoint(tmp_path)


def test_step_history_without_gaps_or_duplicates_has_no_problems() -> None:
    assert model.step_history_problems([{"step": s} for s in range(1, 21)]) == []


def test_step_history_reports_duplicated_steps() -> None:
    steps = [*range(1, 14), *range(11, 21)]  # a restart that replayed 11..13 into the log
    assert model.step_history_problems([{"step": s} for s in steps]) == [
        "duplicated steps: [11, 12, 13]",
        "steps out of order",
    ]


def test_step_history_reports_missing_steps() -> None:
    assert model.step_history_problems([{"step": s} for s in (1, 2, 5)]) == ["missing steps: [3, 4]"]


def test_attempt_must_start_right_after_the_checkpoint_it_resumed_from() -> None:
    good = [{"attempt": 1, "start_step": 1, "resumed_from": None}, {"attempt": 2, "start_step": 11, "resumed_from": 10}]
    bad = [{"attempt": 2, "start_step": 12, "resumed_from": 10}]
    assert model.attempt_problems(good) == []
    assert model.attempt_problems(bad) == ["attempt 2 started at 12, expected 11"]
