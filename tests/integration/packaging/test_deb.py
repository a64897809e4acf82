"""The Debian package from packaging/debian/build-deb: its control data and contents (built for
the one Python that builds it, the distribution's own; the manual page generated from the
argument parser, every subcommand in it), lintian without an error or a warning that is not
overridden with a reason, and, in a Debian bookworm container (systemd-nspawn, as the
end-to-end tests), an installation without network, the enabled unit, upgrades, removal and
purge, and the agent running from it."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import hashlib
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from nodeagent import config as agent_config
from nodeagent.cli import TESTBED_COMMANDS, build_parser
from nodeagent.manifests import crd_stream
from nodeagent_testbed.nspawn import Container
from nodeagent_testbed.sim.cluster import SimCluster, kubeconfig_dict
from tests.e2e.container import require_tools
from tests.simutil import install_crds

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "packaging" / "debian" / "build-deb"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
UNIT = "/lib/systemd/system/nodeagent.service"
WANTS = "/etc/systemd/system/multi-user.target.wants/nodeagent.service"
MANPAGE = "/usr/share/man/man1/nodeagent.1.gz"
# the Python that builds the package in these tests, and so the one it is for (build-deb's
# default DEB_PYTHONS)
PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("dpkg-deb") is None:
        pytest.skip("dpkg-deb is not installed")
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run(
        [str(BUILD), str(out)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHON": sys.executable},
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    path = Path(r.stdout.strip().splitlines()[-1])
    assert path.parent == out and path.is_file()
    return path


@pytest.fixture(scope="module")
def unpacked(deb: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package's files under root/, its control files under root/DEBIAN."""
    root = tmp_path_factory.mktemp("unpacked")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    subprocess.run(["dpkg-deb", "-e", str(deb), str(root / "DEBIAN")], check=True)
    return root


def field(deb: Path, name: str) -> str:
    return subprocess.run(
        ["dpkg-deb", "-f", str(deb), name], capture_output=True, text=True, check=True
    ).stdout.strip()


def wheels(unpacked: Path) -> list[Path]:
    return sorted((unpacked / "usr/share/nodeagent/wheels").glob("*.whl"))


# --- control data and contents ---------------------------------------------------------------


def test_control_fields(deb: Path, unpacked: Path) -> None:
    assert field(deb, "Package") == "nodeagent"
    assert re.fullmatch(r"\d+(\.\d+)*", VERSION), "teach this test PEP 440 -> Debian versions"
    assert field(deb, "Version") == VERSION
    assert deb.name == f"nodeagent_{VERSION}_{field(deb, 'Architecture')}.deb"
    compiled = [w for w in wheels(unpacked) if not w.name.endswith("-any.whl")]
    arch = subprocess.run(
        ["dpkg", "--print-architecture"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert field(deb, "Architecture") == (arch if compiled else "all")
    depends = [d.strip() for d in field(deb, "Depends").split(",")]
    assert "python3 (>= 3.11)" in depends or (
        f"python3 (>= {sys.version_info.major}.{sys.version_info.minor})" in depends
    )
    for dep in ("python3-venv", "systemd", "dbus"):
        assert dep in depends
    if any("-cp3" in w.name and "-abi3-" not in w.name for w in compiled):
        # cp3XY-cp3XY wheels: for the one Python that built them, the distribution's own
        major, minor = sys.version_info[:2]
        assert f"python3 (>= {major}.{minor})" in depends
        assert f"python3 (<< {major}.{minor + 1})" in depends
    shipped_kib = sum(w.stat().st_size for w in wheels(unpacked)) // 1024
    assert int(field(deb, "Installed-Size")) > 2 * shipped_kib  # counts the virtualenv
    assert field(deb, "Maintainer") and field(deb, "Description")


def test_each_compiled_wheel_once_for_the_distributions_python(unpacked: Path) -> None:
    """build-deb's default: the package is for the Python that builds it (README.Debian, "The
    distribution's Python"): one wheel a project, none for another CPython."""
    names = [_norm(w.name.split("-")[0]) for w in wheels(unpacked)]
    assert len(names) == len(set(names)), "a project bundled twice"
    tag = "cp" + PY.replace(".", "")
    for w in wheels(unpacked):
        py_tag, abi_tag = w.name.split("-")[-3:-1]
        if abi_tag not in ("none", "abi3"):
            assert tag in py_tag.split("."), w.name


@pytest.mark.parametrize("python", [PY])
def test_the_bundled_wheels_install_offline_on_each_python_it_allows(
    unpacked: Path, python: str, tmp_path: Path
) -> None:
    # what the postinst's `pip install --no-index --require-hashes` would pick on that CPython
    # (Debian 12, Ubuntu 24.04, Debian 13), resolved here without installing
    machine = platform.machine()
    platforms = [f"manylinux_2_{m}_{machine}" for m in range(5, 41)]
    platforms += [f"manylinux2014_{machine}", f"linux_{machine}"]
    tag = "cp" + python.replace(".", "")
    share = unpacked / "usr/share/nodeagent"
    r = subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--dry-run", "--quiet",
            "--disable-pip-version-check", "--ignore-installed", "--no-index",
            "--find-links", str(share / "wheels"), "--require-hashes",
            "-r", str(share / "requirements.txt"), "--only-binary=:all:",
            "--implementation", "cp", "--python-version", python,
            "--abi", tag, "--abi", "abi3", "--abi", "none",
            *(a for p in platforms for a in ("--platform", p)),
            "--target", str(tmp_path / "target"),
        ],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]


def test_contents(deb: Path) -> None:
    listing = subprocess.run(
        ["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    entries = {}
    for line in listing:
        mode, owner, _size, _date, _time, path, *link = line.split(maxsplit=6)
        assert owner == "root/root", line
        entries[path.removeprefix(".")] = (mode, link)
    for path in (
        UNIT,
        "/etc/nodeagent/config.yaml",
        "/usr/share/nodeagent/requirements.txt",
        "/usr/share/doc/nodeagent/copyright",
        "/usr/share/doc/nodeagent/changelog.gz",
        "/usr/share/doc/nodeagent/examples/logind.conf.d/zz-nodeagent.conf",
        MANPAGE,
    ):
        assert path in entries, path
        assert entries[path][0] == "-rw-r--r--", (path, entries[path])
    mode, link = entries["/usr/bin/nodeagent"]
    assert mode.startswith("l") and link == ["-> /opt/nodeagent/bin/nodeagent"]
    # the virtualenv is built by the postinst, never shipped; no bytecode, no build leftovers
    assert not [p for p in entries if p.startswith("/opt")]
    assert not [p for p in entries if "__pycache__" in p or p.endswith(".pyc")]


def packaged_subcommands() -> list[str]:
    """Every subcommand of the packaged nodeagent, nested ones as "manifests crds": the
    parser's, but the test bed's commands only as the one-word stubs the package has."""
    from tools.manpage import subcommands

    return [
        " ".join(words)
        for words, _, _ in subcommands(build_parser())
        if len(words) == 1 or words[0] not in TESTBED_COMMANDS
    ]


def test_manual_page_lists_every_subcommand(unpacked: Path) -> None:
    """nodeagent(1), generated from the argument parser: a section for each subcommand with its
    usage and options, and man reads it without a warning."""
    page = gzip.decompress((unpacked / MANPAGE.lstrip("/")).read_bytes()).decode()
    assert page.startswith('.\\" Generated by tools/manpage.py')
    assert ".TH NODEAGENT 1 " in page
    sections = re.findall(r'^\.SS "(.*)"$', page, re.MULTILINE)
    want = [words.replace("-", "\\-") for words in packaged_subcommands()]
    assert sections == want
    assert {"run", "plan", "reboot", "restore\\-static\\-pods", "manifests crds"} <= set(want)
    for option in ("\\-\\-config", "\\-\\-log\\-level", "\\-\\-kubeconfig", "\\-\\-dry\\-run"):
        assert option in page, option
    if shutil.which("man"):
        r = subprocess.run(
            ["man", "--warnings", "-l", str(unpacked / MANPAGE.lstrip("/"))],
            capture_output=True, text=True, check=False, timeout=60,
            env={**os.environ, "MANWIDTH": "80"},
        )  # fmt: skip
        assert r.returncode == 0 and not r.stderr.strip(), r.stderr


def test_lintian_is_clean(deb: Path) -> None:
    """lintian (Debian's own checks; scripts/setup installs it): no error and no warning, but
    those overridden in lintian-overrides, each with a comment that says why."""
    if shutil.which("lintian") is None:
        if os.environ.get("CI"):
            pytest.fail("lintian is not installed (scripts/setup installs it)", pytrace=False)
        pytest.skip("lintian is not installed (scripts/setup installs it)")
    r = subprocess.run(
        ["lintian", "--fail-on", "error,warning", "--tag-display-limit", "0", str(deb)],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    found = [line for line in r.stdout.splitlines() if re.match(r"[EW]: ", line)]
    assert r.returncode == 0 and not found, r.stdout + r.stderr
    # every override says why, in the comment just above it
    lines = (ROOT / "packaging/debian/lintian-overrides").read_text().splitlines()
    for i, line in enumerate(lines):
        if line and not line.startswith("#"):
            assert i > 0 and lines[i - 1].startswith("#"), f"override without a reason: {line}"


# what the node agent's package must never carry: its test bed (testbed/, nodeagent-testbed)
TESTBED = re.compile(
    r"nodeagent[_-]testbed|(^|/)nodeagent/(sim|demo)/|fake_?logind|logind/fake\.py"
)


def test_carries_the_node_agent_only(deb: Path, unpacked: Path) -> None:
    """No simulated cluster, demo or simulated logind: not as files, not in a wheel."""
    listing = subprocess.run(
        ["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True
    ).stdout
    assert not [line for line in listing.splitlines() if TESTBED.search(line)]
    names = [_norm(w.name.split("-")[0]) for w in wheels(unpacked)]
    assert "nodeagent-testbed" not in names and "nodeagent" in names
    (ours,) = [w for w in wheels(unpacked) if _norm(w.name.split("-")[0]) == "nodeagent"]
    with zipfile.ZipFile(ours) as z:
        files = z.namelist()
    assert "nodeagent/cli.py" in files and "nodeagent/app.py" in files
    assert not [f for f in files if TESTBED.search(f)]
    assert {f.split("/")[0] for f in files} == {"nodeagent", f"nodeagent-{VERSION}.dist-info"}


def test_files_are_the_projects(unpacked: Path) -> None:
    assert (unpacked / UNIT.lstrip("/")).read_text() == (
        ROOT / "systemd" / "nodeagent.service"
    ).read_text()
    template = unpacked / "usr/share/doc/nodeagent/examples/logind.conf.d/zz-nodeagent.conf"
    assert template.read_text() == (ROOT / "systemd/logind.conf.d/zz-nodeagent.conf").read_text()
    assert (unpacked / "etc/nodeagent/config.yaml").read_text() == (
        ROOT / "packaging/debian/config.yaml"
    ).read_text()
    assert (unpacked / "DEBIAN/conffiles").read_text().split() == ["/etc/nodeagent/config.yaml"]


def test_bundled_wheels_are_complete_and_pinned(unpacked: Path) -> None:
    # compiled dependencies come once per CPython the package allows: one project, several files
    found: dict[str, list[Path]] = {}
    for w in wheels(unpacked):
        found.setdefault(_norm(w.name.split("-")[0]), []).append(w)
    assert [w.name for w in found["nodeagent"]] == [f"nodeagent-{VERSION}-py3-none-any.whl"]
    # every runtime dependency of nodeagent (no extras) has its wheel
    for req in importlib.metadata.requires("nodeagent") or []:
        if "extra ==" in req:
            continue
        name = re.match(r"[A-Za-z0-9._-]+", req)
        assert name is not None
        assert _norm(name[0]) in found, req
    # requirements.txt pins exactly the bundled wheels, by hash: one line a project, a hash a file
    lines = [
        line
        for line in (unpacked / "usr/share/nodeagent/requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert len(lines) == len(found)
    for line in lines:
        m = re.fullmatch(r"(\S+)==(\S+)((?: --hash=sha256:[0-9a-f]{64})+)", line)
        assert m, line
        files = found[_norm(m[1])]
        assert {w.name.split("-")[1] for w in files} == {m[2]}
        listed = set(re.findall(r"[0-9a-f]{64}", m[3]))
        assert listed == {hashlib.sha256(w.read_bytes()).hexdigest() for w in files}


def test_maintainer_scripts(unpacked: Path) -> None:
    for name in ("postinst", "prerm", "postrm"):
        script = unpacked / "DEBIAN" / name
        assert os.access(script, os.X_OK), name
        assert script.read_text().startswith("#!/bin/sh\n")
        subprocess.run(["sh", "-n", str(script)], check=True)
        assert not re.search(r"@[A-Z_]+@", script.read_text()), f"{name}: unsubstituted"
    postinst = (unpacked / "DEBIAN/postinst").read_text()
    pip = postinst[postinst.index("-m pip install") : postinst.index("-r ")]
    for flag in ("--no-index", "--isolated", "--require-hashes"):
        assert flag in pip, flag
    assert "PIP_CONFIG_FILE=/dev/null" in postinst
    assert "/run/systemd/system" in postinst  # starts only where systemd runs
    assert f"VERSION={VERSION}\n" in postinst


def uncommented(text: str) -> str:
    """The file with every commented-out setting ("#key: value", and the indented "#  - ..."
    lines of a commented block under it) turned on."""
    out = []
    in_setting = False
    for line in text.splitlines():
        m = re.fullmatch(r"(\s*)#(\S.*|  +\S.*)", line)
        if m and (not m[2].startswith(" ") or in_setting):
            out.append(m[1] + m[2])
            in_setting = True
        else:
            out.append(line)
            in_setting = False
    return "\n".join(out) + "\n"


def test_shipped_config_documents_every_setting_with_its_default(
    unpacked: Path, tmp_path: Path
) -> None:
    shipped = unpacked / "etc/nodeagent/config.yaml"
    cfg = agent_config.load(shipped, env={})
    defaults = agent_config.Config()
    assert cfg == dataclasses.replace(
        defaults,
        kube=dataclasses.replace(defaults.kube, kubeconfig="/etc/nodeagent/kubeconfig"),
        leader=dataclasses.replace(defaults.leader, namespace="nodeagent-system"),
        # a node's credentials are for its node only (README.Debian)
        run_controllers=False,
        # inside the one directory the unit lets the agent write (ReadWritePaths=)
        static_pods=dataclasses.replace(
            defaults.static_pods, stash_dir=Path("/etc/kubernetes/manifests/.nodeagent-stash")
        ),
    )
    # turned on, every commented setting is valid and shows the default, except the examples
    full = tmp_path / "config.yaml"
    full.write_text(uncommented(shipped.read_text()))
    on = agent_config.load(full, env={})
    assert on == dataclasses.replace(
        cfg,
        node_name="node-1",
        shutdown=dataclasses.replace(
            defaults.shutdown,
            dbus_address="unix:path=/run/dbus/system_bus_socket",
            drain_plan=({"podType": "Default", "podPriority": 1000},),
        ),
        static_pods=dataclasses.replace(
            defaults.static_pods,
            manifest_dir=Path("/etc/kubernetes/manifests"),
            stash_dir=Path("/etc/kubernetes/manifests/.nodeagent-stash"),
        ),
        eviction=dataclasses.replace(
            defaults.eviction,
            annotate_interceptors=(
                agent_config.AnnotateInterceptor(
                    name="reschedule.couchbase.com",
                    pod_selector={"matchLabels": {"app": "couchbase"}},
                    annotation_key="cao.couchbase.com/reschedule",
                    annotation_value="true",
                ),
            ),
        ),
    )
    # and nothing is missing: every setting of every section is in the file
    raw = yaml.safe_load(full.read_text())

    def camel(name: str) -> str:
        head, *rest = name.split("_")
        return head + "".join(w.capitalize() for w in rest)

    for f in dataclasses.fields(agent_config.Config):
        assert camel(f.name) in raw, f.name
        section: object = f.default_factory  # a section's class; MISSING for plain settings
        if isinstance(section, type) and dataclasses.is_dataclass(section):
            for sub in dataclasses.fields(section):
                assert camel(sub.name) in (raw[camel(f.name)] or {}), f"{f.name}.{sub.name}"


# --- installed in a Debian container -----------------------------------------------------------


def nspawn(
    c: Container, *cmd: str, binds: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """Run a command in the container's file system, not booted, with no network at all (only
    a loopback device): whatever it installs cannot have come from the network."""
    args = ["systemd-nspawn", "--register=no", "--keep-unit", "--quiet", "--pipe"]
    args += ["--private-network", "-D", str(c.rootfs)]
    args += [f"--bind-ro={b}" for b in binds]
    return subprocess.run([*args, *cmd], capture_output=True, text=True, check=False, timeout=300)


def ok(c: Container, *cmd: str, binds: tuple[str, ...] = ()) -> str:
    r = nspawn(c, *cmd, binds=binds)
    assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}"
    return r.stdout


def dpkg_install(c: Container, deb: Path) -> str:
    return ok(c, "dpkg", "-i", f"/pkg/{deb.name}", binds=(f"{deb.parent}:/pkg",))


@pytest.fixture
def container(tmp_path: Path) -> Container:
    require_tools()
    return Container.copy_of_base(tmp_path, "nodeagent-deb")


@pytest.mark.e2e
def test_installs_offline_enables_the_unit_and_purges(deb: Path, container: Container) -> None:
    c = container
    dpkg_install(c, deb)

    assert "restore-static-pods" in ok(c, "/opt/nodeagent/bin/nodeagent", "--help")
    # on PATH, with the CRDs as package data, in the system python's virtualenv
    assert ok(c, "nodeagent", "manifests", "crds") == crd_stream()
    prefix = ok(c, "/opt/nodeagent/bin/python", "-c", "import sys; print(sys.base_prefix)")
    assert prefix.strip() == "/usr"
    # enabled without a running systemd
    wants = c.path(WANTS)
    assert wants.is_symlink() and str(wants.readlink()) == UNIT
    assert ok(c, "systemctl", "is-enabled", "nodeagent").strip() == "enabled"

    # installing again is an upgrade: the virtualenv is rebuilt, the unit stays enabled
    dpkg_install(c, deb)
    assert ok(c, "systemctl", "is-enabled", "nodeagent").strip() == "enabled"

    c.path("/etc/nodeagent/kubeconfig").write_text("# the admin's\n")
    c.path("/var/lib/nodeagent").mkdir()
    ok(c, "dpkg", "--remove", "nodeagent")
    assert not c.path("/opt/nodeagent").exists()
    assert not c.path("/usr/bin/nodeagent").is_symlink()
    assert c.path("/etc/nodeagent/config.yaml").is_file()  # a conffile stays until purge
    assert c.path("/etc/nodeagent/kubeconfig").is_file()

    ok(c, "dpkg", "--purge", "nodeagent")
    for gone in (
        "/etc/nodeagent",
        "/var/lib/nodeagent",
        WANTS,
        "/etc/systemd/system/nodeagent.service",
    ):
        assert not c.path(gone).exists() and not c.path(gone).is_symlink(), gone
    assert "nodeagent" not in ok(c, "dpkg-query", "-W", "-f", "${Package}\\n")


STASH_ONE = """
from pathlib import Path
from nodeagent.node.staticpods.fsops import DirHandle
from nodeagent.node.staticpods.manifestfiles import scan_manifest_dir
from nodeagent.model.staticpods.journal import Owner
from nodeagent.node.staticpods.stash import Stash

m = Path("/etc/kubernetes/manifests")
with DirHandle(m) as d:
    (manifest,) = scan_manifest_dir(d).manifests
with Stash(m, m / ".nodeagent-stash") as stash:
    stash.stash(manifest, Owner("maintenance-a", shutdown=False, node="node-1"))
"""


@pytest.mark.e2e
def test_removal_never_loses_a_stashed_manifest(deb: Path, container: Container) -> None:
    c = container
    dpkg_install(c, deb)
    manifest = c.path("/etc/kubernetes/manifests/etcd.yaml")
    manifest.parent.mkdir(parents=True)
    content = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd\n  namespace: kube-system\n"
    manifest.write_bytes(content)
    ok(c, "/opt/nodeagent/bin/python", "-c", STASH_ONE)
    assert not manifest.exists()

    r = nspawn(c, "dpkg", "--purge", "nodeagent")
    assert r.returncode == 0, r.stderr
    assert "static pod manifests are still moved aside" in r.stderr, r.stderr
    assert "etcd" in r.stderr
    stash = c.path("/etc/kubernetes/manifests/.nodeagent-stash")
    assert content in [p.read_bytes() for p in stash.iterdir() if p.is_file()]


# --- booted: the agent runs from the package --------------------------------------------------


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[SimCluster]:
    async with SimCluster(nodes=1, kubeconfig=tmp_path / "kubeconfig") as sim:
        install_crds(sim)
        yield sim


async def _settled(c: Container, want: str, timeout: float = 60) -> str:
    """`systemctl is-active nodeagent` once it says `want` (or the timeout)."""
    state = ""
    async with asyncio.timeout(timeout):
        while True:
            state = (await c.exec("systemctl", "is-active", "nodeagent", check=False)).strip()
            if state == want:
                return state
            # nothing to wait on but systemd's answer
            await asyncio.sleep(0.5)


@pytest.mark.e2e
async def test_agent_runs_from_the_package_across_upgrade_and_removal(
    deb: Path, container: Container, cluster: SimCluster
) -> None:
    c = container
    await asyncio.to_thread(dpkg_install, c, deb)
    config = yaml.safe_load(c.path("/etc/nodeagent/config.yaml").read_text())
    config.update(
        nodeName="node-1",
        runControllers=False,
        shutdown={"budget": 120},
        observability={"listen": "127.0.0.1:0"},
    )
    c.path("/etc/nodeagent/config.yaml").write_text(yaml.safe_dump(config))
    shutil.copy(deb, c.path(f"/root/{deb.name}"))

    try:
        await c.boot()

        async def journal() -> str:
            return await c.exec("journalctl", "-u", "nodeagent", "--no-pager", check=False)

        # not configured yet (no kubeconfig): it fails once, saying why in one line that names
        # README.Debian, and systemd does not restart it every 2 s
        assert await _settled(c, "failed") == "failed", await journal()
        assert (await c.exec("systemctl", "show", "-P", "NRestarts", "nodeagent")).strip() == "0"
        said = [line for line in (await journal()).splitlines() if "kube.kubeconfig:" in line]
        assert len(said) == 1, said
        assert "cannot read /etc/nodeagent/kubeconfig" in said[0], said
        assert "Traceback" not in await journal()
        assert "(see /usr/share/doc/nodeagent/README.Debian)" in said[0]
        # configured, and restarted as README.Debian says
        c.path("/etc/nodeagent/kubeconfig").write_text(yaml.safe_dump(kubeconfig_dict(cluster.url)))
        await c.exec("systemctl", "restart", "nodeagent")
        state = (await c.exec("systemctl", "is-active", "nodeagent", check=False)).strip()
        assert state == "active", await journal()
        assert await c.inhibit_delay_max_usec() == 120_000_000, await journal()
        pid = await c.exec("systemctl", "show", "-P", "MainPID", "nodeagent")

        # upgrade while it runs: stopped, virtualenv rebuilt, started again
        await c.exec("dpkg", "-i", f"/root/{deb.name}", timeout=300)
        assert await _settled(c, "active") == "active", await journal()
        assert await c.exec("systemctl", "show", "-P", "MainPID", "nodeagent") != pid

        # removal stops it and takes its logind drop-in back: logind's default 5 s again
        await c.exec("dpkg", "--remove", "nodeagent", timeout=120)
        assert await _settled(c, "inactive") == "inactive"
        assert not c.path("/etc/systemd/logind.conf.d/zz-nodeagent.conf").exists()
        async with asyncio.timeout(30):
            while True:  # logind re-reads its configuration on SIGHUP, soon
                if await c.inhibit_delay_max_usec() == 5_000_000:
                    break
                await asyncio.sleep(0.2)  # nothing tells when it has: ask again
    finally:
        await c.stop()
