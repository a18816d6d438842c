"""`tpuray local status`: a small table per slice that fits 100 columns (no Ray cluster)."""

from __future__ import annotations

from rich.console import Console

from tpuray.commands.local import slice_table
from tpuray.local.emulator.status import serve_replicas_per_node

SLICE = {
    "slice": "train-spot-0",
    "pool": "train",
    "generation": "v6e",
    "topology": "4x4",
    "market_type": "spot",
    "hosts": [
        {"worker_id": 0, "alive": True, "tpu_total": 4, "tpu_free": 0, "holders": ["RayTrainWorker (rank 0) " * 6],
         "node_id": "a" * 56},
        {"worker_id": 1, "alive": True, "tpu_total": 4, "tpu_free": 4, "holders": [], "node_id": "b" * 56},
        {"worker_id": 2, "alive": False, "tpu_total": 0, "tpu_free": 0, "holders": [], "node_id": None},
    ],
}  # fmt: skip


def render(wide: bool, width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(slice_table(SLICE, wide=wide))
    return console.export_text()


def test_table_is_titled_with_the_slice_shape_and_market() -> None:
    assert render(False, 100).splitlines()[0].strip() == "train-spot-0: v6e 4x4, spot"


def test_hosts_show_busy_free_and_down() -> None:
    rows = [line for line in render(False, 100).splitlines() if line.startswith("│ ")]
    assert [row.split("│")[2].strip() for row in rows if row.split("│")[1].strip()] == ["busy", "free", "down"]


def test_long_holders_wrap_within_100_columns() -> None:
    text = render(False, 100)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "RayTrainWorker (rank 0)" in text


def test_node_ids_only_in_the_wide_view() -> None:
    assert "a" * 20 not in render(False, 100)
    assert "a" * 56 in render(True, 200)


def test_live_serve_replicas_are_listed_on_the_node_they_run_on() -> None:
    actors = {
        "a1": {"ActorClassName": "ServeReplica:tpuray-serve:checkpoint-model", "State": "ALIVE",
               "Address": {"NodeID": "n-v5e-0"}},
        "a2": {"ActorClassName": "ServeReplica:tpuray-serve:checkpoint-model", "State": "DEAD",
               "Address": {"NodeID": "n-v6e-0"}},
        "a3": {"ActorClassName": "ServeController", "State": "ALIVE", "Address": {"NodeID": "n-head"}},
        "a4": {"ActorClassName": "ServeReplica:tpuray-serve:healthz", "State": "ALIVE",
               "Address": {"NodeID": "n-v5e-0"}},
    }  # fmt: skip
    assert serve_replicas_per_node(actors) == {
        "n-v5e-0": ["ServeReplica:tpuray-serve:checkpoint-model", "ServeReplica:tpuray-serve:healthz"]
    }


def test_a_replica_on_a_fallback_slice_shows_in_that_slices_table_with_its_tier() -> None:
    v5e = {
        "slice": "v5e-chain-0", "pool": "train", "generation": "v5e", "topology": "4x4", "market_type": "on-demand",
        "hosts": [{"worker_id": 0, "alive": True, "tpu_total": 4, "tpu_free": 4,
                   "holders": ["ServeReplica:tpuray-serve:checkpoint-model"], "node_id": "n-v5e-0"}],
    }  # fmt: skip
    console = Console(width=100, record=True, color_system=None)
    console.print(slice_table(v5e))
    text = console.export_text()
    assert text.splitlines()[0].rstrip() == "v5e-chain-0: v5e 4x4, on-demand"
    assert "ServeReplica:tpuray-serve:checkpoint-model" in text.replace("\n", "").replace("│", "").replace(" ", "")
