"""Google's predefined IAM roles and the permissions each holds: a dated slice of upstream data.

tpuray/data/iam_roles.json holds, for the roles the Terraform foundation grants the CI
identities and the candidates weighed against them (docs/foundation.md, "CI identity"), the
role definitions Google publishes (`gcloud iam roles describe ROLE`: title, stage and
includedPermissions), as collected in https://github.com/iann0036/iam-dataset (gcp/roles/<role>.json;
the dataset's README: "The result of the command `gcloud iam roles describe "$name"` for all
built-in roles"). The file's header names the dataset commit, its date and the day it was read.

Refresh (reads the roles already in the file, plus any --add ROLE):

    .venv/bin/python -m tpuray.checks.iam_roles PATH_TO_IAM_DATASET [--add roles/monitoring.editor]

PATH_TO_IAM_DATASET is a clone of the dataset, or a bare git directory of one.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

from tpuray.errors import TpurayError
from tpuray.paths import DATA_DIR

ROLES_FILE = DATA_DIR / "iam_roles.json"
DATASET = "https://github.com/iann0036/iam-dataset"


class UnknownRole(TpurayError):
    """A role the stored slice does not hold (refresh with --add ROLE)."""


@cache
def snapshot() -> dict[str, Any]:
    return json.loads(ROLES_FILE.read_text())


def permissions(role: str) -> frozenset[str]:
    """The permissions Google's definition of `role` includes."""
    roles = snapshot()["roles"]
    if role not in roles:
        raise UnknownRole(
            f"{role} is not in {ROLES_FILE.name}; add it: python -m tpuray.checks.iam_roles DATASET --add {role}"
        )
    return frozenset(roles[role]["includedPermissions"])


def _git(dataset: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(dataset), *args], check=True, capture_output=True, text=True).stdout


def _read_role(dataset: Path, role: str) -> dict[str, Any]:
    name = role.removeprefix("roles/")
    path = dataset / "gcp" / "roles" / f"{name}.json"
    text = path.read_text() if path.is_file() else _git(dataset, "show", f"HEAD:gcp/roles/{name}.json")
    doc = json.loads(text)
    return {key: doc[key] for key in ("title", "stage", "includedPermissions") if key in doc}


def refresh(dataset: Path, roles: list[str], today: dt.date) -> dict[str, Any]:
    """The file's content, read anew from a checkout of the dataset for `roles`."""
    commit = _git(dataset, "rev-parse", "HEAD").strip()
    commit_date = _git(dataset, "log", "-1", "--format=%cs", "HEAD").strip()
    return {
        "source": DATASET,
        "files": "gcp/roles/<role>.json: `gcloud iam roles describe <role>` for every predefined role",
        "commit": commit,
        "commit_date": commit_date,
        "retrieved": today.isoformat(),
        "refresh": "python -m tpuray.checks.iam_roles PATH_TO_IAM_DATASET [--add ROLE] (tpuray/checks/iam_roles.py)",
        "roles": {role: _read_role(dataset, role) for role in sorted(roles)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tpuray.checks.iam_roles", description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path, help="a clone (or bare git directory) of iann0036/iam-dataset")
    parser.add_argument("--add", action="append", default=[], metavar="ROLE", help="also store this role")
    args = parser.parse_args(argv)
    roles = sorted(set(snapshot()["roles"]) | set(args.add))
    content = refresh(args.dataset, roles, dt.date.today())
    ROLES_FILE.write_text(json.dumps(content, indent=1, sort_keys=False) + "\n")
    print(f"{ROLES_FILE}: {len(roles)} roles from {DATASET} at {content['commit'][:12]} ({content['commit_date']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
