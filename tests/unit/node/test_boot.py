from __future__ import annotations

from pathlib import Path

import pytest

from nodeagent.model import shutdown as model
from nodeagent.node.boot import read_boot_id

KERNEL = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


def fake_proc(tmp_path: Path, comm: str, start: int, kernel: str = KERNEL) -> Path:
    (tmp_path / "sys/kernel/random").mkdir(parents=True)
    (tmp_path / "sys/kernel/random/boot_id").write_text(kernel + "\n")
    (tmp_path / "1").mkdir()
    (tmp_path / "1/comm").write_text(comm + "\n")
    fields = ["S"] + ["0"] * 18 + [str(start)] + ["0"] * 30
    (tmp_path / "1/stat").write_text(f"1 ({comm} with spaces) " + " ".join(fields))
    return tmp_path


def test_init_start_time_tells_userspace_boots_apart(tmp_path: Path) -> None:
    a = read_boot_id(fake_proc(tmp_path / "a", "systemd", 1234))
    b = read_boot_id(fake_proc(tmp_path / "b", "systemd", 98765))
    assert a == KERNEL + "-4d2"
    assert a != b and model.split_boot_id(a) == (KERNEL, "4d2")
    assert model.split_boot_id(b) == (KERNEL, "181cd")


def test_without_an_init_only_the_kernel_id_counts(tmp_path: Path) -> None:
    assert read_boot_id(fake_proc(tmp_path, "nodeagent", 1234)) == KERNEL


def test_the_kernel_part_is_what_the_kubelet_reports(tmp_path: Path) -> None:
    """The kubelet reports /proc/sys/kernel/random/boot_id trimmed, dashes and all: the
    maintenance's boot-id label carries exactly that."""
    boot = read_boot_id(fake_proc(tmp_path, "systemd", 1234))
    labels = model.boot_labels(boot)
    assert labels["nodeagent.io/boot-id"] == KERNEL
    assert labels["nodeagent.io/userspace-boot"] == "4d2"


def test_a_boot_id_not_in_the_kernels_form_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="not a boot id"):
        read_boot_id(fake_proc(tmp_path, "systemd", 1, kernel=KERNEL.replace("-", "")))


def test_this_machine() -> None:
    kernel = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert model.split_boot_id(read_boot_id()) is not None
    assert read_boot_id().startswith(kernel)
