"""Bash completion from the parser itself (argparse-native: no completion library to install).

    source <(gpu-training completion bash)

Completes the commands, each action's flags, and file names for JOBFILE and --kubeconfig."""

from __future__ import annotations

import argparse


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its subcommands here; it has no public accessor
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(flag for action in parser._actions for flag in action.option_strings if flag.startswith("--"))


def bash_completion(parser: argparse.ArgumentParser) -> str:
    groups = _subparsers(parser)
    cases = []
    for group, group_parser in groups.items():
        actions = _subparsers(group_parser)
        for action, action_parser in actions.items():
            cases.append(f'    "{group} {action}") words="{" ".join(_flags(action_parser))}" ;;')
        cases.append(f'    "{group}") words="{" ".join(actions) or " ".join(_flags(group_parser))}" ;;')
    return "\n".join([
        "_gpu_training() {",
        '  local cur="${COMP_WORDS[COMP_CWORD]}" key="${COMP_WORDS[1]} ${COMP_WORDS[2]}" words',
        '  [ "$COMP_CWORD" -le 2 ] && key="${COMP_WORDS[1]}"',
        '  [ "$COMP_CWORD" -le 1 ] && key=""',
        '  case "$key" in',
        f'    "") words="{" ".join(groups)}" ;;',
        *cases,
        "    *) words=\"\" ;;",
        "  esac",
        '  COMPREPLY=($(compgen -W "$words" -- "$cur") $(compgen -f -- "$cur"))',
        "}",
        "complete -o filenames -F _gpu_training gpu-training",
    ])
