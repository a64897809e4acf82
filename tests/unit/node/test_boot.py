from __future__ import annotations

from pathlib import Path

from nodeagent.node.boot import read_boot_id

KERNEL = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


def fake_proc(tmp_path: Path, comm: str, start: int) -> Path:
    (tmp_path / "sys/kernel/random").mkdir(parents=True)
    (tmp_path / "sys/kernel/random/boot_id").write_text(KERNEL + "\n")
    (tmp_path / "1").mkdir()
    (tmp_path / "1/comm").write_text(comm + "\n")
    fields = ["S"] + ["0"] * 18 + [str(start)] + ["0"] * 30
    (tmp_path / "1/stat").write_text(f"1 ({comm} with spaces) " + " ".join(fields))
    return tmp_path


def test_init_start_time_tells_userspace_boots_apart(tmp_path: Path) -> None:
    a = read_boot_id(fake_proc(tmp_path / "a", "systemd", 1234))
    b = read_boot_id(fake_proc(tmp_path / "b", "systemd", 98765))
    assert a == KERNEL.replace("-", "") + "-4d2"
    assert a != b and a.split("-")[0] == b.split("-")[0]


def test_without_an_init_only_the_kernel_id_counts(tmp_path: Path) -> None:
    assert read_boot_id(fake_proc(tmp_path, "nodeagent", 1234)) == KERNEL.replace("-", "")


def test_this_machine() -> None:
    assert len(read_boot_id().split("-")[0]) == 32
