"""Slice-atomic scheduling on TPU slices: the one place every app reserves TPU hosts.

A multi-host TPU program (one JAX process per host) only runs when all of its processes
sit on the hosts of ONE slice: a gang split over two slices waits for ICI peers that are
not there and hangs. Plain Ray does split gangs (4 actors asking TPU:4, or a
STRICT_SPREAD placement group, land on hosts of two slices when each slice has one busy
host), and Ray 2.60's helpers have two gaps this module works around:
- SlicePlacementGroup claims a slice through the TPU-<pod>-head resource of worker 0,
  so it can claim a partly busy slice and wait there while another slice is fully free;
- get_num_ready_tpu_slices reads a node whose TPU entry vanished from the available
  resources (it does at 0) as idle, so it over-counts free slices.

`reserve_slice` therefore reads each node's real available resources and labels, picks
a slice whose hosts are ALL free, and pins one placement-group bundle per host to that
slice with bundle_label_selector (ray.io/tpu-slice-name plus ray.io/tpu-worker-id, so
bundle i is TPU worker i). Ray places placement groups atomically, so the gang is either
entirely on that slice or not placed at all. Selectors are tried in order (spot before
on-demand, one generation before another); past the deadline it raises
SliceUnavailableError naming the topology, every slice seen and what occupies it.

This module runs inside the Ray image on GKE: it imports ray and nothing from tpuray.
Shapes (hosts, chips per host) come in as arguments from the caller's config.

Length (about 550 lines, over the ~400 rule): the slice view, the choice, the reservation and
its deadline are one algorithm, kept readable in one place; ray_apps must not import tpuray.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

# Ray's node label keys (src/ray/common/constants.h); set by Ray itself from the TPU env.
SLICE_NAME = "ray.io/tpu-slice-name"
WORKER_ID = "ray.io/tpu-worker-id"
TOPOLOGY = "ray.io/tpu-topology"
POD_TYPE = "ray.io/tpu-pod-type"
ACCELERATOR_TYPE = "ray.io/accelerator-type"
MARKET_TYPE = "ray.io/market-type"
# tpuray's node label of the capacity tier a host runs on, where the nodes carry it (the emulator).
CAPACITY_TIER = "tpuray.dev/capacity-tier"
GENERATION = "tpuray.dev/generation"  # the worker group's TPU generation (v6e, v5e...)
SLICE_POOL = "tpuray.dev/slice-pool"
GROUP_POD_TYPE = "tpuray.dev/tpu-pod-type"  # the worker group's shape (v6e-16): whole-slice demand selects it

Selector = Mapping[str, str]


class SliceUnavailableError(TimeoutError):
    """No slice of the requested shape became free before the deadline."""


# ---------------------------------------------------------------------------- label selectors


def label_matches(selector: Selector, labels: Mapping[str, str]) -> bool:
    """Ray's label-selector semantics: "v", "!v", "in(a,b)", "!in(a,b)"; keys ANDed.

    Used only to pre-filter candidates; the placement group carries the same selector, so
    Ray enforces it in any case."""
    for key, expr in selector.items():
        value = labels.get(key)
        negate = expr.startswith("!")
        body = expr[1:] if negate else expr
        if body.startswith("in(") and body.endswith(")"):
            hit = value is not None and value in {v.strip() for v in body[3:-1].split(",")}
        else:
            hit = value == body
        if hit == negate:
            return False
    return True


# ---------------------------------------------------------------------------- inventory


@dataclass(frozen=True)
class HostView:
    node_id: str
    slice_name: str
    worker_id: int
    labels: Mapping[str, str]
    total: Mapping[str, float]
    available: Mapping[str, float]
    holders: tuple[str, ...] = ()  # placement groups with a bundle here ("name (state)")

    @property
    def tpu_total(self) -> float:
        return float(self.total.get("TPU", 0))

    @property
    def tpu_free(self) -> float:
        # A resource at 0 disappears from the available map: absent means none free.
        return float(self.available.get("TPU", 0))

    @property
    def free(self) -> bool:
        return self.tpu_total > 0 and self.tpu_free >= self.tpu_total

    def describe(self) -> str:
        used = self.tpu_total - self.tpu_free
        state = "free" if self.free else f"TPU {used:g}/{self.tpu_total:g} in use"
        holders = f" by {', '.join(self.holders)}" if self.holders else (" by a task or actor" if used else "")
        return f"worker {self.worker_id}: {state}{holders}"


@dataclass(frozen=True)
class SliceView:
    name: str
    hosts: tuple[HostView, ...]

    @property
    def labels(self) -> dict[str, str]:
        """The labels all hosts of the slice share (accelerator, topology, market type...)."""
        if not self.hosts:
            return {}
        common = dict(self.hosts[0].labels)
        for host in self.hosts[1:]:
            common = {k: v for k, v in common.items() if host.labels.get(k) == v}
        return common

    @property
    def topology(self) -> str:
        return self.labels.get(TOPOLOGY, "?")

    @property
    def free(self) -> bool:
        return bool(self.hosts) and all(h.free for h in self.hosts)

    @property
    def busy_hosts(self) -> int:
        return sum(not h.free for h in self.hosts)

    def describe(self) -> str:
        lab = self.labels
        tier = lab.get(CAPACITY_TIER) or lab.get(MARKET_TYPE)
        kind = ", ".join(v for v in (lab.get(ACCELERATOR_TYPE), lab.get(TOPOLOGY), tier) if v)
        state = "all free" if self.free else f"{self.busy_hosts}/{len(self.hosts)} hosts busy"
        busy = "; ".join(h.describe() for h in self.hosts if not h.free)
        count = f"{len(self.hosts)} host" + ("s" if len(self.hosts) != 1 else "")
        return f"{self.name} ({kind}, {count}): {state}" + (f" [{busy}]" if busy else "")


# pragma: no mutate start (Ray's live view: the real-cluster tests in test_slices.py cover it)
def _available_per_node() -> dict[str, dict[str, float]]:
    # Ray has no public per-node *available* resources call in 2.60; this is what
    # ray.available_resources() sums. Pinned Ray version: see requirements.lock.
    from ray._private.state import available_resources_per_node

    return available_resources_per_node()


def _holders_per_node() -> dict[str, list[str]]:
    holders: dict[str, list[str]] = {}
    for pg_id, info in ray.util.placement_group_table().items():
        if info.get("state") == "REMOVED":
            continue
        label = f"placement group {info.get('name') or pg_id[:8]!r} ({info.get('state', '?')})"
        for node_id in set((info.get("bundles_to_node_id") or {}).values()):
            holders.setdefault(node_id, []).append(label)
    return holders


def draining_nodes() -> dict[str, int]:
    """Ray Core's draining nodes, {node id: deadline in unix ms, 0 for none}: a host under a
    preemption or maintenance notice (GCS DrainNode; Ray Train's PreemptionWatcher reads the same)."""
    return dict(ray._private.state.state.get_draining_nodes() or {})


def slice_inventory(include_draining: bool = False) -> list[SliceView]:
    """Every TPU slice Ray knows, with each live host's labels and free resources. A host being
    drained (its notice given) is left out unless `include_draining`: it is going away, so its
    slice is no longer whole for a new gang, though it is still held until it goes."""
    available = _available_per_node()
    holders = _holders_per_node()
    draining = {} if include_draining else draining_nodes()
    by_slice: dict[str, list[HostView]] = {}
    for node in ray.nodes():
        labels = node.get("Labels") or {}
        if not node.get("Alive") or SLICE_NAME not in labels or node["NodeID"] in draining:
            continue
        node_id = node["NodeID"]
        by_slice.setdefault(labels[SLICE_NAME], []).append(
            HostView(
                node_id=node_id,
                slice_name=labels[SLICE_NAME],
                worker_id=int(labels.get(WORKER_ID, -1)),
                labels=labels,
                total=node.get("Resources") or {},
                available=available.get(node_id, {}),
                holders=tuple(holders.get(node_id, ())),
            )
        )
    return [
        SliceView(name, tuple(sorted(hosts, key=lambda h: h.worker_id))) for name, hosts in sorted(by_slice.items())
    ]


# pragma: no mutate end
# ---------------------------------------------------------------------------- reservation


@dataclass
class SliceReservation:
    """One whole slice, held by a placement group with one bundle per host.

    Bundle i is pinned to TPU worker i of `slice_name`, so rank 0 of a gang scheduled
    with `strategy(0)` runs on TPU worker 0 (where JAX expects its coordinator)."""

    slice_name: str
    placement_group: PlacementGroup
    bundle_indices: list[int]
    node_ids: list[str]  # node of bundle i
    selector: dict[str, str]  # the fallback selector that matched
    selector_index: int
    topology: str
    chips_per_host: int
    labels: dict[str, str] = field(default_factory=dict)
    waited_s: float = 0.0
    _released: bool = field(default=False, repr=False)

    @property
    def hosts(self) -> int:
        return len(self.bundle_indices)

    # pragma: no mutate start (Ray calls: covered by the real-cluster tests in test_slices.py)
    def strategy(self, bundle_index: int | None = None) -> PlacementGroupSchedulingStrategy:
        """A scheduling strategy for a task/actor in bundle `bundle_index` (any bundle if None)."""
        return PlacementGroupSchedulingStrategy(
            placement_group=self.placement_group,
            placement_group_bundle_index=-1 if bundle_index is None else bundle_index,
            placement_group_capture_child_tasks=True,
        )

    def label_selector(self) -> dict[str, str]:
        """A label selector for this slice alone, for APIs that take a selector rather than a
        placement group (e.g. a Serve deployment's ray_actor_options)."""
        return {SLICE_NAME: self.slice_name}

    def bundle_label_selectors(self) -> list[dict[str, str]]:
        """Per-host selectors (slice + worker id), e.g. for Serve's
        placement_group_bundle_label_selector after release()."""
        return [{SLICE_NAME: self.slice_name, WORKER_ID: str(i)} for i in self.bundle_indices]

    def release(self) -> None:
        """Give the slice back. Idempotent."""
        if not self._released:
            self._released = True
            remove_placement_group(self.placement_group)

    def __enter__(self) -> SliceReservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # pragma: no mutate end


def _normalise_selectors(selectors: Sequence[Selector] | None, accelerator_type: str | None) -> list[dict[str, str]]:
    chain = [dict(s) for s in (selectors or [{}])]
    if accelerator_type:
        # Selectors that name no accelerator inherit the requested one.
        chain = [{ACCELERATOR_TYPE: accelerator_type, **s} for s in chain]
    return chain


def candidates(
    views: Sequence[SliceView], selector: Selector, topology: str, hosts: int, chips_per_host: int
) -> list[SliceView]:
    out = []
    for view in views:
        if len(view.hosts) != hosts or view.topology != topology:
            continue  # wrong shape, or a host is down (preempted, restarting)
        if any(h.tpu_total != chips_per_host for h in view.hosts):
            continue
        if all(label_matches(selector, h.labels) for h in view.hosts):
            out.append(view)
    return out


def choose_slice(
    views: Sequence[SliceView],
    chain: Sequence[Selector],
    topology: str,
    hosts: int,
    chips_per_host: int,
    skip: Set[str] = frozenset(),
) -> tuple[int, SliceView] | None:
    """The slice reserve_slice asks Ray for: the first selector of the chain that has a fully
    free slice of the shape wins, and within it the first such slice by name. Slices named
    in `skip` are passed over. None when no selector has one (then reserve_slice waits)."""
    for index, selector in enumerate(chain):
        for view in candidates(views, selector, topology, hosts, chips_per_host):
            if view.free and view.name not in skip:
                return index, view
    return None


# pragma: no mutate start (Ray's placement group table: covered by test_slices.py)
def _node_of_bundles(pg: PlacementGroup) -> list[str]:
    info = ray.util.placement_group_table(pg)
    mapping = info.get("bundles_to_node_id") or {}
    return [mapping.get(i, "") for i in range(len(pg.bundle_specs))]


# pragma: no mutate end
def reserve_slice(
    topology: str,
    *,
    hosts: int,
    chips_per_host: int,
    selectors: Sequence[Selector] | None = None,
    accelerator_type: str | None = None,
    deadline_s: float = 300.0,
    bundle_resources: Mapping[str, float] | None = None,
    name: str = "",
    lifetime: str | None = None,
    attempt_timeout_s: float = 5.0,
    poll_s: float = 0.25,
) -> SliceReservation:
    """Reserve one whole, fully free TPU slice; never a gang split over slices.

    topology/hosts/chips_per_host: the slice shape (from the caller's config: 4x4, 4, 4).
    selectors: ordered fallback chain of label selectors, e.g.
        [{"ray.io/accelerator-type": "TPU-V6E", "ray.io/market-type": "spot"},
         {"ray.io/accelerator-type": "TPU-V6E", "ray.io/market-type": "on-demand"},
         {"ray.io/accelerator-type": "TPU-V5LITEPOD"}]
      The first selector that has a fully free slice wins; None means any slice.
    accelerator_type: added to selectors that do not name one.
    bundle_resources: extra resources per bundle (e.g. {"CPU": 1}) on top of the chips.
    deadline_s: after this, raise SliceUnavailableError describing every slice seen.
    attempt_timeout_s: how long one chosen slice may take to be granted before we
      release it and look again (the free-resource view lags a little behind).
    """
    chain = _normalise_selectors(selectors, accelerator_type)
    bundle = {"TPU": float(chips_per_host), **(bundle_resources or {})}
    start = time.monotonic()
    deadline = start + deadline_s
    recently_failed: dict[str, float] = {}  # slice -> monotonic time we gave it up
    views: list[SliceView] = []
    while True:
        views = slice_inventory()
        now = time.monotonic()
        # A slice whose reservation just failed sits out a couple of attempts.
        resting = {name for name, at in recently_failed.items() if now - at <= 2 * attempt_timeout_s}
        choice = choose_slice(views, chain, topology, hosts, chips_per_host, skip=resting)
        if choice is not None:
            index, view = choice
            selector = chain[index]
            pg = placement_group(
                [dict(bundle) for _ in range(hosts)],
                strategy="STRICT_SPREAD",
                name=name,
                lifetime=lifetime,
                # Both keys per bundle: the slice keeps the gang on one slice, the worker
                # id makes bundle i = TPU worker i.
                bundle_label_selector=[{**selector, SLICE_NAME: view.name, WORKER_ID: str(i)} for i in range(hosts)],
            )
            # ray.wait on pg.ready(): PlacementGroup.wait truncates fractional timeouts.
            wait = max(min(attempt_timeout_s, deadline - time.monotonic()), 0.05)
            ready, _ = ray.wait([pg.ready()], timeout=wait)
            if ready:
                return SliceReservation(
                    slice_name=view.name,
                    placement_group=pg,
                    bundle_indices=list(range(hosts)),
                    node_ids=_node_of_bundles(pg),
                    selector=selector,
                    selector_index=index,
                    topology=topology,
                    chips_per_host=chips_per_host,
                    labels=view.labels,
                    waited_s=time.monotonic() - start,
                )
            # Someone took a host between our read and the reservation: let go (a pending
            # placement group holds nothing, but it would grab the slice later) and retry.
            remove_placement_group(pg)
            recently_failed[view.name] = time.monotonic()
            continue
        if time.monotonic() >= deadline:
            break
        time.sleep(min(poll_s, max(deadline - time.monotonic(), 0)))
    raise SliceUnavailableError(_deadline_message(topology, hosts, chips_per_host, chain, views, deadline_s))


def _deadline_message(
    topology: str,
    hosts: int,
    chips_per_host: int,
    chain: Sequence[Selector],
    views: Sequence[SliceView],
    deadline_s: float,
) -> str:
    lines = [
        f"no free TPU slice of topology {topology} ({hosts} hosts x {chips_per_host} chips) within {deadline_s:g} s; "
        f"selectors tried in order: {', '.join(str(dict(s)) for s in chain)}"
    ]
    if not views:
        lines.append("slices seen: none (no node has a ray.io/tpu-slice-name label)")
    else:
        lines.append("slices seen:")
        for view in views:
            matching = [
                i for i, s in enumerate(chain) if view in candidates([view], s, topology, hosts, chips_per_host)
            ]
            why = (
                f"matches selector {matching[0]}"
                if matching
                else ("other shape" if view.topology != topology or len(view.hosts) != hosts else "no selector matches")
            )
            lines.append(f"  - {view.describe()} ({why})")
    return "\n".join(lines)


# pragma: no mutate start (fencing places placement groups: covered by the real-cluster tests)
def describe_slices() -> str:
    """A human-readable line per slice (for logs and error messages)."""
    return "\n".join(v.describe() for v in slice_inventory()) or "no TPU slices"


# ---------------------------------------------------------------------------- fencing


def head_resource(view: SliceView) -> str | None:
    """The slice's `TPU-<pod type>-head` resource (Ray puts it on TPU worker 0 only), or None
    when worker 0 is gone."""
    for host in view.hosts:
        for resource in host.total:
            if resource.startswith("TPU-") and resource.endswith("-head"):
                return resource
    return None


@dataclass
class SliceFence:
    """Placement groups holding the head resource of every slice but the ones kept open.

    Ray's SlicePlacementGroup (what JaxTrainer with use_tpu=True uses) first claims some
    slice's `TPU-<pod>-head` resource and then waits for that slice's hosts. It may claim the
    head of a slice that is partly busy or has lost a host, and wait there for ever while
    another slice is entirely free. While a fence stands, the only heads left to claim are
    those of the `kept` slices, which were fully free when the fence went up."""

    kept: list[str]
    fenced: list[str]
    placement_groups: list[PlacementGroup]
    waited_s: float = 0.0
    _released: bool = field(default=False, repr=False)

    def release(self) -> None:
        """Take the fence down. Idempotent."""
        if not self._released:
            self._released = True
            for pg in self.placement_groups:
                remove_placement_group(pg)

    def __enter__(self) -> SliceFence:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def fence_all_but_free_slices(
    topology: str,
    *,
    hosts: int,
    chips_per_host: int,
    num_slices: int = 1,
    selectors: Sequence[Selector] | None = None,
    accelerator_type: str | None = None,
    avoid: Sequence[str] = (),
    deadline_s: float = 300.0,
    fence_wait_s: float = 2.0,
    poll_s: float = 0.25,
    name: str = "tpuray-fence",
) -> SliceFence:
    """Keep `num_slices` fully free slices of the shape claimable, fence every other slice.

    Same slice choice as reserve_slice (all hosts alive and free, the selector chain in
    order); slices named in `avoid` (e.g. where the failed attempt ran: its view may still
    look healthy for a few seconds after a host died) come last. Every other slice that
    carries the same head resource gets a one-bundle placement group on that resource.
    Past the deadline with too few free slices: SliceUnavailableError, never a silent wait.
    """
    chain = _normalise_selectors(selectors, accelerator_type)
    start = time.monotonic()
    deadline = start + deadline_s
    avoided = set(avoid)
    views: list[SliceView] = []
    while True:
        views = slice_inventory()
        keep: list[SliceView] = []
        for selector in chain:
            free = [
                v
                for v in candidates(views, selector, topology, hosts, chips_per_host)
                if v.free and head_resource(v) is not None and v not in keep
            ]
            keep += sorted(free, key=lambda v: v.name in avoided)
        if len(keep) >= num_slices:
            keep = keep[:num_slices]
            break
        if time.monotonic() >= deadline:
            raise SliceUnavailableError(
                _deadline_message(topology, hosts, chips_per_host, chain, views, deadline_s)
                + f"\n(needed {num_slices} fully free slice(s) for a SlicePlacementGroup gang)"
            )
        time.sleep(min(poll_s, max(deadline - time.monotonic(), 0)))
    heads = {head_resource(v) for v in keep}
    kept = {v.name for v in keep}
    pgs: list[PlacementGroup] = []
    fenced: list[str] = []
    for view in views:
        head = head_resource(view)
        if view.name in kept or head not in heads:
            continue
        pgs.append(
            placement_group(
                [{head: 1.0}],
                name=f"{name}-{view.name}",
                bundle_label_selector=[{SLICE_NAME: view.name}],
            )
        )
        fenced.append(view.name)
    if pgs:
        # A fence that cannot be granted now stays pending: its head is held by someone
        # else, so no SlicePlacementGroup can claim it either.
        ray.wait([pg.ready() for pg in pgs], num_returns=len(pgs), timeout=fence_wait_s)
    return SliceFence(sorted(kept), fenced, pgs, waited_s=time.monotonic() - start)


# pragma: no mutate end
# ---------------------------------------------------------------------------- selectors for other APIs


def tpu_host_selector(
    accelerator_type: str | None = None, *, market_type: str | None = None, slice_name: str | None = None
) -> dict[str, str]:
    """A label selector for TPU hosts (a Serve replica's or a Data task's label_selector)."""
    selector: dict[str, str] = {}
    if accelerator_type:
        selector[ACCELERATOR_TYPE] = accelerator_type
    if market_type:
        selector[MARKET_TYPE] = market_type
    if slice_name:
        selector[SLICE_NAME] = slice_name
    return selector


def validate_selector(selector: Selector) -> dict[str, str]:
    """Check a label selector's syntax ("v", "!v", "in(a,b)", "!in(a,b)") and return a copy.

    Ray leaves a request with an unsatisfiable selector PENDING without an error; a typo
    should fail when the app is built instead."""
    out: dict[str, str] = {}
    for key, expr in selector.items():
        if not isinstance(key, str) or not key or not isinstance(expr, str) or not expr:
            raise ValueError(f"label selector entries must be non-empty strings, got {key!r}: {expr!r}")
        body = expr[1:] if expr.startswith("!") else expr
        if not body or (("(" in body or ")" in body) and not (body.startswith("in(") and body.endswith(")"))):
            raise ValueError(f"label selector value {expr!r} for {key!r}: use 'v', '!v', 'in(a,b)' or '!in(a,b)'")
        if body.startswith("in(") and not [v for v in body[3:-1].split(",") if v.strip()]:
            raise ValueError(f"label selector value {expr!r} for {key!r} lists no values")
        out[key] = expr
    return out


def fallback_strategy(selectors: Sequence[Selector]) -> list[dict[str, dict[str, str]]]:
    """Ray's `fallback_strategy` option for an ordered chain of soft fallback selectors."""
    return [{"label_selector": validate_selector(s)} for s in selectors]
