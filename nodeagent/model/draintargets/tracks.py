"""Target sets: a drainTargets list as tracks ``(podType, podSelector)``, each with the highest
priority it targets, and what the resolution does with them (see the package docstring)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

from nodeagent.model.drainplan import DrainPlanEntry, PodType
from nodeagent.model.selectors import LabelSelector

__all__ = [
    "Track",
    "Tracks",
    "coverage",
    "join",
    "join_targets",
    "meet",
    "meet_targets",
    "normalize_targets",
    "plan_targets",
    "plan_tracks",
    "targets_within",
    "to_entries",
    "to_tracks",
    "track_order",
    "within",
]

Track = tuple[PodType, LabelSelector | None]
Tracks = dict[Track, int]


def coverage(tracks: Mapping[Track, int], track: Track) -> int | None:
    """Highest priority ``tracks`` reach for pods of ``track``: its own entry or the plain one."""
    plain = tracks.get((track[0], None))
    if track[1] is None:
        return plain
    own = tracks.get(track)
    if own is None:
        return plain
    return own if plain is None else max(own, plain)


def to_tracks(entries: Iterable[DrainPlanEntry]) -> Tracks:
    exact: Tracks = {}
    for e in entries:
        key = (e.pod_type, e.pod_selector)
        exact[key] = max(exact.get(key, e.pod_priority), e.pod_priority)
    return {t: p for t in exact if (p := coverage(exact, t)) is not None}


def within(a: Mapping[Track, int], b: Mapping[Track, int]) -> bool:
    for t, p in a.items():
        c = coverage(b, t)
        if c is None or c < p:
            return False
    return True


def meet(sets: Sequence[Mapping[Track, int]]) -> Tracks:
    if not sets:
        return {}
    tracks = {t for s in sets for t in s}
    out: Tracks = {}
    for t in tracks:
        covs = [coverage(s, t) for s in sets]
        if all(c is not None for c in covs):
            out[t] = min(c for c in covs if c is not None)
    return out


def join(sets: Iterable[Mapping[Track, int]]) -> Tracks:
    materialized = list(sets)
    tracks = {t for s in materialized for t in s}
    out: Tracks = {}
    for t in tracks:
        covs = [c for s in materialized if (c := coverage(s, t)) is not None]
        out[t] = max(covs)
    return out


def track_order(item: tuple[Track, int]) -> tuple[int, int, str, int]:
    (pod_type, selector), priority = item
    # Plain track first, then selector tracks: the order of the KEP's drainTargets examples.
    if selector is None:
        return (pod_type.rank, 0, "", priority)
    return (pod_type.rank, 1, selector.to_string(), priority)


def to_entries(tracks: Mapping[Track, int]) -> tuple[DrainPlanEntry, ...]:
    return tuple(
        DrainPlanEntry(sel, prio, pod_type)
        for (pod_type, sel), prio in sorted(tracks.items(), key=track_order)
    )


def normalize_targets(entries: Iterable[DrainPlanEntry]) -> tuple[DrainPlanEntry, ...]:
    """One entry per (podType, podSelector), selector entries raised to the plain entry of their
    type, ordered by type, plain entry first, then by selector."""
    return to_entries(to_tracks(entries))


def targets_within(inner: Iterable[DrainPlanEntry], outer: Iterable[DrainPlanEntry]) -> bool:
    """Whether ``outer`` targets every pod ``inner`` targets (judged track by track)."""
    return within(to_tracks(inner), to_tracks(outer))


def meet_targets(*sets: Iterable[DrainPlanEntry]) -> tuple[DrainPlanEntry, ...]:
    """The least powerful targets: within every one of ``sets``."""
    return to_entries(meet([to_tracks(s) for s in sets]))


def join_targets(*sets: Iterable[DrainPlanEntry]) -> tuple[DrainPlanEntry, ...]:
    """The targets covering every one of ``sets``."""
    return to_entries(join(to_tracks(s) for s in sets))


@lru_cache(maxsize=1024)
def plan_tracks(plan: tuple[DrainPlanEntry, ...], index: int) -> Tracks:
    """The tracks a maintenance wants at entry ``index`` of ``plan``. Remembered: every decision
    asks it of every maintenance's plan again (the result is shared: never mutated)."""
    reached = plan[: index + 1]
    reached_types = {e.pod_type for e in reached}
    exact = to_tracks(reached)
    tracks = {(e.pod_type, e.pod_selector) for e in plan if e.pod_type in reached_types}
    # Selector tracks of a reached type show up as soon as a plain entry covers them, as in the
    # KEP progression, whose first drainTargets are Default<=1000 and Default{app=postgres}<=1000.
    return {t: p for t in tracks if (p := coverage(exact, t)) is not None}


def plan_targets(plan: Sequence[DrainPlanEntry], index: int) -> tuple[DrainPlanEntry, ...]:
    """The drainTargets a maintenance wants at entry ``index`` of its effective plan."""
    if not 0 <= index < len(plan):
        raise IndexError(f"entry {index} is outside a drain plan of {len(plan)} entries")
    return to_entries(plan_tracks(tuple(plan), index))
