"""Every command a fenced block of README.md or docs/*.md shows is classified: the ones that run
offline run here as written, in a copy of the checkout and without an activated virtualenv
(PATH without .venv/bin, no VIRTUAL_ENV); the rest are listed with the reason they cannot run
here (a cloud account, a cluster, the suite itself). A command that is neither fails the test,
so a new block is classified, not skipped.

Which lines are commands: every line of a `bash`/`sh`/`shell` block; the `$ ` lines of a
`console` block or of any block that has them (the lines after one are what it prints); an
untagged block whose first line starts with a known program (its indented lines are output).
Other tags (`text`, `yaml`, `python`, `mermaid`, ...) hold no commands.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from stack_configs import ROOT

SHELL_TAGS = {"bash", "sh", "shell", "console"}
KNOWN_PROGRAMS = {"make", "pulumi", "aws", "kubectl", "docker", "helm", "git", "cd", "cat", "curl", "python",
                  "python3", "jq", "kill", "rm"}
FENCE = re.compile(r"^```(?P<tag>[\w-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.S | re.M)
HEREDOC = re.compile(r"<<-?\s*'?(?P<end>\w+)'?")

# A program anywhere in a command (at its start, after a pipe, `&&`, `;` or inside `$(...)`)
# that makes it impossible to run here.
NEEDS_MORE = {
    "pulumi": "the Pulumi CLI and a state backend (not installed: the project runs without them)",
    "aws": "an AWS account and credentials",
    "kubectl": "a live cluster",
    "docker": "a container registry (and a Docker daemon)",
    "helm": "a chart repository on the internet",
    "curl": "a live endpoint (a port-forward into the cluster)",
    "kill": "a port-forward into the cluster to stop",
}
# Whole commands that cannot run here, and why.
NOT_RUNNABLE = [
    (r"make test", "the whole suite (lint, every test, the policy pack's tests): this test is part of it"),
    (r"(scripts/verify|make verify) (?!.*--help).*", "checks a live cluster after `pulumi up` (docs/verify.md)"),
    (r"scripts/gpu-training (job (submit|status|logs|stop|list) (?!.*--dry-run).*|completion bash.*)",
     "submits to, reads or stops jobs on a live cluster with your kubeconfig (docs/run-your-first-job.md)"),
    (r"FUZZ_PROFILE=nightly .*", "the nightly fuzz profile: thousands of examples, many minutes"),
    (r"cd \S+", "moves the shell for the pulumi commands that follow it; nothing to check alone"),
    (r".*<[a-z][\w-]*>.*", "holds a placeholder (<...>) the reader fills in"),
    (r"(python -m venv /tmp/qs-venv|pip install torch --index-url|export TRAIN_JOB_ID=quickstart"
     r"|TRAIN_HEARTBEAT_FILE=/tmp/qs/pod[01]/heartbeat python -m launcher) .*",
     "the quick start of docs/bring-your-own-trainer.md: two terminals and a download; "
     "tests/trainer/test_bring_your_own_trainer.py test_the_quick_start_runs_as_the_doc_says runs its steps"),
]


@dataclass(frozen=True)
class Runnable:
    pattern: str
    returncode: int = 0
    """2 for a documented error: its shown output must then be what it prints."""
    slow: bool = False
    """Plans prod or several stacks (each half a minute or more on two busy cores): runs only with
    DOC_COMMANDS=all. The rest run in `make test`."""
    writes: bool = False
    """Writes files that later commands of its page read (`make plan STACK=team-nlp-prod` after
    `scripts/new-team-stack nlp prod`): it has run in a checkout before any later command of its
    page runs there, whichever pytest-xdist worker runs which command."""


RUNNABLE = [
    Runnable(r"make (plan|cost) STACK=prod( ARGS=\"[^\"]*\")?", slow=True),
    Runnable(r"make plan STACK=[\w-]+"),
    Runnable(r'make cost STACK=[\w-]+( ARGS="[^"]*")?'),
    Runnable(r"make plan-diff BASE=origin/main", slow=True),
    Runnable(r"make policy", slow=True),
    Runnable(r"make (policy-venv|\.venv/\.verify)"),
    Runnable(r"scripts/plan\.py --stack dev --set region", returncode=2),
    Runnable(r"scripts/new-team-stack 'a/\.\./b' dev", returncode=2),
    Runnable(r"scripts/new-team-stack [a-z]+ (dev|staging|prod)", writes=True),
    Runnable(r"(\.venv/bin/python )?scripts/(plan|cost|policy_config|config_docs|doc_figures)\.py( \S+)*"),
    Runnable(r"scripts/plan-diff origin/main HEAD --stack \w+", slow=True),
    Runnable(r"scripts/[\w-]+ --help"),
    Runnable(r"scripts/gpu-training job submit first-job\.yaml --stack team-[\w-]+ --dry-run( \S+)*"),
    Runnable(r"scripts/gpu-training job submit bad-job\.yaml --stack team-[\w-]+ --dry-run", returncode=2),
    Runnable(r"git add stacks/\S+"),
    Runnable(r"cat > [\w.-]+ <<'EOF'\n.*\nEOF", writes=True),
]


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    text: str
    shown: tuple[str, ...] = ()
    """What the page shows it printing (console blocks)."""


def logical_lines(lines: list[str]) -> list[tuple[int, str]]:
    """(index of its first line, command): continuations, open quotes and heredocs joined."""
    result, index = [], 0
    while index < len(lines):
        start, text = index, lines[index]
        while True:
            heredoc = HEREDOC.search(text)
            if text.endswith("\\") and index + 1 < len(lines):
                index += 1
                text = text[:-1].rstrip() + " " + lines[index].strip()
                continue
            if heredoc and not text.rstrip().endswith(f"\n{heredoc['end']}"):
                while index + 1 < len(lines) and lines[index].strip() != heredoc["end"]:
                    index += 1
                    text += "\n" + lines[index]
                break
            if _goes_on(text) and index + 1 < len(lines):
                index += 1
                text += "\n" + lines[index]
                continue
            break
        result.append((start, text))
        index += 1
    return result


def _goes_on(text: str) -> bool:
    """An open quote, a trailing pipe or `&&`, or a loop or `if` not closed yet."""
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return True
    body = _strip_comment(text.splitlines()[-1]) if text.strip() else ""
    opened = len(re.findall(r"^\s*(?:while|for|until)\b", text, re.M)) + len(re.findall(r"^\s*if\b", text, re.M))
    closed = len(re.findall(r"\bdone\b", text)) + len(re.findall(r"\bfi\b", text))
    return body.endswith(("|", "&&")) or opened > closed


def looks_like_command(line: str) -> bool:
    words = re.sub(r"^([A-Z_]+=\S*\s+)+", "", line.strip()).split()
    return bool(words) and (words[0] in KNOWN_PROGRAMS or words[0].startswith(("scripts/", ".venv/bin/", "./")))


def _strip_comment(text: str) -> str:
    """The command without a trailing `# comment` (a '#' in quotes or inside a word stays)."""
    quote = ""
    for index, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or text[index - 1].isspace()):
            return text[:index].strip()
    return text.strip()


def block_commands(page: str, tag: str, first_line: int, body: str) -> list[Command]:
    lines = body.splitlines()
    if tag == "console" or any(line.startswith("$ ") for line in lines):
        found: list[Command] = []
        for number, line in enumerate(lines):
            if line.startswith("$ "):
                found.append(Command(page, first_line + number, _strip_comment(line[2:])))
            elif found and line.strip():
                last = found[-1]
                found[-1] = Command(last.page, last.line, last.text, (*last.shown, line.strip()))
        return found
    if tag not in SHELL_TAGS and not (tag == "" and lines and looks_like_command(lines[0])):
        return []
    if tag == "":   # an untagged block of commands: its indented lines are their output
        lines = [line if not line[:1].isspace() or (index and lines[index - 1].endswith("\\")) else ""
                 for index, line in enumerate(lines)]
    commands = []
    for index, text in logical_lines(lines):
        stripped = _strip_comment(text)
        if stripped and not stripped.startswith("#"):
            commands.append(Command(page, first_line + index, stripped))
    return commands


def page_commands(path: Path) -> list[Command]:
    text = path.read_text()
    name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    return [command for match in FENCE.finditer(text)
            for command in block_commands(name, match["tag"], text.count("\n", 0, match.start("body")) + 1,
                                          match["body"])]


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def programs(command: str) -> set[str]:
    words = set()
    for segment in re.split(r"\||&&|;|\$\(|`|\{|\n", command):
        tokens = re.sub(r"^\s*((do|then|else|while|until|if|!)\s+|[A-Za-z_]+=\S*\s+)*", "", segment).split()
        if tokens:
            words.add(tokens[0])
    return words


def classify(command: str) -> Runnable | str | None:
    """Its Runnable, the reason it cannot run here, or None: not classified."""
    blocked = sorted(programs(command) & set(NEEDS_MORE))
    if blocked:
        return f"needs {NEEDS_MORE[blocked[0]]}"
    for pattern, reason in NOT_RUNNABLE:
        if re.fullmatch(pattern, command, re.S):
            return reason
    return next((rule for rule in RUNNABLE if re.fullmatch(rule.pattern, command, re.S)), None)


ALL_COMMANDS = [command for page in pages() for command in page_commands(page)]
RUN = list({c.text: c for c in ALL_COMMANDS if isinstance(classify(c.text), Runnable)}.values())  # deduplicated


def test_every_documented_command_is_classified():
    assert len(ALL_COMMANDS) > 40, "the walker finds (almost) no commands: it would pass on nothing"
    unclassified = [f"{c.page}:{c.line}: {c.text}" for c in ALL_COMMANDS if classify(c.text) is None]
    assert not unclassified, ("commands in the docs that tests/test_doc_commands.py neither runs nor lists with "
                              f"a reason (add them to RUNNABLE or NOT_RUNNABLE): {unclassified}")


@pytest.mark.parametrize(("tag", "body", "expected"), [
    ("bash", "make plan STACK=dev   # comment\nmake test\n", ["make plan STACK=dev", "make test"]),
    ("", "make cost STACK=prod                # the breakdown\n", ["make cost STACK=prod"]),
    ("", "stack prod: 297 resources\n  cost: $1\n", []),
    ("", "pulumi config set x <value>\n  -> stack file: y\n", ["pulumi config set x <value>"]),
    ("", "make cost STACK=dev ARGS=\"--efs-gb 50\"  # volumes\n", ['make cost STACK=dev ARGS="--efs-gb 50"']),
    ("", "$ scripts/plan.py --stack dev --set region\nplan.py: error: ...\n", ["scripts/plan.py --stack dev --set region"]),
    ("sh", "aws ec2 x \\\n  --y z\n", ["aws ec2 x --y z"]),
    ("bash", "cat > f.json <<'EOF'\n{\"a\": 1}\nEOF\nnext\n", ["cat > f.json <<'EOF'\n{\"a\": 1}\nEOF", "next"]),
    ("bash", "python -c '\nprint(1)' |\nwhile read x; do\n  echo $x\ndone\n", None),
    ("yaml", "make: not a command\n", []),
])
def test_the_walker_reads_blocks_as_a_shell_would(tag, body, expected):
    found = [c.text for c in block_commands("page.md", tag, 1, body)]
    if expected is None:
        assert len(found) >= 1 and found[0].startswith("python -c '\nprint(1)'"), found
    else:
        assert found == expected


@pytest.mark.parametrize(("command", "verdict"), [
    ("make plan STACK=dev", Runnable),
    ("make test", str),
    ("NODE=$(kubectl get nodes -o name)", str),
    (".venv/bin/python -c 'x' | while read m; do aws eks y; done", str),
    ("scripts/verify --stack prod", str),
    ("scripts/verify --help", Runnable),
    ("terraform apply", type(None)),
    ("make plan STACK=dev; rm -rf /", type(None)),
])
def test_a_command_is_runnable_blocked_or_unclassified(command, verdict):
    assert isinstance(classify(command), verdict)


# --- running them -----------------------------------------------------------------------------

def _venv_copy(source: Path, target: Path) -> None:
    """A virtualenv that runs the shared one's interpreter and packages, with stamps of its own,
    dated now: make never reinstalls into the shared one from the copy."""
    target.mkdir(parents=True)
    now = time.time()
    for entry in source.iterdir():
        if entry.name.startswith("."):
            if entry.is_file() and entry.name != ".bytecode":
                (target / entry.name).touch()
                os.utime(target / entry.name, (now, now))   # one time: no stamp is older than another
        else:
            (target / entry.name).symlink_to(entry.resolve())


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """This checkout's files (tracked and new, never ignored ones) as a repository of one commit,
    with `origin/main` at it, and the virtualenvs make would otherwise build."""
    target = tmp_path_factory.mktemp("doc-commands") / "repo"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    for venv in (".venv", "policy/venv"):
        if (ROOT / venv).is_dir():
            _venv_copy(ROOT / venv, target / venv)
    git = ["git", "-c", "user.name=docs", "-c", "user.email=docs@example.invalid", "-c", "commit.gpgsign=false"]
    for args in (["init", "--quiet", "--initial-branch=main"], ["add", "-A"], ["commit", "--quiet", "-m", "docs"],
                 ["update-ref", "refs/remotes/origin/main", "HEAD"]):
        subprocess.run([*git, *args], cwd=target, check=True, capture_output=True)
    return target


def environment_without_a_venv() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and not (Path(p) / "activate").exists() and ".venv" not in p)
    return env


_WRITERS_RUN: dict[Path, dict[Command, subprocess.CompletedProcess[str]]] = {}
"""Per checkout, the writing commands that have run in it, with what each printed."""


def _earlier_writers(command: Command, checkout: Path) -> list[Command]:
    """The commands of `command`'s page above it that write what it may read, not yet run in `checkout`."""
    done = _WRITERS_RUN.setdefault(checkout, {})
    return [c for c in RUN if c.page == command.page and c.line < command.line and c not in done
            and getattr(classify(c.text), "writes", False)]


def run_in(checkout: Path, command: Command) -> subprocess.CompletedProcess[str]:
    """`command` run in `checkout`; a writing command once per checkout (its later test judges that run)."""
    done = _WRITERS_RUN.setdefault(checkout, {})
    if command in done:
        return done[command]
    result = subprocess.run(["bash", "-c", command.text], cwd=checkout, env=environment_without_a_venv(),
                            capture_output=True, text=True, timeout=600, check=False)
    if getattr(classify(command.text), "writes", False):
        done[command] = result
    return result


@pytest.mark.parametrize("command", RUN, ids=[c.text.splitlines()[0][:60] for c in RUN])
def test_each_offline_command_runs_as_written(command, checkout):
    rule = classify(command.text)
    assert isinstance(rule, Runnable)
    if rule.slow and os.environ.get("DOC_COMMANDS") != "all":
        pytest.skip("plans prod or several stacks: run with DOC_COMMANDS=all")
    for earlier in _earlier_writers(command, checkout):
        run_in(checkout, earlier)  # judged by its own test
    result = run_in(checkout, command)
    output = result.stdout + result.stderr
    where = f"{command.page}:{command.line}: `{command.text}`"
    assert result.returncode == rule.returncode, f"{where} exited {result.returncode}:\n{output[-3000:]}"
    assert "Traceback" not in output, f"{where} printed a traceback:\n{output[-3000:]}"
    if rule.returncode:
        missing = [line for line in command.shown if line not in output]
        assert not missing, f"{where} no longer prints what the page shows: {missing}\n{output[-2000:]}"
