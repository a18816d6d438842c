"""out/demo/: the one-page summary from the demo's results, and the loss curve (no Ray cluster)."""

from __future__ import annotations

from pathlib import Path

from tpuray import catalog
from tpuray.local.demo_summary import DemoResult, summary_markdown, write_outputs
from tpuray.local.emulator import SliceSpec

V6E_4X4 = catalog.find("v6e", "4x4", 4)
V6E_1X1 = catalog.find("v6e", "1x1", 1)

RESULT = DemoResult(
    stack="dev",
    slices=[
        SliceSpec("train-spot-0", "train", V6E_4X4, "spot", tier="spot"),
        SliceSpec("serve-spot-0", "serve", V6E_1X1, "spot", tier="spot"),
    ],
    losses={10: 1.2034, 20: 0.6111, 30: 0.3502, 40: 0.2407},
    placements=[
        {"attempt": 1, "rank": r, "slice": "train-spot-0", "tpu_worker_id": str(r), "node_id": "n", "pid": 1}
        for r in range(4)
    ],
    served={
        "request": {"instances": [[1450.0, 3.0, 12.0, 8.5, 95.0]]},
        "response": {"predictions": [312.4], "model_step": 40},
    },
    cost_per_hour="$12.10/h to $40.80/h",
    cost_per_month="$8,833/mo to $29,784/mo",
    logs="/tmp/tpuray-local/logs/dev-demo.log",
    phases={"preview": 12.0, "train": 70.5},
)


def test_summary_names_the_stack() -> None:
    assert summary_markdown(RESULT).startswith("# tpuray demo: stack dev\n")


def test_summary_lists_each_slice_with_the_hosts_training_used() -> None:
    text = summary_markdown(RESULT)
    assert "| train-spot-0 | v6e 4x4 | 4 x 4 chips | spot | training, hosts 0, 1, 2, 3 |" in text
    assert "| serve-spot-0 | v6e 1x1 | 1 x 1 chips | spot | - |" in text


def test_summary_gives_steps_and_the_loss_going_down() -> None:
    assert "40 steps; loss 1.2034 at step 10 to 0.2407 at step 40 (down)." in summary_markdown(RESULT)


def test_summary_shows_the_served_answer() -> None:
    text = summary_markdown(RESULT)
    assert 'POST /predict `{"instances": [[1450.0, 3.0, 12.0, 8.5, 95.0]]}`' in text
    assert "answered `[312.4]` from the step 40 checkpoint." in text


def test_summary_carries_the_previews_cost_figure_and_the_log_path() -> None:
    text = summary_markdown(RESULT)
    assert "$12.10/h to $40.80/h ($8,833/mo to $29,784/mo)" in text
    assert "Ray's driver and worker logs: `/tmp/tpuray-local/logs/dev-demo.log`" in text


def test_summary_ends_with_phase_times_and_their_total() -> None:
    assert summary_markdown(RESULT).endswith("| preview | 12.0 |\n| train | 70.5 |\n| total | 82.5 |\n")


def test_only_the_last_attempts_hosts_count_as_used() -> None:
    retried = [
        {"attempt": 1, "rank": 0, "slice": "train-spot-0", "tpu_worker_id": "3"},
        {"attempt": 2, "rank": 0, "slice": "train-spot-0", "tpu_worker_id": "1"},
    ]
    text = summary_markdown(DemoResult(**{**RESULT.__dict__, "placements": retried}))
    assert "| training, hosts 1 |" in text


def test_write_outputs_writes_a_png_and_the_summary(tmp_path: Path) -> None:
    png, md = write_outputs(RESULT, tmp_path / "out" / "demo")
    assert png == tmp_path / "out" / "demo" / "loss.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert md.read_text() == summary_markdown(RESULT)
