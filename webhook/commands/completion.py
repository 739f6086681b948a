"""``draguard completion bash|zsh``: a shell completion script, written out from the parser itself.

The script is static: every command, flag and choice is in it, so pressing TAB never runs
draguard. It is made by walking the argparse parsers, so a new flag is completed as soon as it
exists. zsh runs the same script through its ``bashcompinit`` layer.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any

from webhook.commands import add_command, build_parser

DESCRIPTION = """\
Print a completion script for bash or zsh: commands, flags and the values of flags with a fixed
set of choices; file names where a flag takes a file or directory.

bash: draguard completion bash > ~/.local/share/bash-completion/completions/draguard
zsh:  draguard completion zsh > ~/.draguard-completion.zsh, and in ~/.zshrc:
      source ~/.draguard-completion.zsh"""

SHELLS = ("bash", "zsh")
# A flag whose metavar names one of these takes a path: complete file names after it.
PATH_METAVARS = ("FILE", "DIR", "PATH")


def register(sub: Any) -> None:
    p = add_command(sub, "completion", DESCRIPTION)
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(func=run)


@dataclass
class Level:
    """One parser: ``draguard``, ``draguard certs``, ``draguard certs generate``."""

    path: str
    flags: list[str] = field(default_factory=list)  # offered for a word that starts with -
    commands: list[str] = field(default_factory=list)  # subcommands, or the values of a positional
    choices: list[tuple[list[str], list[str]]] = field(default_factory=list)  # (flags, their values)
    paths: list[str] = field(default_factory=list)  # flags that take a file or directory
    values: list[str] = field(default_factory=list)  # flags that take a free value
    positional_paths: bool = False  # bare words are paths (draguard test PATH...)
    children: dict[str, str] = field(default_factory=dict)  # subcommand -> its level's path


def levels(parser: argparse.ArgumentParser, path: str = "draguard") -> list[Level]:
    """Every parser under ``parser``, the parser first."""
    level = Level(path)
    below: list[Level] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                level.commands.append(name)
                level.children[name] = f"{path} {name}"
                below += levels(child, f"{path} {name}")
            continue
        if not action.option_strings:
            level.commands += [str(c) for c in action.choices or ()]
            level.positional_paths |= _takes_path(action)
            continue
        level.flags += action.option_strings
        if action.nargs == 0:
            continue
        if action.choices is not None:
            level.choices.append((list(action.option_strings), [str(c) for c in action.choices]))
        elif _takes_path(action):
            level.paths += action.option_strings
        else:
            level.values += action.option_strings
    return [level, *below]


def _takes_path(action: argparse.Action) -> bool:
    metavar = str(action.metavar or action.dest).upper()
    return any(word in metavar for word in PATH_METAVARS)


def _case(patterns: list[str], then: str) -> str:
    return f"        {'|'.join(shlex.quote(p) for p in patterns)}) {then};;"


def bash_script(parser: argparse.ArgumentParser) -> str:
    """The bash completion function for ``parser``'s program, and its registration."""
    all_levels = levels(parser)
    step = [
        _case([f"{level.path}:{name}"], f"cmd={shlex.quote(child)}")
        for level in all_levels
        for name, child in level.children.items()
    ]
    after_flag: list[str] = []
    for level in all_levels:
        for flags, values in level.choices:
            reply = f'COMPREPLY=($(compgen -W {shlex.quote(" ".join(values))} -- "$cur")); return'
            after_flag.append(_case([f"{level.path}:{f}" for f in flags], reply))
        if level.paths:
            after_flag.append(_case([f"{level.path}:{f}" for f in level.paths], "_draguard_files; return"))
        if level.values:
            after_flag.append(_case([f"{level.path}:{f}" for f in level.values], "return"))
    offered = [
        _case(
            [level.path],
            f"flags={shlex.quote(' '.join(level.flags))} commands={shlex.quote(' '.join(level.commands))} "
            f"files={int(level.positional_paths)}",
        )
        for level in all_levels
    ]
    return "\n".join(
        [
            "# draguard completion for bash (draguard completion bash)",
            "_draguard_files() {",
            "    compopt -o filenames 2>/dev/null",
            '    COMPREPLY=($(compgen -f -- "$cur"))',
            "}",
            "_draguard() {",
            '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
            "    local cmd=draguard flags= commands= files=0 i",
            "    COMPREPLY=()",
            "    for ((i = 1; i < COMP_CWORD; i++)); do",
            '        case "$cmd:${COMP_WORDS[i]}" in',
            *step,
            "        esac",
            "    done",
            '    case "$cmd:$prev" in',
            *after_flag,
            "    esac",
            '    case "$cmd" in',
            *offered,
            "    esac",
            '    if [[ "$cur" == -* ]]; then',
            '        COMPREPLY=($(compgen -W "$flags" -- "$cur"))',
            "    elif [[ $files == 1 ]]; then",
            "        _draguard_files",
            "    else",
            '        COMPREPLY=($(compgen -W "$commands" -- "$cur"))',
            "    fi",
            "}",
            "complete -F _draguard draguard",
            "",
        ]
    )


def zsh_script(parser: argparse.ArgumentParser) -> str:
    """The bash script run through zsh's bash-completion layer."""
    return "\n".join(
        [
            "# draguard completion for zsh (draguard completion zsh)",
            "if ! (( $+functions[compdef] )); then autoload -U +X compinit && compinit; fi",
            "autoload -U +X bashcompinit && bashcompinit",
            bash_script(parser),
        ]
    )


def run(args: argparse.Namespace) -> int:
    parser = build_parser()
    sys.stdout.write(bash_script(parser) if args.shell == "bash" else zsh_script(parser))
    return 0
