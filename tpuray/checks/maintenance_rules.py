"""GKE's rules for a cluster's maintenance policy (`tpuray:cluster.maintenance`), beyond the
per-field checks of tpuray/config/security.py: the window's RFC 5545 recurrence, the maintenance
availability it leaves in every rolling 32-day window, and the exclusions' limits by scope.

Sources:
- "You must allow at least 48 hours of maintenance availability in a 32-day rolling window. Only
  contiguous availability windows of at least four hours are considered."
  https://cloud.google.com/kubernetes-engine/docs/how-to/maintenance-windows-and-exclusions
- Exclusions: "You can add a maximum of three maintenance exclusions that exclude all upgrades
  (that is, a scope of "no upgrades"). These exclusions must be configured to allow for at least
  48 hours of maintenance availability in a 32-day rolling window"; "You can have a maximum of 20
  maintenance exclusions in total"; "No upgrades: Cannot exceed 30 days" (the same page;
  pulumi-gcp 10.2.0 ClusterMaintenancePolicy.maintenance_exclusions: "up to 20 maintenance
  exclusions at a time"). The 30 days are checked in security_config.py. NO_MINOR_UPGRADES and
  NO_MINOR_OR_NODE_UPGRADES may last up to the end of support of the cluster's minor version,
  which the stack does not know before GKE picks the version: not checked here.
- The recurrence is "An RFC 5545 RRULE ... Note that FREQ=SECONDLY, MINUTELY, and HOURLY are not
  supported" (gcloud container clusters update --maintenance-window-recurrence, googlecloudsdk
  command_lib/container/flags.py). Its grammar: RFC 5545 section 3.3.10 (https://www.rfc-editor.org/rfc/rfc5545#section-3.3.10).

Occurrences come from python-dateutil's rrule (pinned in requirements.lock) once the strict parser
below has accepted the rule; the availability is computed over the first 366 days of the window
and around each NO_UPGRADES exclusion, never per occurrence forever.
"""

from __future__ import annotations

import bisect
import re
from datetime import datetime, timedelta, timezone

from dateutil.rrule import rrulestr

from tpuray.config.schema import StackConfig
from tpuray.config.security import MIN_WINDOW, NO_UPGRADES_MAX, MaintenanceConfig, _utc

NS = "tpuray"
ROLLING = timedelta(days=32)
MIN_AVAILABLE = timedelta(hours=48)
MAX_NO_UPGRADES = 3
MAX_EXCLUSIONS = 20
HORIZON = timedelta(days=366)  # a year of the window: every weekday, month length and leap day
GKE_FREQS = ("DAILY", "WEEKLY", "MONTHLY", "YEARLY")
RFC_FREQS = ("SECONDLY", "MINUTELY", "HOURLY", *GKE_FREQS)
WEEKDAYS = ("SU", "MO", "TU", "WE", "TH", "FR", "SA")
_INT = re.compile(r"^[+-]?[0-9]{1,3}$")
_WEEKDAYNUM = re.compile(r"^([+-]?)([0-9]{1,2})?(SU|MO|TU|WE|TH|FR|SA)$")
_UNTIL = re.compile(r"^[0-9]{8}T[0-9]{6}Z$")
# BYxxx parts with integer lists: (lowest absolute value, highest, negative values allowed).
_INT_LISTS = {
    "BYSECOND": (0, 60, False),
    "BYMINUTE": (0, 59, False),
    "BYHOUR": (0, 23, False),
    "BYMONTHDAY": (1, 31, True),
    "BYYEARDAY": (1, 366, True),
    "BYWEEKNO": (1, 53, True),
    "BYMONTH": (1, 12, False),
    "BYSETPOS": (1, 366, True),
}
PARTS = ("FREQ", "UNTIL", "COUNT", "INTERVAL", "BYDAY", "WKST", *_INT_LISTS)


def _int_list_problem(name: str, value: str) -> str | None:
    low, high, signed = _INT_LISTS[name]
    for item in value.split(","):
        if not _INT.match(item) or (item[0] in "+-" and not signed) or not low <= abs(int(item)) <= high:
            sign = "±" if signed else ""
            return f"{name}={value} is invalid: {name} takes a list of {sign}{low}..{high}"
    return None


def _byday_problem(value: str, freq: str, parts: dict[str, str]) -> str | None:
    for item in value.split(","):
        match = _WEEKDAYNUM.match(item)
        if not match:
            return (
                f"BYDAY={value} is invalid: days are {', '.join(WEEKDAYS)}, optionally after a week number (1SA, -1FR)"
            )
        if match.group(2) is not None:
            if not 1 <= int(match.group(2)) <= 53:
                return f"BYDAY={value} is invalid: a week number is 1..53 or -53..-1"
            if freq not in ("MONTHLY", "YEARLY") or (freq == "YEARLY" and "BYWEEKNO" in parts):
                return f"BYDAY={value} is invalid: numbered days (1SA) go with FREQ=MONTHLY or FREQ=YEARLY only"
    return None


def recurrence_problem(rule: str) -> str | None:
    """Why GKE refuses an RRULE, or None. RFC 5545 3.3.10: NAME=VALUE parts split by ';', each part
    at most once, FREQ required, not both UNTIL and COUNT, the BYxxx parts each FREQ allows."""
    parts: dict[str, str] = {}
    for part in rule.split(";"):
        name, sep, value = part.partition("=")
        if not sep or not value:
            return f"{part!r} is not NAME=VALUE"
        if name not in PARTS:
            return f"{name} is not an RRULE part; valid: {', '.join(PARTS)}"
        if name in parts:
            return f"{name} is given twice; each part goes once"
        parts[name] = value
    freq = parts.get("FREQ", "")
    if freq not in RFC_FREQS:
        return f"FREQ={freq} is invalid; valid: {', '.join(GKE_FREQS)}"
    if freq not in GKE_FREQS:
        return f"FREQ={freq} is not supported by GKE; valid: {', '.join(GKE_FREQS)}"
    if "UNTIL" in parts and "COUNT" in parts:
        return "UNTIL and COUNT cannot both be given"
    if "UNTIL" in parts and not _UNTIL.match(parts["UNTIL"]):
        return f"UNTIL={parts['UNTIL']} is invalid: the window starts in UTC, so UNTIL is a UTC time, 20270101T000000Z"
    for name in ("COUNT", "INTERVAL"):
        if name in parts and not (parts[name].isdigit() and int(parts[name]) >= 1):
            return f"{name}={parts[name]} is invalid: {name} is a whole number of at least 1"
    if "WKST" in parts and parts["WKST"] not in WEEKDAYS:
        return f"WKST={parts['WKST']} is invalid; valid: {', '.join(WEEKDAYS)}"
    for name in _INT_LISTS:
        if name in parts and (problem := _int_list_problem(name, parts[name])):
            return problem
    if "BYDAY" in parts and (problem := _byday_problem(parts["BYDAY"], freq, parts)):
        return problem
    if "BYMONTHDAY" in parts and freq == "WEEKLY":
        return "BYMONTHDAY cannot go with FREQ=WEEKLY"
    if "BYYEARDAY" in parts and freq in ("DAILY", "WEEKLY", "MONTHLY"):
        return f"BYYEARDAY cannot go with FREQ={freq}; only with FREQ=YEARLY"
    if "BYWEEKNO" in parts and freq != "YEARLY":
        return f"BYWEEKNO cannot go with FREQ={freq}; only with FREQ=YEARLY"
    if "BYSETPOS" in parts and not any(p.startswith("BY") and p != "BYSETPOS" for p in parts):
        return "BYSETPOS needs another BYxxx part to select from"
    return None


Interval = tuple[datetime, datetime]


def _merge(intervals: list[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _subtract(intervals: list[Interval], holes: list[Interval]) -> list[Interval]:
    out = []
    for start, end in intervals:
        pieces = [(start, end)]
        for h_start, h_end in holes:
            pieces = [
                piece for s, e in pieces for piece in ((s, min(e, h_start)), (max(s, h_end), e)) if piece[0] < piece[1]
            ]
        out += pieces
    return out


def _least_available(stretches: list[Interval], first: datetime, last: datetime) -> tuple[timedelta, datetime]:
    """The least time of `stretches` (sorted, disjoint) in any [t, t + 32 days] with first <= t <= last,
    and that t. The least is reached where t is a stretch's end or t + 32 days a stretch's start."""
    starts = [s for s, _ in stretches]
    ends = [e for _, e in stretches]
    lengths = [e - s for s, e in stretches]
    prefix = [timedelta(0)]
    for length in lengths:
        prefix.append(prefix[-1] + length)

    def upto(t: datetime) -> timedelta:  # time of the stretches before t
        i = bisect.bisect_right(starts, t)
        done = prefix[i]
        return done - max(timedelta(0), ends[i - 1] - t) if i and ends[i - 1] > t else done

    candidates = {first, last, *(e for e in ends if first <= e <= last)}
    candidates |= {s - ROLLING for s in starts if first <= s - ROLLING <= last}
    return min(((upto(t + ROLLING) - upto(t), t) for t in candidates), key=lambda x: (x[0], x[1]))


def _availability(m: MaintenanceConfig, holes: list[Interval]) -> tuple[timedelta, datetime]:
    """The least maintenance availability in a rolling 32-day window, over the window's first year
    and around each exclusion in `holes`, counting stretches of 4 hours or more only."""
    w = m.window
    start, length = _utc(w.start).replace(tzinfo=timezone.utc), _utc(w.end) - _utc(w.start)
    rule = rrulestr(w.recurrence, dtstart=start)
    spans = [(start, start + HORIZON)] + [(s - ROLLING, e + ROLLING) for s, e in holes if e > start]
    least: tuple[timedelta, datetime] | None = None
    for span_start, span_end in _merge(spans):
        span_start = max(span_start, start)
        occurrences = rule.between(span_start - length, span_end + ROLLING, inc=True)
        stretches = _merge([(s, s + length) for s in occurrences])
        stretches = [(s, e) for s, e in _subtract(stretches, holes) if e - s >= MIN_WINDOW]
        if not stretches:
            found = (timedelta(0), span_start)
        else:
            found = _least_available(stretches, span_start, max(span_start, span_end - ROLLING))
        least = found if least is None or found[0] < least[0] else least
    assert least is not None
    return least


def _hours(delta: timedelta) -> str:
    hours = delta.total_seconds() / 3600
    return f"{hours:g} hours"


def maintenance_lines(prefix: str, maintenance: MaintenanceConfig | None) -> list[str]:
    if maintenance is None:
        return []
    w, wkey = maintenance.window, f"{prefix}.maintenance.window"
    lines = []
    problem = recurrence_problem(w.recurrence)
    if problem:
        lines.append(f"{wkey}.recurrence: {w.recurrence!r} is invalid; {problem} (RFC 5545 RRULE)")
    exclusions = maintenance.exclusions
    ekey = f"{prefix}.maintenance.exclusions"
    if len(exclusions) > MAX_EXCLUSIONS:
        lines.append(f"{ekey}: {len(exclusions)} exclusions is more than GKE's {MAX_EXCLUSIONS}")
    no_upgrades = [(i, ex) for i, ex in enumerate(exclusions) if ex.scope == "NO_UPGRADES"]
    if len(no_upgrades) > MAX_NO_UPGRADES:
        i = no_upgrades[MAX_NO_UPGRADES][0]
        lines.append(
            f"{ekey}[{i}]: a fourth NO_UPGRADES exclusion; GKE allows at most {MAX_NO_UPGRADES}: use scope "
            "NO_MINOR_OR_NODE_UPGRADES for the others"
        )
    span = _utc(w.end) - _utc(w.start)
    if problem or span < MIN_WINDOW:
        return lines  # a window shorter than 4 hours is refused by security_config.py
    base, at = _availability(maintenance, [])
    when = f"in the 32 days from {at.strftime('%Y-%m-%dT%H:%MZ')}"
    allowed = (
        "GKE needs at least 48 hours of maintenance availability in every rolling 32-day window, counting "
        "stretches of 4 hours or more"
    )
    if base < MIN_AVAILABLE:
        lines.append(
            f"{wkey}: {w.recurrence} from {w.start[11:16]} to {w.end[11:16]} UTC allows {_hours(base)} {when}; "
            f"{allowed}: make the window longer or more frequent"
        )
        return lines
    holes = []
    for i, ex in no_upgrades:
        if timedelta(0) < _utc(ex.end) - _utc(ex.start) <= NO_UPGRADES_MAX:  # else refused on its own
            holes.append((_utc(ex.start).replace(tzinfo=timezone.utc), _utc(ex.end).replace(tzinfo=timezone.utc)))
            least, at = _availability(maintenance, holes)
            if least < MIN_AVAILABLE:
                lines.append(
                    f"{ekey}[{i}]: NO_UPGRADES from {ex.start} to {ex.end} leaves {_hours(least)} of maintenance "
                    f"in the 32 days from {at.strftime('%Y-%m-%dT%H:%MZ')}; {allowed}: shorten it or make it "
                    "NO_MINOR_OR_NODE_UPGRADES"
                )
                holes.pop()
    return lines


def stack_lines(cfg: StackConfig) -> list[str]:
    return maintenance_lines(f"{NS}:cluster", cfg.cluster.maintenance)
