"""Golden files of what the program renders: the preview JSON and the rendered Kubernetes
objects of the dev, staging and prod stacks (tests/fixtures/golden/<stack>/).

tests/test_render_identity.py compares a fresh render with them byte for byte, so a
refactoring that changes any input of any resource, any rendered object, the cost table or
the policy findings fails there with a unified diff.

Regenerate ONLY when a change alters the output on purpose (another issue's feature, a new
policy rule, a price update), in a commit of its own that says so:

    .venv/bin/python tests/golden.py            # rewrite every golden file
    .venv/bin/python tests/golden.py --check    # exit 1 and print the diff when one is stale

One field is normalised and one line left out, nothing else:
- the bundle URI's content hash (`tpuray-apps-<16 hex>.zip` in a RayJob's runtimeEnvYAML and a
  RayService's serveConfigV2) becomes `tpuray-apps-<bundle-hash>.zip`. It is the sha256 of the
  files under ray_apps/ (tpuray.bundle.sources_digest), so ANY edit of ray_apps/ (a docstring,
  another engineer's Serve change) changes it; what it must be is tested in test_bundle.py;
- preview.txt leaves out the "prices ... days old" line, and preview.json's `ageDays` becomes
  `"<days since the snapshot>"`: both count days from today (tests/test_prices_refresh.py
  tests the age itself).
Everything else is deterministic: two runs of the same tree give identical bytes.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    from tpuray.preview.mockrun import StackRun

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

GOLDEN = REPO / "tests" / "fixtures" / "golden"
STACKS = ("dev", "staging", "prod")
BUNDLE_HASH = re.compile(r"tpuray-apps-[0-9a-f]{16}\.zip")
# The price snapshot's age in days counts from today: it changes at every midnight UTC.
PRICE_AGE = re.compile(r'"ageDays": \d+')


def normalise(text: str) -> str:
    return PRICE_AGE.sub(
        '"ageDays": "<days since the snapshot>"', BUNDLE_HASH.sub("tpuray-apps-<bundle-hash>.zip", text)
    )


def preview_json(run: StackRun) -> str:
    """`tpuray preview STACK --json` exactly as the command prints it (resources, cost, violations)."""
    from tpuray.commands.preview import preview_document
    from tpuray.policies.evaluate import check_stack as policy_violations

    return normalise(json.dumps(preview_document(run, policy_violations(run)), indent=2, default=str) + "\n")


def rendered_objects(run: StackRun) -> str:
    """Every file `tpuray render STACK` writes, in file-name order, each under a `# file:` line."""
    from tpuray.preview.render import file_name, manifests

    parts = []
    for manifest in manifests(run):
        body = yaml.safe_dump(manifest, sort_keys=True, width=120)
        parts.append(f"# file: {file_name(manifest)}\n{body}")
    return normalise("---\n".join(parts))


def preview_text(run: StackRun) -> str:
    """`tpuray preview STACK` as the terminal shows it, without the price and TPU-zone snapshot age
    lines (they count days from today, so they change every day; tests/test_prices_refresh.py and
    tests/test_tpu_zones.py test them)."""
    import io

    from tpuray import terminal
    from tpuray.commands.preview import print_delivery, print_table, print_violations
    from tpuray.cost import queues as queue_cost
    from tpuray.cost.table import cost_table, stack_cost
    from tpuray.policies.evaluate import check_stack as policy_violations

    out = io.StringIO()
    console = terminal.console(file=out, soft_wrap=False, width=200, color_system=None)
    print_table(run, console)
    print_delivery(run, console)
    console.print(cost_table(stack_cost(run.config)))
    for line in queue_cost.preview_lines(run.config):
        console.print(line)
    print_violations(policy_violations(run), console)
    return normalise(out.getvalue())


def renders(stack: str) -> dict[str, str]:
    from tpuray.preview.mockrun import run_stack

    run = run_stack(stack)
    return {"preview.json": preview_json(run), "preview.txt": preview_text(run), "rendered.yaml": rendered_objects(run)}


def diff(stack: str, name: str, fresh: str) -> str:
    """A unified diff of a golden file against a fresh render; empty when identical."""
    path = GOLDEN / stack / name
    old = path.read_text() if path.exists() else ""
    return "".join(
        difflib.unified_diff(
            old.splitlines(True), fresh.splitlines(True), f"golden/{stack}/{name}", f"now/{stack}/{name}"
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 with the diff when stale")
    args = parser.parse_args(argv)
    stale = 0
    for stack in STACKS:
        for name, text in renders(stack).items():
            if args.check:
                d = diff(stack, name, text)
                if d:
                    stale += 1
                    sys.stdout.write(d)
            else:
                (GOLDEN / stack).mkdir(parents=True, exist_ok=True)
                (GOLDEN / stack / name).write_text(text)
                print(f"wrote {(GOLDEN / stack / name).relative_to(REPO)}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
