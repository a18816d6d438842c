"""benchmarks/llm_load.py against a small streaming OpenAI-compatible server (stdlib, in-process)."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import llm_load  # noqa: E402

WORDS = ["A", " slice", " is", " one", " gang"]


class _Stream(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert self.path == "/v1/chat/completions" and body["stream"] is True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for word in WORDS:
            self.wfile.write(f"data: {json.dumps({'choices': [{'delta': {'content': word}}]})}\n\n".encode())
        usage = {"choices": [], "usage": {"completion_tokens": len(WORDS)}}
        self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_one_streamed_request_counts_the_usage_tokens_and_a_first_token_time(url: str) -> None:
    sample = llm_load.one_request(url, "m", 16)
    assert sample.output_tokens == 5
    assert 0 < sample.ttft_s <= sample.latency_s


def test_a_level_reports_throughput_and_percentiles_over_all_its_requests(url: str) -> None:
    level = llm_load.run_level(url, "m", concurrency=2, requests=6, max_tokens=16)
    assert (level["requests"], level["outputTokens"]) == (6, 30)
    assert level["outputTokensPerSecond"] == 30 / level["wallSeconds"]
    assert level["ttftSeconds"]["p50"] <= level["ttftSeconds"]["p99"]


def test_levels_are_priced_per_replica_on_the_stacks_tiers() -> None:
    levels = [{"outputTokensPerSecond": 2000.0}]
    llm_load.price_levels(levels, "prod", None)  # prod serves 2 replicas of v5e 2x4 on demand
    assert levels[0]["replicas"] == 2
    assert {t: round(v, 4) for t, v in levels[0]["usdPerMillionOutputTokens"].items()} == {"on-demand": 2.6667}
