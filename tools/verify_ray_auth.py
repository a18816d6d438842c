#!/usr/bin/env python3
"""Fail a deploy whose Ray Jobs API answers without the token (issue 36, item 6).

An add-on older than KubeRay 1.5.1 prunes `authOptions` without an error, and the head then
runs with token auth off: the policy pack cannot see the cluster, so the deploy asks the head
itself. After `pulumi up`, the deploy workflow port-forwards each head's dashboard port and runs

    python tools/verify_ray_auth.py http://127.0.0.1:8265 [--token-env RAY_AUTH_TOKEN]

1. GET /api/jobs/ (the Jobs API's list of jobs) with no credentials must be refused with 401,
   Ray's answer to a request without a token (ray 2.60
   ray/_private/authentication/http_token_authentication.py: "Unauthorized: Missing
   authentication token"). A 200 means token auth is off: exit 1.
2. With --token-env naming a variable that holds the cluster's token (KubeRay's Secret
   `<raycluster>`, key `auth_token`), the same request must answer 200, which shows the 401
   came from Ray's own check and the token works. Otherwise: exit 2.
Exit 0 when both hold; 2 when the answer is anything else or the head cannot be reached within
--wait-seconds (a port-forward that is still starting is retried). Standard library only: it
runs on the runner before any project install.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.error
import urllib.request

JOBS_PATH = "/api/jobs/"
REFUSED = 401
OPEN_EXIT, UNSURE_EXIT = 1, 2


def status(url: str, token: str | None, timeout: float) -> tuple[int, str]:
    """(HTTP status, first 200 characters of the body) of GET url."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - an operator-given URL
            return response.status, response.read(200).decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read(200).decode(errors="replace")


def first_answer(url: str, token: str | None, wait_seconds: float) -> tuple[int, str]:
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return status(url, token, timeout=10)
        except (urllib.error.URLError, OSError) as err:
            if time.monotonic() >= deadline:
                raise ConnectionError(f"{url}: no answer within {wait_seconds:g} s ({err})") from err
            time.sleep(1)


def verify(base_url: str, token: str | None, wait_seconds: float) -> tuple[int, list[str]]:
    """(exit code, report lines)."""
    url = base_url.rstrip("/") + JOBS_PATH
    try:
        code, body = first_answer(url, None, wait_seconds)
    except ConnectionError as err:
        return UNSURE_EXIT, [f"ray auth: {err}"]
    if code == 200:
        return OPEN_EXIT, [
            f"ray auth: OPEN: GET {url} without a token answered 200; token auth is off, and the Jobs API runs code "
            "for anyone who reaches the head (an add-on older than KubeRay 1.5.1 drops authOptions): failing the deploy"
        ]
    if code != REFUSED:
        return UNSURE_EXIT, [f"ray auth: GET {url} without a token answered {code} ({body.strip()!r}), not Ray's 401"]
    lines = [f"ray auth: GET {url} without a token refused with 401 ({body.strip()!r})"]
    if token is None:
        return 0, lines
    code, body = first_answer(url, token, wait_seconds)
    if code != 200:
        return UNSURE_EXIT, [*lines, f"ray auth: GET {url} with the token answered {code} ({body.strip()!r}), not 200"]
    return 0, [*lines, f"ray auth: GET {url} with the token answered 200"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the head's dashboard address, e.g. http://127.0.0.1:8265 (kubectl port-forward)")
    parser.add_argument("--token-env", help="an environment variable holding the cluster's Ray token")
    parser.add_argument("--wait-seconds", type=float, default=60.0, help="how long to retry a head not yet reachable")
    args = parser.parse_args(argv)
    token = None
    if args.token_env:
        token = os.environ.get(args.token_env)
        if not token:
            print(f"ray auth: --token-env {args.token_env}: the variable is unset or empty", file=sys.stderr)
            return UNSURE_EXIT
    code, lines = verify(args.url, token, args.wait_seconds)
    for line in lines:
        print(line, file=sys.stderr if code else sys.stdout)
    return code


if __name__ == "__main__":
    sys.exit(main())
