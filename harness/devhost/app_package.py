"""What devhost's worker processes run: the deployment package and the packages its
``requirements.txt`` installs, nothing of the development environment.

- **The package** is built as ``func azure functionapp publish`` and ``azd deploy`` build it
  (the app directory minus ``.funcignore``, ``harness/tools/deploy_package.py``) into
  ``<data dir>/wwwroot``, afresh at every start, as a deployment replaces ``/home/site/wwwroot``.
- **The app's packages** are ``pip install --target`` of its ``requirements.txt`` alone, as a
  remote build fills ``.python_packages/lib/site-packages``. They are built once per content of
  that file and interpreter version, in a cache shared by every data directory
  (``DEVHOST_CACHE_DIR``, default ``~/.cache/devhost``), as Azure reuses ``.python_packages``
  while ``requirements.txt`` is unchanged.
- **The worker's own packages** (grpcio, protobuf and a fallback ``azure-functions-runtime``,
  ``harness/devhost/worker-requirements.txt``) come with the host, as the platform ships them beside its
  proxy worker, and sit after the app's on the path, so the app's pins win.
- **The interpreter** is a venv with no packages and no access to the system's, made from the
  Python devhost runs on: the app sees the standard library and what the two lists installed.
"""

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.tools.deploy_package import build as build_package

DEVHOST = Path(__file__).resolve().parent
WORKER_REQUIREMENTS = DEVHOST / "worker-requirements.txt"
PROXY_FILES = ("proxy_worker.py", "protocol/function_rpc_pb2.py")


class PackageError(Exception):
    """The package or its environment could not be built: pip's or venv's own words."""


@dataclass(frozen=True)
class AppPackage:
    """Where a worker process finds everything: its interpreter, its path and its directory."""

    wwwroot: Path
    python: Path
    path: tuple[Path, ...]  # PYTHONPATH, in order: the app's packages, the proxy, its packages


def cache_dir(env: Mapping[str, str]) -> Path:
    configured = env.get("DEVHOST_CACHE_DIR")
    if configured:
        return Path(configured)
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "devhost"


def _version() -> str:
    return f"py{sys.version_info.major}.{sys.version_info.minor}"


def _cached(target: Path, build: Callable[[Path], None], say: Callable[[str], None], what: str) -> Path:
    """``target``, built by ``build`` into a scratch directory and moved into place under a lock,
    so concurrent hosts (pytest workers) build it once and never see half of it."""
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f"{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return target
        say(f"devhost: building {what} in {target} (once, while its inputs are unchanged)")
        scratch = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
        try:
            build(scratch)
            os.replace(scratch, target)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
    return target


def _run(command: list[str], doing: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PackageError(
            f"{doing} failed (exit {done.returncode}):\n{done.stderr.strip() or done.stdout.strip()}"
        )


def _pip_install(requirements: Path) -> Callable[[Path], None]:
    def install(target: Path) -> None:
        _run(
            [
                sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                "--no-input", "--target", str(target), "-r", str(requirements),
            ],
            f"pip install -r {requirements}",
        )  # fmt: skip

    return install


def _digest(*parts: bytes) -> str:
    hashed = hashlib.sha256()
    for part in parts:
        hashed.update(hashlib.sha256(part).digest())
    return hashed.hexdigest()[:16]


def _interpreter(cache: Path, say: Callable[[str], None]) -> Path:
    base = getattr(sys, "_base_executable", sys.executable)

    def make(target: Path) -> None:
        _run([base, "-m", "venv", "--without-pip", str(target)], f"{base} -m venv")

    venv = _cached(cache / f"python-{_version()}", make, say, "a clean Python for the workers")
    return venv / "bin" / "python"


def app_packages(app_dir: Path, cache: Path, say: Callable[[str], None]) -> Path | None:
    requirements = app_dir / "requirements.txt"
    if not requirements.exists():
        return None
    key = _digest(requirements.read_bytes(), _version().encode())
    return _cached(
        cache / "app-packages" / key, _pip_install(requirements), say, f"the packages of {requirements}"
    )


def worker_packages(cache: Path, say: Callable[[str], None]) -> Path:
    key = _digest(WORKER_REQUIREMENTS.read_bytes(), _version().encode())
    return _cached(
        cache / "worker-packages" / key, _pip_install(WORKER_REQUIREMENTS), say, "the proxy worker's packages"
    )


def _copy_package(app_dir: Path, wwwroot: Path) -> None:
    if wwwroot.exists():
        shutil.rmtree(wwwroot)
    if (app_dir / ".funcignore").exists():
        build_package(app_dir, wwwroot)
    else:  # Core Tools publishes everything then; only bytecode caches are left behind
        shutil.copytree(app_dir, wwwroot, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))


def _copy_proxy(target: Path) -> None:
    """The proxy and the protocol module it imports, as a ``harness.devhost`` package of those
    two only."""
    if target.exists():
        shutil.rmtree(target)
    for relative in PROXY_FILES:
        destination = target / "harness" / "devhost" / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(DEVHOST / relative, destination)
    (target / "harness" / "__init__.py").write_text("")
    (target / "harness" / "devhost" / "__init__.py").write_text('"""devhost\'s proxy worker, alone."""\n')
    (target / "harness" / "devhost" / "protocol" / "__init__.py").write_text("")


def prepare(app_dir: Path, data_dir: Path, env: Mapping[str, str], say: Callable[[str], None]) -> AppPackage:
    # Absolute: the workers run in the package directory, and their PYTHONPATH must still hold.
    cache, data_dir = cache_dir(env).resolve(), data_dir.resolve()
    wwwroot = data_dir / "wwwroot"
    _copy_package(app_dir, wwwroot)
    proxy = data_dir / "worker"
    _copy_proxy(proxy)
    python = _interpreter(cache, say)
    packages = app_packages(app_dir, cache, say)
    path = (*([packages] if packages else []), proxy, worker_packages(cache, say))
    return AppPackage(wwwroot=wwwroot, python=python, path=path)


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.devhost.app_package APP_DIR ...``: build what each app's workers need (the
    clean interpreter, the proxy's packages, the app's ``requirements.txt``) into the cache now,
    so a later start, or a test with a deadline, does not wait for pip."""
    apps = [Path(a) for a in (sys.argv[1:] if argv is None else argv)] or [Path.cwd()]
    cache = cache_dir(os.environ).resolve()
    _interpreter(cache, print)
    worker_packages(cache, print)
    for app in apps:
        app_packages(app.resolve(), cache, print)
    print(f"devhost: the workers' environments for {len(apps)} app(s) are ready in {cache}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
