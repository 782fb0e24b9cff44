"""Build the Lambda layer without Docker and check Lambda's size limit.

pip installs the pinned runtime dependencies (layers/slatelake/requirements.txt)
as binary wheels for the target runtime and architecture into
``<out>/python``, next to a copy of the slatelake package; the layer plus the
function must stay under Lambda's 250 MB unzipped limit or the build fails.
Default target: python3.12 on arm64 (every pinned wheel exists for it).

    python layers/build_layer.py [--arch arm64|x86_64] [--python 3.12] [--out build/layer]
                                 [--compile-with PYTHON]

Its modules are compiled to bytecode by an interpreter of the target version
(this one, ``python3.12`` on PATH, or ``--compile-with``) when one is found:
Lambda's /opt is read-only, so without it every cold start compiles every
module it imports again (about 1 s of a cold handler's import on this
machine). The bytecode is ``unchecked-hash``: the layer never changes after
the build, and a zip's timestamps need not match the ones a pyc records.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "layers" / "slatelake" / "requirements.txt"
PACKAGE = ROOT / "layers" / "slatelake" / "slatelake"
FUNCTION = ROOT / "functions" / "maintenance"
LIMIT_BYTES = 250 * 1024 * 1024  # Lambda: function + layers, unzipped
# manylinux levels the Lambda python3.12 runtime (Amazon Linux 2023, glibc 2.34) runs.
MANYLINUX = ("2014", "_2_17", "_2_24", "_2_26", "_2_28", "_2_34")
ARCHES = {"arm64": "aarch64", "x86_64": "x86_64"}


def host_arch() -> str:
    machine = platform.machine().lower()
    return "arm64" if machine in ("aarch64", "arm64") else "x86_64"


def platforms(arch: str) -> list[str]:
    cpu = ARCHES[arch]
    return [f"manylinux{level}_{cpu}" for level in MANYLINUX]


def tree_bytes(path: Path, skip_bytecode: bool = False) -> int:
    """Bytes of the files under ``path``; ``skip_bytecode`` leaves out
    ``__pycache__``, as ``sam build`` does for the function (those caches are
    this machine's Python's; the layer's own bytecode is built and counted)."""
    return sum(
        p.stat().st_size
        for p in path.rglob("*")
        if p.is_file()
        and not p.is_symlink()
        and not (skip_bytecode and "__pycache__" in p.relative_to(path).parts)
    )


@dataclass(frozen=True)
class LayerBuild:
    out: str
    arch: str
    python: str
    layer_bytes: int
    function_bytes: int
    largest: dict[str, int]
    compiled_with: str | None  # the interpreter that compiled the modules, or None
    limit_bytes: int = LIMIT_BYTES

    @property
    def total_bytes(self) -> int:
        return self.layer_bytes + self.function_bytes


def interpreter_of(python: str, given: str | None = None) -> str | None:
    """An interpreter of the target version (``3.12``), or None: ``given``,
    this one, else ``python3.12`` on PATH (a pyenv shim for a version that is
    not active answers with an error, so each is asked for its version)."""
    candidates = [given] if given else [sys.executable, shutil.which(f"python{python}")]
    for candidate in candidates:
        if candidate is None:
            continue
        probe = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
        )
        if probe.returncode == 0 and probe.stdout.strip() == python:
            return candidate
    if given:
        raise SystemExit(f"--compile-with {given}: not a python{python} interpreter")
    return None


def compile_modules(site: Path, interpreter: str) -> None:
    subprocess.run(
        [
            interpreter,
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            str(site),
        ],
        check=True,
    )


def build(out: Path, arch: str, python: str, compile_with: str | None = None) -> LayerBuild:
    if out.exists():
        shutil.rmtree(out)
    site = out / "python"
    site.mkdir(parents=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--python-version",
        python,
        *[arg for tag in platforms(arch) for arg in ("--platform", tag)],
        "--target",
        str(site),
        "-r",
        str(REQUIREMENTS),
    ]
    subprocess.run(command, check=True)
    shutil.copytree(
        PACKAGE, site / "slatelake", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    for junk in [*site.rglob("__pycache__"), site / "bin"]:
        shutil.rmtree(junk, ignore_errors=True)
    interpreter = interpreter_of(python, compile_with)
    if interpreter is not None:
        compile_modules(site, interpreter)
    packages = {
        p.name: tree_bytes(p) if p.is_dir() else p.stat().st_size for p in sorted(site.iterdir())
    }
    return LayerBuild(
        out=str(out),
        arch=arch,
        python=python,
        layer_bytes=tree_bytes(out),
        function_bytes=tree_bytes(FUNCTION, skip_bytecode=True),
        largest=dict(sorted(packages.items(), key=lambda kv: -kv[1])[:8]),
        compiled_with=interpreter,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", choices=sorted(ARCHES), default="arm64")
    parser.add_argument("--python", default="3.12", help="target runtime version (3.12)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "layer")
    parser.add_argument("--json", action="store_true", help="print the size report as JSON")
    parser.add_argument(
        "--compile-with",
        metavar="PYTHON",
        help="the target version's interpreter that compiles the modules (default: this "
        "one or pythonX.Y on PATH, when its version is the target's)",
    )
    args = parser.parse_args(argv)
    report = build(args.out.resolve(), args.arch, args.python, args.compile_with)
    mb = 1024 * 1024
    if args.json:
        print(json.dumps({**asdict(report), "total_bytes": report.total_bytes}))
    else:
        print(f"layer {report.out} (python{report.python}, {report.arch})")
        if report.compiled_with is None:
            print(
                f"  not compiled: no python{report.python} found (--compile-with); each cold "
                "start compiles the modules it imports"
            )
        for name, size in report.largest.items():
            print(f"  {name:<40} {size / mb:7.1f} MB")
        print(
            f"layer {report.layer_bytes / mb:.1f} MB + function {report.function_bytes / mb:.2f} "
            f"MB = {report.total_bytes / mb:.1f} MB of Lambda's {LIMIT_BYTES / mb:.0f} MB unzipped"
        )
    if report.total_bytes > LIMIT_BYTES:
        print("over Lambda's unzipped limit: the deployment would be refused", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
