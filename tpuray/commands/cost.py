"""`tpuray cost STACK [--tokens-per-second N] [--json]`: what the stack's slices cost.

Without --tokens-per-second: the hourly and monthly range of every slice pool (as in
preview). With it: dollars per million output tokens of the LLM service on each capacity
tier of the serve pool, for N output tokens/s per replica (one replica = one slice), e.g. the
figure benchmarks/llm_load.py measured (tpuray/cost/token_cost.py).
"""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from tpuray import terminal
from tpuray.config.checks import load_stack
from tpuray.cost import queues as queue_cost
from tpuray.cost.table import cost_table, price_text, stack_cost
from tpuray.cost.token_cost import per_token_costs


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cost", help="what the stack's slices cost; per million tokens with --tokens-per-second")
    p.add_argument("stack", help="a stack name in stacks/ or a path to a Pulumi.<name>.yaml")
    p.add_argument("--tokens-per-second", type=float, help="measured output tokens/s of one serve replica (one slice)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    cfg = load_stack(args.stack)
    if args.tokens_per_second is None:
        cap = queue_cost.quota_cap(cfg)
        if args.json:
            print(json.dumps({**stack_cost(cfg).as_json(), **({"queues": cap.as_json()} if cap else {})}, indent=2))
        else:
            terminal.console(width=160).print(cost_table(stack_cost(cfg)))
            for line in queue_cost.preview_lines(cfg):
                terminal.console(width=160).print(line)
        return 0
    rows = per_token_costs(cfg, args.tokens_per_second)
    if args.json:
        print(json.dumps({"stack": cfg.stack, "tiers": [r.as_json() for r in rows]}, indent=2))
        return 0
    table = Table(
        title=f"{cfg.stack}: USD per million output tokens at {args.tokens_per_second:g} tokens/s per replica"
    )
    for column in ("pool", "shape", "tier", "chips/replica", "price/chip-h", "$/M output tokens"):
        table.add_column(column)
    for r in rows:
        table.add_row(r.pool, f"{r.generation} {r.topology}", r.tier, str(r.chips), price_text(r.price), r.text())
    terminal.console(width=160).print(table)
    return 0
