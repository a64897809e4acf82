"""`nodeagent plan` without a cluster: what is a file and what a name, reading the one
NodeMaintenance of a file, and the one-line errors (exit 2) told before any connection."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from nodeagent import cli
from nodeagent.controllers.nodemaintenance.preview import (
    PlanError,
    is_file_argument,
    plan_command,
    read_maintenance,
)

VALID = """
apiVersion: nodeagent.io/v1alpha1
kind: NodeMaintenance
metadata: {name: kernel}
spec:
  nodeSelector:
    nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [node-1]}]
"""
BACKWARDS = (
    VALID
    + """  drainPlan:
    - {podPriority: 10, podType: DaemonSet}
    - {podPriority: 5}
"""
)


def test_file_or_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kernel").write_text(VALID)
    assert is_file_argument("-")
    assert is_file_argument("kernel")  # a file of that name is there
    assert not is_file_argument("kernel-2")
    assert is_file_argument("nm.yaml.d/x.yaml")
    assert is_file_argument("Kernel.yaml")  # not a name: no capitals in object names
    assert not is_file_argument("kernel.example.com")


def test_reading_the_one_maintenance_of_a_file() -> None:
    assert read_maintenance(VALID, "f")["metadata"]["name"] == "kernel"
    assert read_maintenance("---\n" + VALID + "\n---\n", "f")["kind"] == "NodeMaintenance"
    for text, message in [
        (VALID + "---\n" + VALID, "f: holds 2 documents; give one NodeMaintenance"),
        ("", "f: holds 0 documents; give one NodeMaintenance"),
        ("[1, 2]", "f: not a NodeMaintenance object"),
        ("kind: Pod", "f: kind is 'Pod', not NodeMaintenance"),
        (VALID.replace("v1alpha1", "v1"), "f: apiVersion is 'nodeagent.io/v1', not "),
        ("a: [", "f: not valid YAML: "),
    ]:
        with pytest.raises(PlanError) as raised:
            read_maintenance(text, "f")
        assert str(raised.value).startswith(message)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            BACKWARDS,
            "nodeagent plan: NodeMaintenance kernel: spec.drainPlan[1]: podType Default comes "
            "after podType DaemonSet (entry 0)",
        ),
        ("kind: Pod\n", "nodeagent plan: stdin: kind is 'Pod', not NodeMaintenance"),
    ],
)
def test_an_invalid_file_is_one_line_and_exit_2_before_any_connection(
    text: str, expected: str
) -> None:
    out, err = io.StringIO(), io.StringIO()
    # the kubeconfig does not exist: the spec is judged before it is looked for
    status = plan_command(
        "-", "/nonexistent/kubeconfig", "text", out=out, err=err, stdin=io.StringIO(text)
    )
    assert status == 2 and out.getvalue() == ""
    assert err.getvalue().startswith(expected) and err.getvalue().count("\n") == 1


def test_a_missing_kubeconfig_is_one_line_and_exit_2(tmp_path: Path) -> None:
    f = tmp_path / "nm.yaml"
    f.write_text(VALID)
    out, err = io.StringIO(), io.StringIO()
    assert plan_command(str(f), str(tmp_path / "nope"), "json", out=out, err=err) == 2
    assert err.getvalue() == (
        f"nodeagent plan: cannot read {tmp_path / 'nope'}: No such file or directory\n"
    )


def test_an_unreadable_file(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert plan_command(str(tmp_path / "x.yaml"), None, "text", out=out, err=err) == 2
    assert (
        err.getvalue()
        == f"nodeagent plan: {tmp_path / 'x.yaml'}: cannot read: No such file or directory\n"
    )


def test_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    args = cli.build_parser().parse_args(["plan", "kernel", "--kubeconfig", "k", "-o", "json"])
    assert (args.target, args.kubeconfig, args.output) == ("kernel", "k", "json")
    assert cli.build_parser().parse_args(["plan", "-"]).output == "text"
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["plan", "x", "-o", "yaml"])
    capsys.readouterr()
