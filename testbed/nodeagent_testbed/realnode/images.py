"""The real node's container images, made on this machine without a registry.

Four OCI archives that `ctr -n k8s.io images import ARCHIVE` takes as they are (each names its
image with the `io.containerd.image.name` annotation in index.json, which containerd 1.6's
importer uses before anything else):

- PAUSE, the sandbox image: our own static pause program (pause/ beside this module, Go, no cgo);
- BUSYBOX, the workloads' image: Debian's busybox-static with a link for each of its applets;
- ETCD, the fleet tests' quorum workload: the etcd server the control plane's build made;
- NODEAGENT, the agent's image built from the repository's Dockerfile with buildah, on a local
  Debian base (debootstrap: python3, python3-venv, python3-pip; /usr/local/bin/python3 links to
  Debian's python, as the Dockerfile expects of its base) given as `--build-arg BASE`. The
  archive also names it as the shipped DaemonSet does (packaging/kubernetes/daemonset.yaml,
  `imagePullPolicy: IfNotPresent`), so those manifests run unchanged on the node.

pause and busybox are single-layer images written here directly (no tool needed but Go); only
the nodeagent image needs buildah (its storage, vfs driver, stays under the cache directory). pip
inside that build reaches the package index the way this machine's pip is configured (`pip
config list` and PIP_* variables, read at build time): a pip.conf made from them and the files
it names (a CA bundle, say) are mounted into the build's RUN steps, never copied into an image.

The archives are cached in `<cache>/images` (<cache> as for the control plane's binaries:
NODEAGENT_CONTROLPLANE_CACHE, else $XDG_CACHE_HOME/nodeagent, else ~/.cache/nodeagent), named by
a hash of what makes each: the pause sources and the Go version; the busybox-static version; the
Dockerfile, .dockerignore, pyproject.toml, the nodeagent/ sources and the base's recipe (not
README.md, which only reaches the package metadata). `python -m
nodeagent_testbed.realnode.images` makes them and prints their paths.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from nodeagent_testbed.controlplane.build import (
    ROOT,
    BuildError,
    cache_root,
    ensure_built,
    go_command,
)
from nodeagent_testbed.nspawn import host_mirror, locked

PAUSE_SOURCE = Path(__file__).resolve().parent / "pause"

PAUSE = "localhost/nodeagent-test/pause:1"
BUSYBOX = "localhost/nodeagent-test/busybox:1"
ETCD = "localhost/nodeagent-test/etcd:1"
NODEAGENT = "localhost/nodeagent:test"
PYTHON_BASE = "localhost/nodeagent-test/python-base"  # tagged with its recipe's hash

# bump when the way an image is made changes, so cached archives are made anew
RECIPE = "2"
SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "python3-pip", "ca-certificates")

# pip options that say how to reach a package index; the ones naming files are mounted
PIP_NETWORK_OPTIONS = frozenset(
    {
        "index-url",
        "extra-index-url",
        "find-links",
        "no-index",
        "trusted-host",
        "cert",
        "client-cert",
        "proxy",
        "timeout",
        "default-timeout",
        "retries",
    }
)
PIP_MOUNTS = "/run/nodeagent-host-pip"

# a layer's files: (path in the image, tar type, mode, content or link target)
Entry = tuple[str, bytes, int, bytes | str]


class ImageError(RuntimeError):
    pass


def cache_dir() -> Path:
    return cache_root().parent / "images"


def _run(
    cmd: Sequence[str], what: str, timeout: float, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """Run `cmd`; an ImageError naming `what` and the tail of its output if it fails."""
    try:
        done = subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=timeout, check=False, **kwargs
        )
    except subprocess.TimeoutExpired as e:
        err = e.stderr or b""
        text = (err.decode(errors="replace") if isinstance(err, bytes) else err)[-4000:]
        raise ImageError(f"{what}: {cmd[0]} timed out after {timeout:g} s:\n{text}") from e
    except FileNotFoundError as e:
        raise ImageError(f"{what}: {cmd[0]} is not installed (scripts/setup installs it)") from e
    if done.returncode != 0:
        # a build step's own output (pip's error, say) is on stdout, buildah's verdict on stderr
        tail = "\n".join(t.strip()[-3000:] for t in (done.stdout, done.stderr) if t.strip())
        raise ImageError(f"{what}: {' '.join(cmd[:3])} ... exited {done.returncode}:\n{tail}")
    return done


@contextlib.contextmanager
def _then(cleanup: Callable[[], object]) -> Iterator[None]:
    """Run `cleanup` after the block. If the block failed, its error is the one raised, with a
    note if the cleanup failed too."""
    try:
        yield
    except BaseException as e:
        try:
            cleanup()
        except ImageError as failed:
            e.add_note(f"cleaning up failed too: {failed}")
        raise
    cleanup()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _hash(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "big") + p)
    return h.hexdigest()[:16]


def _files_hash(root: Path, paths: Sequence[Path]) -> list[bytes]:
    out: list[bytes] = []
    for path in paths:
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for f in files:
            if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
                out += [f.relative_to(root).as_posix().encode(), f.read_bytes()]
    return out


def architecture() -> str:
    """The OCI architecture of this machine (Debian's names agree for amd64 and arm64)."""
    arch = _run(["dpkg", "--print-architecture"], "the machine's architecture", 30).stdout.strip()
    return {"armhf": "arm", "i386": "386"}.get(arch, arch)


# --- OCI layout and archive ---------------------------------------------------------------


def _layer(entries: Sequence[Entry]) -> tuple[bytes, str]:
    """A gzip-compressed tar of `entries` (owned by root, time 0) and its uncompressed digest."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, mode, content in entries:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = kind, mode, 0
            if kind == tarfile.SYMTYPE:
                assert isinstance(content, str)
                info.linkname = content
                tar.addfile(info)
            elif kind == tarfile.DIRTYPE:
                tar.addfile(info)
            else:
                assert isinstance(content, bytes)
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    data = raw.getvalue()
    return gzip.compress(data, mtime=0), _digest(data)


class Layout:
    """An OCI image layout in a directory: blobs, and the manifests `archive` will name."""

    def __init__(self, dir: Path) -> None:
        self.dir = dir
        (dir / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)

    def blob(self, data: bytes, media_type: str) -> dict[str, Any]:
        digest = _digest(data)
        (self.dir / "blobs" / "sha256" / digest.removeprefix("sha256:")).write_bytes(data)
        return {"mediaType": media_type, "digest": digest, "size": len(data)}

    def image(self, entries: Sequence[Entry], config: dict[str, Any]) -> dict[str, Any]:
        """A single-layer image of `entries` with the runtime `config`: its manifest's
        descriptor."""
        layer, diff_id = _layer(entries)
        arch = architecture()
        image_config = {
            "created": "1970-01-01T00:00:00Z",
            "architecture": arch,
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }
        media_type = "application/vnd.oci.image.manifest.v1+json"
        manifest = {
            "schemaVersion": 2,
            "mediaType": media_type,
            "config": self.blob(
                json.dumps(image_config, sort_keys=True).encode(),
                "application/vnd.oci.image.config.v1+json",
            ),
            "layers": [self.blob(layer, "application/vnd.oci.image.layer.v1.tar+gzip")],
        }
        descriptor = self.blob(json.dumps(manifest, sort_keys=True).encode(), media_type)
        return {**descriptor, "platform": {"architecture": arch, "os": "linux"}}

    def archive(self, manifest: dict[str, Any], names: Sequence[str], out: Path) -> Path:
        """Write index.json naming `manifest` once per name in `names` (the containerd and the
        OCI annotation) and pack the layout into the tar `out`, atomically."""
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    **manifest,
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name,
                    },
                }
                for name in names
            ],
        }
        (self.dir / "index.json").write_text(json.dumps(index, indent=2, sort_keys=True))
        (self.dir / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
        partial = out.with_name(out.name + ".partial")
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
            blobs = sorted(f"blobs/sha256/{f.name}" for f in (self.dir / "blobs/sha256").iterdir())
            for path in ["oci-layout", "index.json", "blobs", "blobs/sha256", *blobs]:
                info = tar.gettarinfo(self.dir / path, path)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isfile():
                    with (self.dir / path).open("rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
        partial.replace(out)
        return out


# --- pause ---------------------------------------------------------------------------------


def _go_version(go: str) -> str:
    return _run([go, "version"], "the Go version", 60, env=_go_env()).stdout.strip()


def _go_env() -> dict[str, str]:
    return {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-buildvcs=false"}


def pause_key(go: str) -> str:
    sources = _files_hash(PAUSE_SOURCE, [PAUSE_SOURCE / "go.mod", PAUSE_SOURCE / "main.go"])
    return _hash(RECIPE.encode(), _go_version(go).encode(), *sources)


def build_pause(out: Path, go: str, work: Path) -> Path:
    binary = work / "pause"
    _run(
        [go, "build", "-trimpath", "-ldflags", "-s -w", "-o", str(binary), "."],
        "building the pause program",
        300,
        cwd=PAUSE_SOURCE,
        env=_go_env(),
    )
    layout = Layout(work / "layout")
    manifest = layout.image(
        [("pause", tarfile.REGTYPE, 0o755, binary.read_bytes())],
        {"Entrypoint": ["/pause"], "User": "65535:65535"},
    )
    return layout.archive(manifest, [PAUSE], out)


# --- busybox -------------------------------------------------------------------------------

BUSYBOX_BINARY = Path("/bin/busybox")


def busybox_version() -> str:
    done = _run(
        ["dpkg-query", "-W", "-f", "${Version}", "busybox-static"],
        "busybox-static (scripts/setup installs it)",
        30,
    )
    return done.stdout.strip()


def busybox_key() -> str:
    return _hash(RECIPE.encode(), busybox_version().encode(), architecture().encode())


def build_busybox(out: Path, work: Path) -> Path:
    applets = _run(
        [str(BUSYBOX_BINARY), "--list-full"], "listing busybox's applets", 30
    ).stdout.split()
    entries: list[Entry] = [
        ("bin", tarfile.DIRTYPE, 0o755, b""),
        ("sbin", tarfile.DIRTYPE, 0o755, b""),
        ("usr", tarfile.DIRTYPE, 0o755, b""),
        ("usr/bin", tarfile.DIRTYPE, 0o755, b""),
        ("usr/sbin", tarfile.DIRTYPE, 0o755, b""),
        ("tmp", tarfile.DIRTYPE, 0o1777, b""),
        ("bin/busybox", tarfile.REGTYPE, 0o755, BUSYBOX_BINARY.read_bytes()),
    ]
    for applet in sorted(set(applets)):
        if applet != "bin/busybox" and applet.split("/")[0] in ("bin", "sbin", "usr"):
            entries.append((applet, tarfile.SYMTYPE, 0o777, "/bin/busybox"))
    layout = Layout(work / "layout")
    manifest = layout.image(
        entries,
        {"Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "Cmd": ["sh"]},
    )
    return layout.archive(manifest, [BUSYBOX], out)


# --- etcd ----------------------------------------------------------------------------------


def etcd_binary() -> Path:
    return ensure_built(log=False).path("etcd")


def etcd_key() -> str:
    # the binary's directory is named by the versions and module sums that made it (build.py)
    return _hash(RECIPE.encode(), etcd_binary().parent.name.encode(), architecture().encode())


def build_etcd(out: Path, work: Path) -> Path:
    """etcd alone (static, CGO_ENABLED=0), its data under /var/lib/etcd (a hostPath)."""
    entries: list[Entry] = [
        ("usr", tarfile.DIRTYPE, 0o755, b""),
        ("usr/local", tarfile.DIRTYPE, 0o755, b""),
        ("usr/local/bin", tarfile.DIRTYPE, 0o755, b""),
        ("usr/local/bin/etcd", tarfile.REGTYPE, 0o755, etcd_binary().read_bytes()),
        ("tmp", tarfile.DIRTYPE, 0o1777, b""),
        ("var", tarfile.DIRTYPE, 0o755, b""),
        ("var/lib", tarfile.DIRTYPE, 0o755, b""),
        ("var/lib/etcd", tarfile.DIRTYPE, 0o700, b""),
    ]
    layout = Layout(work / "layout")
    manifest = layout.image(entries, {"Entrypoint": ["/usr/local/bin/etcd"]})
    return layout.archive(manifest, [ETCD], out)


# --- nodeagent -----------------------------------------------------------------------------


def release_image() -> str:
    """The image the shipped DaemonSet runs."""
    doc = yaml.safe_load((ROOT / "packaging" / "kubernetes" / "daemonset.yaml").read_text())
    image: str = doc["spec"]["template"]["spec"]["containers"][0]["image"]
    return image


def base_key() -> str:
    return _hash(RECIPE.encode(), SUITE.encode(), " ".join(BASE_PACKAGES).encode())


def nodeagent_key() -> str:
    sources = _files_hash(
        ROOT,
        [ROOT / "Dockerfile", ROOT / ".dockerignore", ROOT / "pyproject.toml", ROOT / "nodeagent"],
    )
    return _hash(RECIPE.encode(), base_key().encode(), release_image().encode(), *sources)


class Buildah:
    """buildah with its own storage (vfs: no mounts, works on any file system) in `dir`."""

    def __init__(self, dir: Path) -> None:
        self.dir = dir

    def argv(self, *args: str) -> list[str]:
        if shutil.which("buildah") is None:
            raise ImageError("buildah is not installed (scripts/setup installs it)")
        return [
            "buildah",
            "--root",
            str(self.dir / "root"),
            "--runroot",
            str(self.dir / "runroot"),
            "--storage-driver",
            "vfs",
            *args,
        ]

    def run(self, what: str, timeout: float, *args: str) -> str:
        return _run(self.argv(*args), what, timeout).stdout.strip()

    def has_image(self, name: str) -> bool:
        cmd = self.argv("inspect", "--type", "image", name)
        try:
            done = subprocess.run(cmd, capture_output=True, timeout=60, check=False)
        except subprocess.TimeoutExpired as e:
            raise ImageError(f"buildah inspect {name} timed out") from e
        return done.returncode == 0


def ensure_base(buildah: Buildah, log: bool) -> str:
    """The local stand-in for the Dockerfile's python base, in buildah's storage."""
    name = f"{PYTHON_BASE}:{base_key()}"
    if buildah.has_image(name):
        return name
    if log:
        print(
            f"images: making the python base {name} with debootstrap (first time only)", flush=True
        )
    container = buildah.run("buildah from scratch", 60, "from", "scratch")
    with _then(lambda: buildah.run("buildah rm", 60, "rm", container)):
        root = Path(buildah.run("buildah mount", 60, "mount", container))
        # its own mount namespace: the /proc and /sys debootstrap mounts go with it
        _run(
            [
                "unshare",
                "--mount",
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(BASE_PACKAGES)}",
                SUITE,
                str(root),
                host_mirror(),
            ],
            "debootstrap of the python base",
            1800,
        )
        local_bin = root / "usr" / "local" / "bin"
        local_bin.mkdir(parents=True, exist_ok=True)
        # where python:3.11-slim has its python; the Dockerfile's virtualenv links to it
        (local_bin / "python3").symlink_to("/usr/bin/python3")
        (local_bin / "python").symlink_to("python3")
        # what python:3.11-slim leaves out too: the packages debootstrap fetched, apt's lists
        for junk in ("var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*"):
            for f in root.glob(junk):
                if f.is_file():
                    f.unlink()
        buildah.run("buildah umount", 60, "umount", container)
        buildah.run(
            "buildah config of the python base",
            60,
            "config",
            "--env",
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "--env",
            "LANG=C.UTF-8",
            "--cmd",
            "python3",
            container,
        )
        buildah.run("buildah commit of the python base", 600, "commit", container, name)
    return name


def pip_config() -> list[tuple[str, str, str]]:
    """This machine's pip configuration for reaching an index: (section, option, value),
    environment variables last (they win), as `pip config list` shows it."""
    done = _run([sys.executable, "-m", "pip", "config", "list"], "pip config list", 60)
    found: list[tuple[str, str, str]] = []
    for line in done.stdout.splitlines():
        key, sep, value = line.partition("=")
        section, _, option = key.rpartition(".")
        if not sep or option not in PIP_NETWORK_OPTIONS:
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        found.append(("global" if section == ":env:" else section, option, value))
    found.sort(key=lambda f: f[0] == "global")  # per command sections override global
    return found


def pip_for_build(work: Path) -> list[str]:
    """buildah build options giving the build's pip this machine's pip configuration: a
    pip.conf and every file or directory it names, mounted read-only."""
    volumes: dict[str, str] = {}
    sections: dict[str, dict[str, str]] = {}
    for section, option, value in pip_config():
        words = []
        for word in value.split():
            if word.startswith("/") and Path(word).exists():
                inside = f"{PIP_MOUNTS}/{len(volumes)}-{Path(word).name}"
                word = volumes.setdefault(word, inside)
            words.append(word)
        sections.setdefault(section, {})[option] = " ".join(words)
    text = "".join(
        f"[{s}]\n" + "".join(f"{k} = {v}\n" for k, v in options.items()) + "\n"
        for s, options in sections.items()
    )
    conf = work / "pip.conf"
    conf.write_text(text)
    args = ["--volume", f"{conf}:/etc/pip.conf:ro"]
    for host, inside in volumes.items():
        args += ["--volume", f"{host}:{inside}:ro"]
    return args


def build_nodeagent(out: Path, work: Path, log: bool) -> Path:
    buildah = Buildah(cache_dir() / "buildah")
    # working containers an interrupted build left (the storage is ours, and we hold the lock)
    buildah.run("buildah rm --all", 120, "rm", "--all")
    base = ensure_base(buildah, log)
    tag = f"{NODEAGENT}-{nodeagent_key()}"
    buildah.run(
        "buildah build of the nodeagent image from the Dockerfile",
        1800,
        "build",
        "--isolation",
        "chroot",
        "--network",
        "host",
        "--pull=never",  # the base is local; an optional-value flag: one word
        "--build-arg",
        f"BASE={base}",
        *pip_for_build(work),
        "--tag",
        tag,
        "--file",
        str(ROOT / "Dockerfile"),
        str(ROOT),
    )
    with _then(lambda: buildah.run("buildah rmi", 120, "rmi", tag)):
        layout_dir = work / "layout"
        buildah.run("buildah push of the nodeagent image", 600, "push", tag, f"oci:{layout_dir}")
        index = json.loads((layout_dir / "index.json").read_text())
        (manifest,) = index["manifests"]
        manifest.pop("annotations", None)
        return Layout(layout_dir).archive(manifest, [NODEAGENT, release_image()], out)


# --- all four -----------------------------------------------------------------------------


def ensure_images(log: bool = True) -> list[Path]:
    """The OCI archives (pause, busybox, etcd, nodeagent), each made once for what makes it."""
    cache = cache_dir()
    go = go_command()
    wanted = [
        ("pause", pause_key(go)),
        ("busybox", busybox_key()),
        ("etcd", etcd_key()),
        ("nodeagent", nodeagent_key()),
    ]
    paths = [cache / f"{what}-{key}.tar" for what, key in wanted]
    if all(p.is_file() for p in paths):
        return paths
    with locked(cache / ".lock"):  # one builder at a time (pytest workers, scripts)
        for (what, _), path in zip(wanted, paths, strict=True):
            if path.is_file():
                continue
            if log:
                print(f"images: making {path.name} (first time only)", flush=True)
            with tempfile.TemporaryDirectory(dir=cache, prefix=f"{what}-") as tmp:
                work = Path(tmp)
                if what == "pause":
                    build_pause(path, go, work)
                elif what == "busybox":
                    build_busybox(path, work)
                elif what == "etcd":
                    build_etcd(path, work)
                else:
                    build_nodeagent(path, work, log)
            for old in cache.glob(f"{what}-*.tar"):  # made for sources that changed since
                if old != path:
                    old.unlink()
    return paths


def import_command(archive: Path, address: Path | None = None) -> list[str]:
    """The ctr command line that imports `archive` into containerd's CRI namespace (k8s.io),
    at `address` (its default socket if None)."""
    at = ["--address", str(address)] if address is not None else []
    return ["ctr", *at, "-n", "k8s.io", "images", "import", str(archive)]


def import_into(archives: Sequence[Path], address: Path | None = None) -> None:
    """Import `archives` into the containerd listening at `address`."""
    for archive in archives:
        _run(import_command(archive, address), f"ctr import of {archive.name}", 600)


def main() -> int:
    try:
        paths = ensure_images()
    except (ImageError, BuildError) as e:  # BuildError: no Go toolchain for the pause program
        print(f"images: {e}", file=sys.stderr)
        return 1
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
