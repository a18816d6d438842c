"""Load an OpenAI-compatible endpoint: tokens/s, time to first token, p50/p99 latency, $/M tokens.

    python benchmarks/llm_load.py --url http://127.0.0.1:8000 --model google/gemma-3-4b-it \
        --concurrency 1,4,16 --requests 32 [--max-tokens 128] [--stack prod] [--json out.json]

Each request is a streamed POST /v1/chat/completions (stream_options.include_usage), so the
time to the first content chunk is the TTFT and the usage of the last chunk is the output
token count (the number of content chunks when a server sends no usage). At each concurrency
level, `concurrency` clients send `requests` requests in all; output tokens/s is the level's
output tokens over its wall time. With --stack, each level's throughput per replica (the
stack's serve replicas, or --replicas) is priced per capacity tier of the serve pool
(tpuray/cost/token_cost.py): the same figure as `tpuray cost STACK --tokens-per-second N`.
The endpoint is the local emulated one by default; a real one on GKE with --url.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.client import HTTPConnection, HTTPSConnection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PROMPT = "Explain in three sentences why a TPU slice is scheduled as a whole."


@dataclass(frozen=True)
class Sample:
    ttft_s: float
    latency_s: float
    output_tokens: int


def one_request(url: str, model: str, max_tokens: int, timeout_s: float = 300.0) -> Sample:
    parts = urllib.parse.urlsplit(url)
    conn_cls = HTTPSConnection if parts.scheme == "https" else HTTPConnection
    conn = conn_cls(parts.hostname or "127.0.0.1", parts.port, timeout=timeout_s)
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    start = time.perf_counter()
    conn.request(
        "POST",
        parts.path.rstrip("/") + "/v1/chat/completions",
        json.dumps(body),
        {"Content-Type": "application/json"},
    )
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"{url}: HTTP {resp.status}: {resp.read()[:300]!r}")
    ttft, chunks, usage = None, 0, None
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        event = json.loads(line.removeprefix("data:").strip())
        if event.get("usage"):
            usage = event["usage"].get("completion_tokens")
        for choice in event.get("choices") or []:
            if (choice.get("delta") or {}).get("content"):
                chunks += 1
                if ttft is None:
                    ttft = time.perf_counter() - start
    latency = time.perf_counter() - start
    conn.close()
    return Sample(ttft if ttft is not None else latency, latency, usage if usage is not None else chunks)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def run_level(url: str, model: str, concurrency: int, requests: int, max_tokens: int) -> dict[str, Any]:
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        samples = list(pool.map(lambda _: one_request(url, model, max_tokens), range(requests)))
    wall = time.perf_counter() - start
    tokens = sum(s.output_tokens for s in samples)
    return {
        "concurrency": concurrency,
        "requests": requests,
        "outputTokens": tokens,
        "wallSeconds": wall,
        "outputTokensPerSecond": tokens / wall,
        "ttftSeconds": {
            "p50": statistics.median(s.ttft_s for s in samples),
            "p99": percentile([s.ttft_s for s in samples], 99),
        },
        "latencySeconds": {
            "p50": statistics.median(s.latency_s for s in samples),
            "p99": percentile([s.latency_s for s in samples], 99),
        },
    }


def price_levels(levels: list[dict[str, Any]], stack: str, replicas: int | None) -> None:
    from tpuray.config.checks import load_stack
    from tpuray.cost.token_cost import per_token_costs
    from tpuray.desired.llm_stack import max_replicas

    cfg = load_stack(stack)
    count = replicas or max_replicas(cfg)
    for level in levels:
        per_replica = level["outputTokensPerSecond"] / count
        level["replicas"] = count
        level["usdPerMillionOutputTokens"] = {r.tier: r.usd_per_million for r in per_token_costs(cfg, per_replica)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8000", help="the OpenAI-compatible endpoint's base URL")
    p.add_argument("--model", required=True, help="the model id the endpoint serves (GET /v1/models)")
    p.add_argument("--concurrency", default="1,4,16", help="comma-separated concurrency levels")
    p.add_argument("--requests", type=int, default=32, help="requests per level")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--stack", help="price the throughput on this stack's serve pool (tpuray/cost/token_cost.py)")
    p.add_argument("--replicas", type=int, help="replicas behind the endpoint (default: the stack's)")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args(argv)
    levels = [
        run_level(args.url, args.model, int(c), args.requests, args.max_tokens) for c in args.concurrency.split(",")
    ]
    if args.stack:
        price_levels(levels, args.stack, args.replicas)
    for lv in levels:
        cost = lv.get("usdPerMillionOutputTokens") or {}
        priced = ", ".join(f"{t} ${v:.4f}/M" if v is not None else f"{t} unknown" for t, v in cost.items())
        print(
            f"c={lv['concurrency']:>3}  {lv['outputTokensPerSecond']:8.1f} tok/s  "
            f"TTFT p50 {lv['ttftSeconds']['p50'] * 1000:7.1f} ms p99 {lv['ttftSeconds']['p99'] * 1000:7.1f} ms  "
            f"latency p50 {lv['latencySeconds']['p50']:.3f} s p99 {lv['latencySeconds']['p99']:.3f} s"
            + (f"  {priced}" if priced else "")
        )
    if args.json:
        args.json.write_text(json.dumps({"url": args.url, "model": args.model, "levels": levels}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
