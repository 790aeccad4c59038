"""The Makefile: `make help` lists every target; `$(VENV)/.dev` installs the CPU build of torch
when PyTorch's CPU index answers and falls back to pip's configured index, in one line, when not.

The torch tests run the real recipe in a scratch checkout (the Makefile and its helper, stand-in
requirements) against local stand-ins: a CPU index serving torch 2.13.0+cpu, a "PyPI" whose torch
2.13.0 requires an nvidia-* wheel as PyPI's CUDA build does, and an index that accepts the
connection and never answers."""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import zipfile
from functools import partial
from pathlib import Path

import pytest
from stack_configs import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")
MAKEFILE = (ROOT / "Makefile").read_text()


def phony_targets() -> list[str]:
    declared = re.search(r"^\.PHONY:(.*)$", MAKEFILE, re.MULTILINE)
    assert declared
    return declared[1].split()


def test_make_help_lists_every_phony_target_with_its_line():
    run = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60)
    listed = dict(re.findall(r"^  make (\S+) +(\S.*)$", run.stdout, re.MULTILINE))
    assert sorted(listed) == sorted(phony_targets())
    for target in phony_targets():
        line = re.search(rf"^## (.*)\n{re.escape(target)}:", MAKEFILE, re.MULTILINE)
        assert line and listed[target] == line[1], target
    assert len(run.stdout.splitlines()) == len(listed)
    # `make` alone shows the list instead of building a virtualenv.
    bare = subprocess.run(["make", "-s"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60)
    assert bare.stdout == run.stdout


def wheel(directory: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A minimal pure-Python wheel pip installs (PEP 427: the dist-info, WHEEL and RECORD)."""
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    files = {f"{name.replace('-', '_')}/__init__.py": f"VERSION = {version!r}\n",
             f"{info}/METADATA": "Metadata-Version: 2.1\n" f"Name: {name}\nVersion: {version}\n"
                                 + "".join(f"Requires-Dist: {r}\n" for r in requires),
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()}"
                     f",{len(text.encode())}\n" for path, text in files.items()) + f"{info}/RECORD,,\n"
    path = directory / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in {**files, f"{info}/RECORD": record}.items():
            archive.writestr(member, text)
    return path


def simple_index(root: Path, wheels: list[Path]) -> None:
    """PEP 503: <root>/simple/<project>/ links to the project's files."""
    for path in wheels:
        project = root / "simple" / path.name.split("-")[0].replace("_", "-")
        project.mkdir(parents=True, exist_ok=True)
        (project / "index.html").write_text(f'<a href="../../{path.name}">{path.name}</a>\n')


class Requests(http.server.SimpleHTTPRequestHandler):
    served: list[str]

    def log_message(self, format, *args):  # the base class names them so
        self.served.append(urllib.parse.unquote(self.path))


@pytest.fixture
def indexes(tmp_path):
    """(CPU index URL, "PyPI" index URL, the paths the server was asked for)."""
    served_dir = tmp_path / "served"
    projects: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {
        "cpu": [("torch", "2.13.0+cpu", ())],
        "pypi": [("torch", "2.13.0", ("nvidia-cublas-cu12==12.8.4.1",)), ("nvidia-cublas-cu12", "12.8.4.1", ())]}
    for index, wheels in projects.items():
        (served_dir / index).mkdir(parents=True)
        simple_index(served_dir / index, [wheel(served_dir / index, name, version, requires)
                                          for name, version, requires in wheels])
    served: list[str] = []
    handler = type("Handler", (Requests,), {"served": served})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(served_dir)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    yield f"{base}/cpu/simple", f"{base}/pypi/simple", served
    server.shutdown()


@pytest.fixture
def checkout(tmp_path) -> Path:
    """The Makefile and its probe, stand-in requirements (torch alone in requirements-dev.txt), and
    a .venv without packages whose pip is this one's (creating a venv with pip takes half a minute)."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "Makefile", root / "Makefile")
    shutil.copy2(ROOT / "scripts" / "_index_answers.py", root / "scripts" / "_index_answers.py")
    pin = next(line for line in (ROOT / "requirements-dev.txt").read_text().splitlines() if line.startswith("torch=="))
    assert pin == "torch==2.13.0", "the stand-in wheels below carry this version"
    for name in ("requirements.txt", "requirements-verify.txt", "requirements-frameworks.txt"):
        (root / name).write_text("# none here\n")
    (root / "requirements-dev.txt").write_text(f"{pin}\n")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True, timeout=120)
    site = next((root / ".venv" / "lib").glob("python*/site-packages"))
    import pip

    (site / "pip").symlink_to(Path(pip.__file__).parent, target_is_directory=True)
    return root


def make_dev(root: Path, cpu_index: str, pypi: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(root), "PIP_CONFIG_FILE": "/dev/null", "PIP_INDEX_URL": pypi,
           "PIP_NO_CACHE_DIR": "1", "PIP_RETRIES": "0", "PIP_DEFAULT_TIMEOUT": "5"}
    return subprocess.run(["make", "-s", ".venv/.dev", f"TORCH_CPU_INDEX={cpu_index}"], cwd=root, capture_output=True,
                          text=True, env=env, timeout=600)


def installed(root: Path) -> dict[str, str]:
    listing = subprocess.run([str(root / ".venv" / "bin" / "python"), "-c",
                              "import importlib.metadata as m; print('\\n'.join(f\"{d.metadata['Name']} {d.version}\" "
                              "for d in m.distributions()))"], capture_output=True, text=True, check=True)
    return dict(line.split(" ", 1) for line in listing.stdout.splitlines())


def test_a_reachable_cpu_index_gives_the_cpu_build_and_requirements_dev_keeps_it(checkout, indexes):
    cpu_index, pypi, served = indexes
    run = make_dev(checkout, cpu_index, pypi)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout == f"torch: torch==2.13.0 from {cpu_index} (the CPU build)\n"
    assert installed(checkout) == {"torch": "2.13.0+cpu"}
    # pip took torch from the CPU index, then found `torch==2.13.0` satisfied by 2.13.0+cpu: PyPI's
    # build and its nvidia-* wheels were never downloaded, not even asked for.
    assert "/cpu/torch-2.13.0+cpu-py3-none-any.whl" in served
    assert not [path for path in served if path.startswith("/pypi/")], served
    assert (checkout / ".venv" / ".dev").exists()


def test_a_cpu_index_that_never_answers_falls_back_in_one_line_within_seconds(checkout, indexes):
    _, pypi, served = indexes
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # connections complete in the kernel's backlog; no request is ever answered
    cpu_index = f"http://127.0.0.1:{silent.getsockname()[1]}/whl/cpu"
    try:
        started = time.monotonic()
        run = make_dev(checkout, cpu_index, pypi)
        elapsed = time.monotonic() - started
    finally:
        silent.close()
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout == (f"torch: {cpu_index} did not answer within 5 s; falling back to pip's configured index "
                          "(PyPI: the CUDA build, with nvidia-* wheels)\n")
    assert "Traceback" not in run.stderr
    assert installed(checkout) == {"torch": "2.13.0", "nvidia-cublas-cu12": "12.8.4.1"}
    assert "/pypi/nvidia_cublas_cu12-12.8.4.1-py3-none-any.whl" in served
    # The probe's 5 s and the installs: not pip's own timeout, retried, per request.
    assert elapsed < 60, elapsed


def test_a_cpu_index_that_answers_but_serves_no_torch_falls_back(checkout, indexes, tmp_path):
    """A proxy or mirror that answers the probe but does not serve the wheel: make goes on with
    pip's configured index instead of stopping `make test`."""
    cpu_index, pypi, _ = indexes
    empty = tmp_path / "served" / "empty" / "simple" / "torch"
    empty.mkdir(parents=True)
    (empty / "index.html").write_text("<html></html>\n")
    answering_index = cpu_index.replace("/cpu/simple", "/empty/simple")
    run = make_dev(checkout, answering_index, pypi)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "the CPU build did not install from" in run.stdout and "falling back to pip's configured index" in run.stdout
    assert installed(checkout) == {"torch": "2.13.0", "nvidia-cublas-cu12": "12.8.4.1"}


def test_the_torch_cpu_alias_runs_the_same_recipe():
    dry_run = subprocess.run(["make", "-n", "-o", ".venv/.runtime", "torch-cpu"], cwd=ROOT,
                             capture_output=True, text=True, check=True, timeout=60).stdout
    assert 'scripts/_index_answers.py "https://download.pytorch.org/whl/cpu/torch/"' in dry_run
    assert '--index-url "https://download.pytorch.org/whl/cpu" "torch==2.13.0"' in dry_run
    dev = subprocess.run(["make", "-n", "-W", "requirements-dev.txt", "-o", ".venv/.runtime", "-o", ".venv/.verify",
                          ".venv/.dev"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60).stdout
    assert dev.index("_index_answers.py") < dev.index("-r requirements-dev.txt") < dev.index("-r requirements-frameworks.txt")


@pytest.mark.parametrize(("present", "sudo", "expected"), [
    (True, "", []),  # silent: `make test-scenarios` output stays what the tests read
    (False, "", ["apt-get update -qq", "apt-get install -y -qq --no-install-recommends chromium"]),
    (False, "sudo", ["sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq",
                     "sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium"]),
])
def test_make_chromium_installs_the_distributions_package_only_when_missing(tmp_path, present, sudo, expected):
    """`make test-scenarios` runs `make chromium` first: apt-get (through sudo when not root) only when
    the browser the viewer's browser test drives is missing; `make test` never does (no sudo on a
    laptop). apt-get and sudo are stand-ins that log."""
    chromium = tmp_path / "chromium"
    if present:
        chromium.write_text("#!/bin/sh\n")
        chromium.chmod(0o755)
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    for tool in ("apt-get", "sudo"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "{log}"\n'
                                    + ('exec "$@"\n' if tool == "sudo" else ""))
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    run = subprocess.run(["make", "-s", "chromium", f"CHROMIUM={chromium}", f"SUDO={sudo}"], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True, timeout=60)
    calls = log.read_text() if log.exists() else ""
    if present:
        assert run.stdout.strip() == "" and not calls
    else:
        for line in expected:
            assert line.removeprefix("sudo ").split("env DEBIAN_FRONTEND=noninteractive ")[-1] in calls, calls
        assert ("sudo env" in calls) == bool(sudo), calls
    assert "chromium" in re.search(r"^test-scenarios:(.*)$", MAKEFILE, re.MULTILINE)[1].split()
    assert "chromium" not in re.search(r"^pytest:(.*)$", MAKEFILE, re.MULTILINE)[1].split()


def test_make_test_runs_the_policy_pack_s_tests_beside_the_installs():
    """`make test`'s first step is one parallel make of the virtualenvs and policy-test, whose chain
    (plans, the bytecode) needs only .venv's runtime packages: it runs while pip installs the dev
    and framework packages, on the core pip leaves idle, not after pytest."""
    first = re.search(r"^test: (\S+)", MAKEFILE, re.MULTILINE)
    assert first, "make test names its steps as prerequisites"
    recipe = re.search(rf"^{re.escape(first[1])}:\n\t(.*)$", MAKEFILE, re.MULTILINE)
    assert recipe and re.search(r"\s-j\d", recipe[1]), "one parallel make"
    assert {"$(ENVIRONMENTS)", "policy-test"} <= set(recipe[1].split())
    chain = subprocess.run(["make", "-n", "-B", "policy-test"], cwd=ROOT, capture_output=True, text=True,
                           check=True, timeout=60).stdout
    assert "-r requirements.txt" in chain and "policy/tests" in chain
    assert "requirements-dev.txt" not in chain and "requirements-frameworks.txt" not in chain, \
        "policy-test would wait for the dev packages"
