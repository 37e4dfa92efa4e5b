"""docs/cli.md's flag tables list exactly the options click defines, so the reference cannot
drift from the commands.

Every command (`dragate CMD`, each subcommand of a group as `dragate GROUP SUB`, and
`kubectl dragate CMD`) has a section under its name in backticks, and the first table of
that section whose header is `| flag | default | meaning |` is its flag table. A row is one
option: the `flag` cell names each of its spellings as a code span, the value's placeholder
after a space (`-o`, `--output FORMAT`; an on/off pair `--quota-grants`, `--no-quota-grants`).

The `default` cell is compared where click states a default (what `--help` shows): it starts
with that value as a code span (`8192`, `deny`, `$POD_NAMESPACE`; for an on/off pair the
spelling in force, `--quota-grants`), and with `required` for a required option. A default
computed at run time (the newest minor, the context's namespace) and a flag that is off are
said in words and not compared.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import click
import pytest
from docs_support import REPO, section

from webhook.cli import COMMANDS, main
from webhook.cli.kubectlplugin import main as plugin

CLI_DOC = (REPO / "docs" / "cli.md").read_text()
HEADER = "| flag | default | meaning |"
CODE = re.compile(r"`([^`]+)`")
CELL_SPLIT = re.compile(r"(?<!\\)\|")
UNSET = getattr(click.core, "UNSET", None)
"""What click 8.3 and later hold as the default of an option given none (older ones: None)."""


def walk(path: str, command: click.Command) -> Iterator[tuple[str, click.Command]]:
    """The command at `path`, or each subcommand of a group under its own path."""
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            yield from walk(f"{path} {name}", command.commands[name])
    else:
        yield path, command


def commands() -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    for name in sorted(COMMANDS):
        command = main.get_command(click.Context(main), name)
        assert command is not None, name
        found += walk(f"dragate {name}", command)
    found += walk("kubectl dragate", plugin)
    return found


CASES = commands()


def flag_rows(path: str) -> list[tuple[frozenset[str], str]]:
    """(spellings, default cell) of each row of the command's flag table."""
    lines = section(CLI_DOC, f"`{path}`").splitlines()
    assert HEADER in lines, f"docs/cli.md's section `{path}` has no flag table"
    start = lines.index(HEADER) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        flag, default, _meaning = (c.strip() for c in CELL_SPLIT.split(line.strip()[1:-1]))
        rows.append((frozenset(span.split()[0] for span in CODE.findall(flag)), default))
    return rows


def spellings(option: click.Option) -> frozenset[str]:
    return frozenset([*option.opts, *option.secondary_opts])


def options(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option)]


def stated_default(option: click.Option) -> str | None:
    """The default as `--help` shows it; None when click states none (computed, or off)."""
    if isinstance(option.show_default, str):
        return option.show_default
    default = option.default
    if default is None or default is UNSET or callable(default):
        return None
    if option.is_flag:
        on_off = option.secondary_opts and isinstance(default, bool)
        return (option.opts[0] if default else option.secondary_opts[0]) if on_off else None
    if isinstance(default, list | tuple):
        return ", ".join(str(d) for d in default) or None
    return str(default)


@pytest.mark.parametrize(("path", "command"), CASES, ids=[path for path, _ in CASES])
def test_the_flag_table_lists_exactly_the_options(path: str, command: click.Command) -> None:
    documented = [names for names, _ in flag_rows(path)]
    defined = [spellings(o) for o in options(command)]
    assert len(documented) == len(set(documented)), f"`{path}`: a flag listed twice"
    missing = sorted(sorted(s) for s in set(defined) - set(documented))
    extra = sorted(sorted(s) for s in set(documented) - set(defined))
    assert not missing and not extra, f"`{path}`: not in its table {missing}; not options {extra}"


@pytest.mark.parametrize(("path", "command"), CASES, ids=[path for path, _ in CASES])
def test_the_flag_table_states_clicks_defaults(path: str, command: click.Command) -> None:
    cells = dict(flag_rows(path))
    wrong = []
    for option in options(command):
        cell, stated = cells.get(spellings(option), ""), stated_default(option)
        if option.required and not cell.startswith("required"):
            wrong.append(f"{option.opts[-1]}: {cell!r} should say required")
        elif stated is not None and not cell.startswith(f"`{stated}`"):
            wrong.append(f"{option.opts[-1]}: {cell!r} should start with `{stated}`")
    assert not wrong, f"`{path}`: " + "; ".join(wrong)


def test_every_command_and_subcommand_is_a_case() -> None:
    paths = [path for path, _ in CASES]
    assert {"dragate serve", "dragate certs create", "kubectl dragate why"} <= set(paths)
    assert len(paths) == len(set(paths))
