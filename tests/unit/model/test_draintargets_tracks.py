"""Target sets: normalize, meet, join and within."""

from __future__ import annotations

from nodeagent.model.draintargets.tracks import (
    join_targets,
    meet_targets,
    normalize_targets,
    targets_within,
)
from tests.unit.model.test_draintargets import DS, POSTGRES, D, e


def test_target_algebra() -> None:
    pg = e(D, 3000, POSTGRES)
    assert normalize_targets([pg, e(D, 5000), e(D, 1000)]) == (e(D, 5000), e(D, 5000, POSTGRES))
    assert meet_targets([e(D, 5000)], [pg]) == (pg,)
    assert meet_targets([e(D, 5000)], [e(DS, 1)]) == ()
    assert join_targets([e(D, 5000)], [e(D, 7000, POSTGRES), e(DS, 1)]) == (
        e(D, 5000),
        e(D, 7000, POSTGRES),
        e(DS, 1),
    )
    assert targets_within([pg], [e(D, 3000)])
    assert not targets_within([e(D, 3000)], [pg])
    assert targets_within([], [])
