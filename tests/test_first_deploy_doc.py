"""docs/first-deploy.md is followed by people on their own shell, start to end: what it tells
them to type must work in zsh as in bash, every program it uses is in its prerequisites, and
what the bootstrap prints is quoted where it is used."""

from __future__ import annotations

import re

from stack_configs import ROOT

FIRST_DEPLOY = ROOT / "docs" / "first-deploy.md"
DELIVERY = ROOT / "docs" / "delivery.md"
SHELL_TAGS = {"", "bash", "sh", "shell", "console"}
# A URL the bootstrap prints (backendUrl, secretsProviders): zsh takes its `?` for a glob and
# stops with "no matches found" unless it is quoted.
QUERY_URL = re.compile(r"""(?P<before>["']?)(?:s3|awskms)://[^\s"'`]*\?[^\s"'`]*""")


def commands(page) -> list[str]:
    """The lines of the page's shell blocks and of its inline code that start with a program."""
    text = page.read_text()
    lines, tag = [], None  # tag: the open block's tag, None outside a block
    for line in text.splitlines():
        if line.strip().startswith("```"):
            tag = line.strip()[3:] if tag is None else None
        elif tag in SHELL_TAGS:
            lines.append(line.strip())
    inline = re.findall(r"`((?:(?:pulumi|aws|kubectl|gh|docker|jq|make) |scripts/)[^`]*)`", text)
    return [line for line in lines + inline if line and not line.startswith("#")]


def test_the_urls_with_a_query_are_quoted_where_they_are_typed():
    unquoted = [(page.name, line) for page in (FIRST_DEPLOY, DELIVERY) for line in commands(page)
                for url in QUERY_URL.finditer(line) if not url["before"]]
    assert not unquoted, unquoted


def test_every_program_the_page_uses_is_a_prerequisite():
    text = FIRST_DEPLOY.read_text()
    table = text[text.index("## Prerequisites"):text.index("## The order")]
    used = {re.split(r"[\s|]", part.strip())[0] for line in commands(FIRST_DEPLOY)
            for part in re.split(r"\||\$\(|&&|;", line) if part.strip()}
    tools = {"pulumi": "Pulumi CLI", "aws": "AWS CLI", "kubectl": "`kubectl`", "jq": "`jq`", "gh": "`gh`",
             "docker": "Docker"}
    missing = [tool for tool, row in tools.items() if tool in used and row not in table]
    assert not missing, f"docs/first-deploy.md uses {missing} but its prerequisites do not list them"
    assert {"kubectl", "jq"} <= used


def test_the_page_verifies_each_stack_and_warns_of_the_bootstraps_first_run():
    text = FIRST_DEPLOY.read_text()
    assert "scripts/verify --stack <stack>" in text
    order = text[text.index("## The order"):text.index("## The passphrase step")]
    # The one error a fresh account's first bootstrap `pulumi up` is expected to report (bootstrap/billing.py).
    assert "CostAllocationTag" in order and "costAllocationTags: {activate: false}" in order


def test_the_checklist_has_the_code_owners_placeholder():
    owners = {word for line in (ROOT / ".github" / "CODEOWNERS").read_text().splitlines()
              if line.strip() and not line.startswith("#") for word in line.split()[1:]}
    assert owners == {"@example-org/gpu-training-admins"}, "the CODEOWNERS example changed: update the checklist row"
    text = FIRST_DEPLOY.read_text()
    section = text[text.index("## The values to replace"):].split("\n## ", 1)[0]
    assert any(re.match(r"\| *\d+ *\| `\.github/CODEOWNERS`", line) for line in section.splitlines())


def test_the_page_says_who_creates_the_peoples_roles():
    text = FIRST_DEPLOY.read_text()
    assert "Nothing in this repository creates them" in text and "`ml-platform-admin`" in text
