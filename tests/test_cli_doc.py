"""docs/cli.md is the CLI's own: written from the typer app (pkroof/cli_doc.py), every command and option with an
example, and every example parses as the CLI would parse it."""

import shlex
from pathlib import Path

from pkroof.cli_doc import COMMANDS, commands, example, render

DOC = Path(__file__).parents[1] / "docs" / "cli.md"


def _options(command):
    return [p for p in command.params if p.param_type_name == "option" and p.name != "help"]


def test_docs_cli_md_is_what_the_app_says():
    assert DOC.read_text() == render(), "docs/cli.md is stale: python -m pkroof.cli_doc > docs/cli.md"


def test_every_command_and_option_has_an_example():
    found = commands()
    assert set(found) == set(COMMANDS)  # a new command needs its example, a removed one loses it
    for name, command in found.items():
        for p in _options(command):
            assert example(name, p).split()[0] in p.opts, (name, p.opts)


def test_every_example_parses():
    for name, command in commands().items():
        words = shlex.split(COMMANDS[name])
        assert words[: 1 + len(name.split())] == ["pkroof", *name.split()], COMMANDS[name]
        args = words[1 + len(name.split()) :]
        command.make_context(name, list(args))  # an unknown option or a bad value raises here
        for p in _options(command):  # each option's example, beside the command's own
            command.make_context(name, [*args, *shlex.split(example(name, p))])
