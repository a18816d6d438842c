"""`tpuray diff BASE_REF [--stack S] [--markdown | --json]`: what a change does to each stack.

Offline: both sides run under the Pulumi mock engine (see tpuray/preview/diff.py). Lists added,
changed (updated or replaced) and removed resources with the changed fields, the policy
violations introduced and resolved, and the cost delta. Exit 1 when the head side has a
mandatory violation (or fails to evaluate), 2 when the ref is unknown.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tpuray import terminal as terminal_text
from tpuray.cost import table as costmod
from tpuray.errors import UserError
from tpuray.preview.diff import DiffError, Report, StackDiff, delta_text, run_diff, show, total_text

MARKER = "<!-- tpuray-diff -->"  # lets CI find and update its own PR comment
SYMBOL = {"add": "+", "update": "~", "replace": "±", "remove": "-"}
FIELD_LIMIT = 40  # per resource in the comment; the rest is counted, not dropped silently


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diff", help="offline diff of every stack between a git ref and the working tree")
    p.add_argument("base_ref", metavar="BASE_REF", help="branch, tag or commit to compare against (fetched if missing)")
    p.add_argument("--stack", action="append", help="only this stack (repeatable); default: every stack on either side")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--markdown", action="store_true", help="print a pull-request comment (GitHub Markdown)")
    out.add_argument("--json", action="store_true", help="print the diff as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        report = run_diff(Path.cwd(), args.base_ref, args.stack)
    except DiffError as err:
        raise UserError(str(err), err.code) from None
    if args.json:
        print(json.dumps(report.as_json(), indent=2, default=str))
    elif args.markdown:
        print(markdown(report))
    else:
        terminal(report, terminal_text.console(soft_wrap=False, width=200))
    return report.exit_code


# ---------------------------------------------------------------------------- shared pieces


def _summary(s: StackDiff) -> str:
    if not s.head.exists:
        return "stack removed"
    if s.head.error:
        return "head fails to evaluate"
    if not s.base.exists:
        return f"new stack ({len(s.resources)} resources)"
    c = s.counts()
    if not any(c.values()):
        return "no resource changes"
    return ", ".join(f"{n} to {a}" for a, n in c.items() if n)


def _policy_cell(s: StackDiff) -> str:
    return f"+{len(s.introduced)} / −{len(s.resolved)} ({len(s.head_mandatory)} mandatory in head)"


def _range_text(r: tuple[costmod.RangeEnd, costmod.RangeEnd] | None, factor: float = 1.0, per: str = "h") -> str:
    return "n/a" if r is None else costmod.range_text(r[0], r[1], factor, per)


def _range_delta(s: StackDiff, factor: float = 1.0, per: str = "h") -> str:
    a, b = s.cost.range("base"), s.cost.range("head")
    if a is None or b is None:
        return "n/a"
    low, high = costmod.end_delta_text(a[0], b[0], factor, per), costmod.end_delta_text(a[1], b[1], factor, per)
    return low if low == high else f"{low} to {high}"


def _cost_cell(s: StackDiff) -> str:
    """The stack's monthly range, head side, and its delta from the base."""
    hpm = costmod.hours_per_month()
    return f"{_range_text(s.cost.range('head'), hpm, 'mo')} (Δ {_range_delta(s, hpm, 'mo')})"


def _prices_note(s: StackDiff) -> str:
    doc = s.cost.head or s.cost.base or {}
    p = doc.get("prices")
    if not p:
        return ""
    return f"Prices: {p['source']}, snapshot {p['snapshotDate']} ({p['ageDays']} days old)."


def _violation_text(v: dict[str, Any]) -> str:
    return f"[{v.get('level', '?')}] {v.get('policy')} on {v.get('resource')}: {v.get('message')}"


def _cost_rows(s: StackDiff) -> list[tuple[str, str, str, str]]:
    """(what, base, head, delta) rows: the stack's range, the all-on-demand comparison, then each
    changed line at max scale. The configured-tier totals stay in the JSON only: beside the range
    they would be a second, looser figure for the same thing."""
    hpm = costmod.hours_per_month()
    a_range, b_range = s.cost.range("base"), s.cost.range("head")
    rows = [
        ("range per month (min scale, first tiers → max scale, worst tiers)", _range_text(a_range, hpm, "mo"),
         _range_text(b_range, hpm, "mo"), _range_delta(s, hpm, "mo")),
        ("range per hour", _range_text(a_range), _range_text(b_range), _range_delta(s)),
    ]  # fmt: skip
    a, b = s.cost.total("base", "max", "onDemandHourly"), s.cost.total("head", "max", "onDemandHourly")
    rows.append(("same pools all on-demand, max scale, per hour", total_text(a), total_text(b), delta_text(a, b)))
    for x, y in s.cost.line_changes():
        line = y or x
        assert line is not None
        label = f"{line['pool']} {line['generation']} {line['topology']} {line['tier']} ({line['role']}), max"
        bx = costmod.money(x["hourly"]["max"]) if x else "—"
        hy = costmod.money(y["hourly"]["max"]) if y else "—"
        if x and y and x["hourly"]["max"] is not None and y["hourly"]["max"] is not None:
            d = y["hourly"]["max"] - x["hourly"]["max"]
            delta = ("+" if d >= 0 else "−") + costmod.money(abs(d))
        else:
            delta = "unknown" if (x and y) else ("added" if y else "removed")
        if y:
            od = costmod.money(y["onDemandHourly"]["max"])
            hy += f" (on-demand {od})" if y["tier"] != "on-demand" else ""
        rows.append((label, bx, hy, delta))
    return rows


# ---------------------------------------------------------------------------- terminal


def terminal(report: Report, console: Console) -> None:
    console.print(
        terminal_text.styled(
            ("tpuray diff", "bold"), f" {report.base_ref} ({report.base_sha[:10]}) → working tree (offline, mocked)"
        )
    )
    overview = Table(title="stacks")
    for col in ("stack", "resources", "policy violations (new / resolved)", "monthly cost range (Δ)"):
        overview.add_column(col)
    for s in report.stacks:
        overview.add_row(s.stack, _summary(s), _policy_cell(s), _cost_cell(s))
    console.print(overview)
    for s in report.stacks:
        console.rule(f"stack {s.stack}")
        for side, label in ((s.base, "base"), (s.head, "head")):
            if side.error:
                console.print(terminal_text.styled((f"{label} failed to evaluate:", "red"), f" {side.error}"))
        if s.resources:
            table = Table(show_lines=False)
            for col in ("", "type", "name", "changed fields (old → new)"):
                table.add_column(col)
            for r in s.resources:
                fields = "\n".join(f.text() for f in r.fields[:FIELD_LIMIT])
                if len(r.fields) > FIELD_LIMIT:
                    fields += f"\n… and {len(r.fields) - FIELD_LIMIT} more"
                table.add_row(f"{SYMBOL[r.action]} {r.action}", r.type, r.name, fields)
            console.print(table)
        for v in s.introduced:
            console.print(terminal_text.styled(("policy introduced:", "red"), f" {_violation_text(v)}"))
        for v in s.resolved:
            console.print(terminal_text.styled(("policy resolved:", "green"), f" {_violation_text(v)}"))
        cost = Table(title=f"cost, stack {s.stack} (USD, TPU chips only)")
        for col in ("", "base", "head", "delta"):
            cost.add_column(col)
        for row in _cost_rows(s):
            cost.add_row(*row)
        console.print(cost)
        console.print(_prices_note(s))
        if s.cost.note:
            console.print(f"note: {s.cost.note}")


# ---------------------------------------------------------------------------- markdown


def _md(text: str) -> str:
    """Table-cell safe: pipes and newlines would break a GitHub table row."""
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    return "`" + text.replace("`", "'") + "`"


def markdown(report: Report) -> str:
    out = [MARKER, f"### tpuray diff: `{report.base_ref}` ({report.base_sha[:10]}) → this change", ""]
    out.append("Offline preview of the desired state (Pulumi mocks, no cloud credentials).")
    out.append("")
    out.append("| stack | resources | policy violations (new / resolved) | monthly cost range (Δ) |")
    out.append("|---|---|---|---|")
    for s in report.stacks:
        out.append(f"| `{s.stack}` | {_md(_summary(s))} | {_md(_policy_cell(s))} | {_md(_cost_cell(s))} |")
    for s in report.stacks:
        out += ["", f"#### `{s.stack}`", ""]
        for side, label in ((s.base, "base"), (s.head, "head")):
            if side.error:
                out.append(f"> **{label} fails to evaluate:** {_md(side.error)}")
                out.append("")
        if s.resources:
            out.append("| | type | name | fields changed |")
            out.append("|---|---|---|---|")
            for r in s.resources:
                out.append(f"| {SYMBOL[r.action]} {r.action} | `{r.type}` | `{r.name}` | {len(r.fields) or ''} |")
            changed = [r for r in s.resources if r.fields]
            if changed:
                out += ["", f"<details><summary>changed fields ({sum(len(r.fields) for r in changed)})</summary>", ""]
                for r in changed:
                    out.append(f"- **{r.action}** `{r.type}` `{r.name}`")
                    for f in r.fields[:FIELD_LIMIT]:
                        forces = " **(forces replacement)**" if f.replaces else ""
                        out.append(f"  - {_code(f.path)}: {_code(show(f.old))} → {_code(show(f.new))}{forces}")
                    if len(r.fields) > FIELD_LIMIT:
                        out.append(f"  - … and {len(r.fields) - FIELD_LIMIT} more")
                out += ["", "</details>"]
        elif not (s.base.error or s.head.error):
            out.append("No resource changes.")
        out.append("")
        if s.introduced or s.resolved:
            out.append("**Policy**")
            out.append("")
            for v in s.introduced:
                icon = ":x:" if v.get("level") == "mandatory" else ":warning:"
                out.append(f"- {icon} introduced: {_md(_violation_text(v))}")
            for v in s.resolved:
                out.append(f"- :white_check_mark: resolved: {_md(_violation_text(v))}")
            out.append("")
        if s.head_mandatory:
            out.append(
                f"**{len(s.head_mandatory)} mandatory policy violation(s) in the head of `{s.stack}`** (blocks `pulumi up`)."
            )
            out.append("")
        out.append("| cost (USD, TPU chips) | base | head | delta |")
        out.append("|---|---|---|---|")
        for row in _cost_rows(s):
            out.append("| " + " | ".join(_md(c) for c in row) + " |")
        out += ["", f"_{_prices_note(s)}_"] if _prices_note(s) else []
        if s.cost.note:
            out += ["", f"_{s.cost.note}_"]
    out += [
        "",
        "<sub>Prices per chip-hour with sources and dates: `tpuray/data/prices.yaml` (`tpuray prices refresh` "
        "rewrites it from the Cloud Billing Catalog); `unknown` = no public figure (set it per stack in "
        '`tpuray:prices`); "at least" = a part priced at its published floor. Not included: '
        + "; ".join(costmod.NOT_INCLUDED)
        + ". "
        "Replace vs update: the Google provider's ForceNew fields read from its source "
        "(`tpuray/data/provider_force_new.yaml`, docs/seams.md) and Kubernetes object identity; "
        "`pulumi preview` is authoritative.</sub>",
    ]
    return "\n".join(out)
