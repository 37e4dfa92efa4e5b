"""README.md shows what is true: its commands, its policies and its transcripts are run here.

- The quick start has the two commands of a fresh machine, and `.ci/run` runs exactly the
  second one (the test command).
- Every fenced YAML block of README.md and docs/ that holds dragate policy kinds loads cleanly
  with dragate's own policy loader (through `dragate lint --strict`, whose `policy` rule is
  every problem the loader reports); the README shows a Tenant and a DeviceClassPolicy.
- Every `console` block of README.md is a real transcript: the YAML blocks whose first line
  is `# <file>` are written to a scratch directory, each `$ dragate ...` line is run there,
  and its output must be the lines shown under it.
- Every command is in README's table, and every option of it (one of its spellings, `-o` or
  `--output`) in its section of docs/cli.md.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner
from docs_support import REPO, Block, blocks, headings, relative, section

from webhook.cli import COMMANDS, main
from webhook.cli.kubectlplugin import main as plugin

README = (REPO / "README.md").read_text()
CLI_DOC = (REPO / "docs" / "cli.md").read_text()
POLICY_KINDS = {"Tenant", "DeviceClassPolicy", "LegacyResourceMapping", "Settings"}
README_MAX_LINES = 200  # "a few screens"
FRESH_MACHINE_INSTALL = (
    "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/dragate serve"
)


def policy_blocks() -> list[tuple[str, Block]]:
    """Every YAML block in README.md and docs/ with a dragate policy kind in it."""
    found = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for block in blocks(path.read_text()):
            if block.lang == "yaml" and POLICY_KINDS & kinds(block):
                found.append((f"{relative(path)}:{block.line}", block))
    return found


def kinds(block: Block) -> set[str]:
    """The dragate kinds a YAML block holds; a Helm template (YAML only once rendered) none."""
    if "{{" in block.text:
        return set()
    docs = list(yaml.safe_load_all(block.text))
    return {
        str(doc.get("kind"))
        for doc in docs
        if isinstance(doc, dict) and str(doc.get("apiVersion", "")).startswith("dragate.io/")
    }


def test_quick_start_has_the_two_commands_and_ci_runs_the_test_command() -> None:
    commands = [b.text.strip() for b in blocks(section(README, "Quick start")) if b.lang == "sh"]
    assert len(commands) == 2 and commands[0] == FRESH_MACHINE_INSTALL, commands
    ci = [
        line
        for line in (REPO / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert ci[-1] == f"exec {commands[1]}", "the last step of .ci/run must be README's test command"


def test_the_install_needs_no_system_pip_so_works_on_an_externally_managed_python() -> None:
    """A stock Debian/Ubuntu python3 (PEP 668) refuses `pip install` outside a virtual env."""
    install = next(b.text.strip() for b in blocks(section(README, "Quick start")) if b.lang == "sh")
    first, *rest = [shlex.split(step) for step in install.split("&&")]
    assert first[:3] == ["python3", "-m", "venv"] and len(first) == 4, install
    assert rest and all(step[0].startswith(f"{first[3]}/bin/") for step in rest), install


def test_readme_shows_a_first_policy_and_a_check_admitting_and_denying() -> None:
    shown = set().union(
        *(kinds(block) for where, block in policy_blocks() if where.startswith("README.md:"))
    )
    assert {"Tenant", "DeviceClassPolicy"} <= shown
    outputs = [output for command, output in transcript_steps() if " check " in f" {command} "]
    assert any("\nallow " in out for out in outputs) and any("\nDENY " in out for out in outputs)


@pytest.mark.parametrize(
    "block", [b for _, b in policy_blocks()], ids=[where for where, _ in policy_blocks()]
)
def test_every_policy_example_loads(block: Block, tmp_path: Path) -> None:
    (tmp_path / "example.yaml").write_text(block.text)
    result = CliRunner().invoke(main, ["lint", "--strict", str(tmp_path)])
    assert result.exit_code == 0, result.output


def named_files(markdown: str) -> dict[str, str]:
    """The YAML blocks whose first line is `# <file>`: the files a transcript reads."""
    return {
        b.text.splitlines()[0][2:].strip(): b.text
        for b in blocks(markdown)
        if b.lang == "yaml" and b.text.startswith("# ")
    }


def transcript_steps() -> list[tuple[str, str]]:
    """(command line, expected output) for every `$ ` line of README's console blocks."""
    steps = []
    for block in (b for b in blocks(README) if b.lang == "console"):
        for chunk in block.text.split("$ ")[1:]:
            command, _, output = chunk.partition("\n")
            steps.append((command, output))
    return steps


@pytest.mark.parametrize(
    ("command", "output"), transcript_steps(), ids=[c for c, _ in transcript_steps()]
)
def test_readme_transcripts_are_real(
    command: str, output: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, text in named_files(README).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    program, *args = shlex.split(command)
    assert program == "dragate"
    assert CliRunner().invoke(main, args).stdout == output


def options(command: click.Command) -> set[tuple[str, ...]]:
    """Every option of a command and of its subcommands, as its spellings (`-o`, `--output`)."""
    found = {tuple(p.opts) for p in command.params if isinstance(p, click.Option)}
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            found |= options(sub)
    return found


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_is_in_the_readme_and_every_option_in_docs_cli(name: str) -> None:
    assert f"| [`dragate {name}" in section(README, "Commands")
    command = main.get_command(click.Context(main), name)
    assert command is not None
    documented = "\n".join(section(CLI_DOC, heading) for heading in cli_headings(name))
    missing = sorted(o[-1] for o in options(command) if not any(s in documented for s in o))
    assert not missing, f"docs/cli.md does not document {missing} of `dragate {name}`"


@pytest.mark.parametrize("name", sorted(plugin.commands))
def test_every_kubectl_plugin_command_is_in_the_readme_and_every_option_in_docs_cli(
    name: str,
) -> None:
    assert f"[`kubectl dragate {name}" in section(README, "Commands")
    documented = "\n".join(
        section(CLI_DOC, h) for h in headings(CLI_DOC) if f"`kubectl dragate {name}`" in h
    )
    missing = sorted(
        o[-1] for o in options(plugin.commands[name]) if not any(s in documented for s in o)
    )
    assert not missing, f"docs/cli.md does not document {missing} of `kubectl dragate {name}`"


def cli_headings(name: str) -> list[str]:
    return [h for h in headings(CLI_DOC) if f"`dragate {name}`" in h]


def test_readme_fits_a_few_screens_and_points_at_the_generated_benchmarks() -> None:
    assert len(README.splitlines()) <= README_MAX_LINES
    assert "](../tests/bench/results/report.md)" in (REPO / "docs" / "benchmarks.md").read_text()


def lint_rules() -> list[str]:
    listed = CliRunner().invoke(main, ["lint", "--list-rules"]).stdout
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


@pytest.mark.parametrize("rule", lint_rules())
def test_every_lint_rule_is_in_the_rule_table_of_docs_cli(rule: str) -> None:
    table = section(CLI_DOC, "`dragate lint`")
    assert f"`{rule}`" in table, f"docs/cli.md's lint table does not list {rule}"
