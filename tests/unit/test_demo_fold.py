"""The demo's lines folded to a terminal's width."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st

from nodeagent_testbed.demo.wrap import Folded, fold


def test_continuations_hang_under_the_text_they_continue() -> None:
    stamped = (
        "[  0.1s]   eviction of default/api-758548b656-9hlzd refused (429, "
        "PodDisruptionBudget); retrying"
    )
    assert fold(stamped, 80) == [
        "[  0.1s]   eviction of default/api-758548b656-9hlzd refused (429,",
        "           PodDisruptionBudget); retrying",
    ]
    labelled = (
        "workload              Deployment default/web: 4 replicas, standard, "
        "PDB maxUnavailable 1, Ready 1s after start"
    )
    folded = fold(labelled, 80)
    assert folded[0].startswith("workload              Deployment")
    assert all(line.startswith(" " * 22) and line[22] != " " for line in folded[1:]), folded
    assert fold("short", 80) == ["short"]


words = st.text(alphabet="abcdefghij()[]:;,.0123456789", min_size=1, max_size=30)


@given(
    st.lists(words, min_size=1, max_size=40),
    st.sampled_from(["", "[ 12.3s] ", "label     ", "    "]),
    st.integers(min_value=20, max_value=120),
)
def test_folded_lines_fit_and_keep_every_word_in_order(
    text: list[str], head: str, width: int
) -> None:
    line = head + " ".join(text)
    folded = fold(line, width)
    assert all(len(f) <= width for f in folded), folded
    # (a word longer than a line is split, so compare the characters)
    assert "".join("".join(folded).split()) == "".join(line.split())


def test_the_stream_folds_what_print_writes() -> None:
    out = io.StringIO()
    stream = Folded(out, 40)
    print("[  1.0s] one two three four five six seven eight nine", file=stream, flush=True)
    print("end", file=stream)
    assert out.getvalue() == (
        "[  1.0s] one two three four five six\n         seven eight nine\nend\n"
    )


def test_an_indented_row_continues_under_its_second_column() -> None:
    row = "  Default<=1000000000      batch-report (100), web x4 (1000), api x3 (100000), db x2"
    assert fold(row, 80) == [
        "  Default<=1000000000      batch-report (100), web x4 (1000), api x3 (100000),",
        "                           db x2",
    ]
