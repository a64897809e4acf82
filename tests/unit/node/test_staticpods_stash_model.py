"""Property test: whatever sequence of moves, restores and outside writes and deletes happens,
no manifest is lost or duplicated, and restoring never replaces a file."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from nodeagent.model.staticpods.journal import State
from nodeagent.node.staticpods.stash import Stash
from tests.unit.node.staticpod_fixtures import OWNER, manifests, pod_yaml

NAMES = ["etcd.yaml", "kube-apiserver.yaml", "scheduler.json"]


class StashMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.base = Path(tempfile.mkdtemp(prefix="stash-model-"))
        self.m = self.base / "manifests"
        self.m.mkdir()
        self.stash = Stash(self.m, self.base / "stash", boot_id="b")
        self.stash.open()
        self.serial = 0
        self.expected: Counter[bytes] = Counter()  # every manifest that must exist somewhere

    def teardown(self) -> None:
        self.stash.close()
        shutil.rmtree(self.base)

    @rule(name=st.sampled_from(NAMES))
    def someone_writes_a_manifest(self, name: str) -> None:
        path = self.m / name
        if path.exists():
            return
        self.serial += 1
        data = pod_yaml(name.split(".")[0], f"# version {self.serial}\n")
        path.write_bytes(data)
        self.expected[data] += 1

    @rule(name=st.sampled_from(NAMES))
    def someone_deletes_a_manifest(self, name: str) -> None:
        path = self.m / name
        if path.exists():
            self.expected[path.read_bytes()] -= 1
            path.unlink()

    @rule(name=st.sampled_from(NAMES))
    def move_aside(self, name: str) -> None:
        found = manifests(self.m).get(name)
        if found is not None:
            self.stash.stash(found, OWNER)
            assert not (self.m / name).exists()

    @rule()
    def restore(self) -> None:
        before = {p.name: p.read_bytes() for p in self.m.iterdir()}
        results = self.stash.restore_all()
        after = {p.name: p.read_bytes() for p in self.m.iterdir()}
        for name, data in before.items():
            assert after[name] == data, "restoring replaced a file"
        for r in results:
            assert r.outcome in ("restored", "conflict"), r
            if r.outcome == "conflict":
                assert r.path.name in after
                assert hashlib.sha256(after[r.path.name]).hexdigest() != r.entry.sha256
        # of several versions moved aside under one name, the newest went back
        stashed = {
            item.entry.id: item.entry.original_name for item in self.stash.contents().entries
        }
        for r in results:
            if r.outcome == "restored" and r.path.name not in before:
                older = [i for i, name in stashed.items() if name == r.path.name]
                assert all(i < r.entry.id for i in older), "an older version went back"

    @invariant()
    def nothing_lost_nothing_duplicated(self) -> None:
        present: Counter[bytes] = Counter(p.read_bytes() for p in self.m.iterdir())
        listing = self.stash.contents()
        assert listing.problems == ()
        for item in listing.entries:
            assert item.entry.state is State.STASHED
            present[item.payload.read_bytes()] += 1
        assert present == +self.expected


StashMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestStashModel = StashMachine.TestCase
