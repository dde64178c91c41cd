"""Compile ``function_rpc.proto`` into ``function_rpc_pb2.py`` (and its ``.pyi``) with grpcio-tools.

``make`` runs this at install time (``python harness/devhost/protocol/build.py``); importing
``harness.devhost.protocol`` runs it too when the generated module is missing or older than the .proto,
so a venv set up by hand works as well. The output is written elsewhere first and moved into
place, so a reader never sees half a file.
"""

import importlib.resources
import keyword
import os
import re
import tempfile
from pathlib import Path

PROTO = Path(__file__).with_name("function_rpc.proto")
GENERATED = (PROTO.with_name("function_rpc_pb2.py"), PROTO.with_name("function_rpc_pb2.pyi"))


class ProtocolBuildError(RuntimeError):
    pass


def is_stale() -> bool:
    source = PROTO.stat().st_mtime
    return any(not out.exists() or out.stat().st_mtime < source for out in GENERATED)


def compile_proto() -> None:
    try:
        from grpc_tools import protoc  # noqa: PLC0415 - only needed when compiling
    except ImportError as error:
        raise ProtocolBuildError(
            f"{PROTO.name} needs compiling and grpcio-tools is not installed: "
            "pip install -r requirements-dev.txt (or run make)"
        ) from error
    well_known = importlib.resources.files("grpc_tools") / "_proto"
    with tempfile.TemporaryDirectory(dir=PROTO.parent) as scratch:
        code = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{PROTO.parent}",
                f"-I{well_known}",
                f"--python_out={scratch}",
                f"--pyi_out={scratch}",
                str(PROTO),
            ]
        )
        if code != 0:
            raise ProtocolBuildError(f"protoc failed on {PROTO} (exit {code})")
        stubs = Path(scratch) / GENERATED[1].name
        stubs.write_text(_without_keyword_members(stubs.read_text()))
        for out in GENERATED:
            os.replace(Path(scratch) / out.name, out)


_MEMBER = re.compile(r"^\s*(\w+):")


def _without_keyword_members(stubs: str) -> str:
    """Upstream names some enum values ``in`` and ``None``: Python keywords, which protoc writes
    into the stubs as annotations no type checker can parse. At run time they are reached with
    ``getattr`` (as the worker does), so the stubs simply leave them out."""
    kept = []
    for line in stubs.splitlines(keepends=True):
        member = _MEMBER.match(line)
        if member is None or not keyword.iskeyword(member.group(1)):
            kept.append(line)
    return "".join(kept)


def compile_if_stale() -> None:
    if is_stale():
        compile_proto()


if __name__ == "__main__":
    compile_proto()
    print(f"compiled {PROTO.name} -> {', '.join(p.name for p in GENERATED)}")
