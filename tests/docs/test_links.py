"""Every reference in the documentation and in webhook/'s docstrings resolves.

Documents read: every Markdown file of the repository (README.md, docs/, charts/, certs/,
tests/**/README.md, ...; hidden and build directories aside) and every ``*.py`` under
webhook/ (its docstrings, found with ``ast``, and its ``#`` comments, found with ``tokenize``).
Fenced code blocks in Markdown are examples, not references, and are never read.

Rules, each a row of RULES:

markdown-links
    A Markdown link or image ``[text](target)`` whose target has no URL scheme (``https:``,
    ``mailto:``) names an existing file or directory relative to the Markdown file; a
    ``#anchor``, alone or after a ``.md`` target, is the GitHub anchor of a heading there.
markdown-paths, python-paths
    A *path* is a token of ``[A-Za-z0-9_.*-]`` segments joined by ``/`` (so no spaces, ``$``,
    ``~``, ``<``, ``{``, ``:``, and never starting with ``/``: those are commands, variables,
    placeholders or paths inside the image) that contains a ``/`` and either has a first
    segment that is an entry of a base directory (``webhook/engine/quota.py``, ``tests/bench/``,
    ``policies/``; ``crds/`` in the chart README) or ends in one of KNOWN_EXTENSIONS
    (``design/architecture.md``). Tokens like ``nvidia.com/gpu``, ``resource.k8s.io/v1`` or
    ``pkg/cel/library/*_test.go`` (another repository) are therefore not paths, and neither are
    tokens whose first segment starts with ``*`` or ``..`` (``*.yaml/*.yml``, ``..data/x.yaml``:
    patterns). A path must exist under one of its base directories; a ``*`` is a glob that
    must match something. In
    Markdown the tokens are whole inline code spans (between backticks) and the bases are the
    repository root and the file's directory; in Python they are words of docstrings and
    comments (a trailing ``.`` or ``,`` of the sentence dropped) and the bases are the
    repository root, webhook/ and the module's directory.
python-modules
    A dotted name starting with ``webhook.`` in a docstring or comment (``webhook.pipeline.review``,
    ``webhook.types.Deadline``) names a module of the package, or a name defined or imported at
    the top of one, or a member of a class defined there. (Code is checked by the interpreter;
    Markdown's ``webhook.url`` and the like are Helm values, not modules, and are not read.)
markdown-section-names, python-section-names
    ``<doc>, "<heading>"`` or ``<doc>, section "<heading>"``, where ``<doc>`` is ``README`` (the
    repository's README.md) or a path ending in ``.md``, in Markdown prose, docstrings or
    comments: the document exists and has that heading (compared by GitHub anchor).

A failure lists every broken reference of a rule as ``file:line: what``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest
from docs_support import REPO, anchors, markdown_files, prose, remarks, slug

KNOWN_EXTENSIONS = (
    ".py",
    ".md",
    ".yaml",
    ".yml",
    ".json",
    ".toml",
    ".sh",
    ".txt",
    ".tpl",
    ".lock",
    ".png",
    ".cfg",
    ".ini",
    ".sqlite3",
)
PATH_TOKEN = re.compile(r"[A-Za-z0-9_.*-]+(?:/[A-Za-z0-9_.*-]+)*/?")
WORD_PATH = re.compile(r"(?<![\w/.$~<{@-])[A-Za-z0-9_.*-]+(?:/[A-Za-z0-9_.*-]+)+/?")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\]]|\][^(])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
DOTTED = re.compile(r"(?<![\w.])webhook(?:\.[A-Za-z_]\w*)+")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
SECTION_REF = re.compile(
    r"(?P<doc>(?<![\w/.-])(?:[\w.-]+/)*[\w.-]+\.md|\bREADME)\b,?\s+(?:section\s+)?"
    r"[\"“](?P<heading>[^\"”\n]+)[\"”]"
)

Problem = tuple[Path, int, str]


def shown(path: Path) -> str:
    """A path as a failure message prints it: repository-relative when it can be."""
    return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)


def is_path(token: str, bases: list[Path]) -> bool:
    """Whether a token names a repository path (the module docstring has the rule)."""
    if "/" not in token or not PATH_TOKEN.fullmatch(token):
        return False
    first = token.split("/", 1)[0]
    if first.startswith(("*", "..")):
        return False
    return token.rstrip("/").endswith(KNOWN_EXTENSIONS) or any(
        first not in {".", ".."} and (base / first).exists() for base in bases
    )


def exists(token: str, bases: list[Path]) -> bool:
    """Whether a path exists under one of the bases (a glob: matches something)."""
    if "*" in token:
        return any(next(base.glob(token.rstrip("/")), None) is not None for base in bases)
    return any((base / token).exists() for base in bases)


def path_problems(path: Path, line: int, token: str, bases: list[Path]) -> list[Problem]:
    if is_path(token, bases) and not exists(token, bases):
        return [(path, line, f"`{token}` does not exist")]
    return []


# -- Markdown ---------------------------------------------------------------------------


def link_problems(path: Path, text: str) -> Iterator[Problem]:
    for line in prose(text):
        for target in LINK.findall(INLINE_CODE.sub("code", line.text)):
            problem = None if SCHEME.match(target) else target_problem(path, text, target)
            if problem:
                yield path, line.number, f"link to {target}: {problem}"


def target_problem(path: Path, text: str, target: str) -> str | None:
    """What is wrong with a relative link target, if anything."""
    file_part, _, anchor = unquote(target).partition("#")
    linked = path.parent / file_part
    if file_part and not linked.exists():
        return f"no {shown(linked)}"
    if not anchor or (file_part and linked.suffix != ".md"):
        return None
    headings_there = anchors(linked.read_text() if file_part else text)
    return None if anchor in headings_there else f"no heading #{anchor}"


def markdown_path_problems(path: Path, text: str) -> Iterator[Problem]:
    bases = [REPO, path.parent]
    for line in prose(text):
        for match in INLINE_CODE.finditer(line.text):
            yield from path_problems(path, line.number, match.group(2).strip(), bases)


def markdown_section_problems(path: Path, text: str) -> Iterator[Problem]:
    for line in prose(text):
        yield from section_problems(path, line.number, line.text)


# -- Python under webhook/ --------------------------------------------------------------


def python_path_problems(path: Path, text: str) -> Iterator[Problem]:
    bases = [REPO, REPO / "webhook", path.parent]
    for start, remark in remarks(text):
        for match in WORD_PATH.finditer(remark):
            line = start + remark.count("\n", 0, match.start())
            yield from path_problems(path, line, match.group(0).rstrip(".,"), bases)


def python_module_problems(path: Path, text: str) -> Iterator[Problem]:
    for start, remark in remarks(text):
        for match in DOTTED.finditer(remark):
            if not resolves(match.group(0).rstrip(".").split(".")):
                line = start + remark.count("\n", 0, match.start())
                yield path, line, f"`{match.group(0)}` names no module or name of the package"


def resolves(parts: list[str]) -> bool:
    """Whether `a.b.c` is a module under the repository, or a name (or class member) in one."""
    for split in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:split])
        for module in (base.with_suffix(".py"), base / "__init__.py"):
            if module.is_file():
                return defines(ast.parse(module.read_text()).body, parts[split:])
    return False


def defines(body: list[ast.stmt], names: list[str]) -> bool:
    """Whether a module or class body defines `names[0]` (and, inside a class, the rest)."""
    if not names:
        return True
    for node in body:
        if isinstance(node, ast.ClassDef) and node.name == names[0]:
            return defines(node.body, names[1:])
        if names[0] in bound(node):
            return len(names) == 1 or reexported(node, names)
    return False


def reexported(node: ast.stmt, names: list[str]) -> bool:
    """Whether `names` resolve where a `from webhook.x import name` re-export takes them."""
    if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("webhook")):
        return False
    for alias in node.names:
        if (alias.asname or alias.name) == names[0]:
            return resolves([*str(node.module).split("."), alias.name, *names[1:]])
    return False


def bound(node: ast.stmt) -> set[str]:
    """The names a top-level statement binds."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    targets = (
        node.targets
        if isinstance(node, ast.Assign)
        else ([node.target] if isinstance(node, ast.AnnAssign) else [])
    )
    return {t.id for t in targets if isinstance(t, ast.Name)}


def python_section_problems(path: Path, text: str) -> Iterator[Problem]:
    for start, remark in remarks(text):
        yield from section_problems(path, start, remark)


# -- Section names, in either ------------------------------------------------------------


def section_problems(path: Path, start: int, text: str) -> Iterator[Problem]:
    for match in SECTION_REF.finditer(text):
        line = start + text.count("\n", 0, match.start())
        doc, heading = match.group("doc"), match.group("heading")
        named = (
            REPO / "README.md"
            if doc == "README"
            else next((base / doc for base in (REPO, path.parent) if (base / doc).is_file()), None)
        )
        if named is None:
            yield path, line, f'{doc}, "{heading}": no {doc}'
        elif slug(heading) not in anchors(named.read_text()):
            yield path, line, f'{doc}, "{heading}": {shown(named)} has no such heading'


def python_files() -> list[Path]:
    return sorted((REPO / "webhook").rglob("*.py"))


RULES: dict[str, tuple[Callable[[], list[Path]], Callable[[Path, str], Iterator[Problem]]]] = {
    "markdown-links": (markdown_files, link_problems),
    "markdown-paths": (markdown_files, markdown_path_problems),
    "markdown-section-names": (markdown_files, markdown_section_problems),
    "python-paths": (python_files, python_path_problems),
    "python-modules": (python_files, python_module_problems),
    "python-section-names": (python_files, python_section_problems),
}


def report(problems: list[Problem]) -> str:
    return "\n".join(f"{shown(path)}:{line}: {what}" for path, line, what in problems)


@pytest.mark.parametrize("rule", RULES.values(), ids=RULES.keys())
def test_every_reference_resolves(
    rule: tuple[Callable[[], list[Path]], Callable[[Path, str], Iterator[Problem]]],
) -> None:
    files, problems_of = rule
    problems = [problem for path in files() for problem in problems_of(path, path.read_text())]
    assert not problems, f"{len(problems)} broken references:\n{report(problems)}"


PATH_CASES = [
    ("webhook/engine/quota.py", True),
    ("tests/bench/", True),
    ("policies/", True),
    ("design/architecture.md", True),
    ("docs/policy.md", True),
    ("nvidia.com/gpu", False),
    ("resource.k8s.io/v1", False),
    ("apps/*", False),
    ("pkg/cel/library/*_test.go", False),
    ("$XDG_STATE_HOME/dragate/ledger.sqlite3", False),
    ("~/.cache/dragate/toolchain/<pin-hash>/bin", False),
    ("/var/lib/dpkg/status", False),
    ("image/build.sh lock", False),
    ("bash tests/run.sh", False),
    ("README.md", False),
    ("*.yaml/*.yml", False),
    ("..data/x.yaml", False),
    (".ci/run", True),
]


@pytest.mark.parametrize(("token", "expected"), PATH_CASES, ids=[t for t, _ in PATH_CASES])
def test_what_counts_as_a_path(token: str, expected: bool) -> None:
    assert is_path(token, [REPO]) is expected


BROKEN_MARKDOWN = """# Title

## A `code` heading

See [the policy reference](../../docs/policy.md#policy-files) and [here](#a-code-heading).
A [missing file](nowhere.md), a [missing heading](#nowhere) and `webhook/nowhere.py`.

```sh
cat `webhook/also-nowhere.py`   # fenced: an example, never read
```

The README, section "No such section" and README.md, "Quick start".
"""

BROKEN_PYTHON = '''"""A module.

Its rules: README.md, "Policy files"; see design/architecture.md.
"""

# and webhook/nowhere.py, or engine/cel/budget.py (relative to webhook/)
# webhook.pipeline.review and webhook.types.Deadline.check exist; webhook.nowhere.thing does not
'''


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "doc.md",
            BROKEN_MARKDOWN,
            [
                "doc.md:6: link to nowhere.md: no nowhere.md",
                "doc.md:6: link to #nowhere: no heading #nowhere",
                "doc.md:6: `webhook/nowhere.py` does not exist",
                'doc.md:12: README, "No such section": README.md has no such heading',
            ],
        ),
        (
            "module.py",
            BROKEN_PYTHON,
            [
                'module.py:3: README.md, "Policy files": README.md has no such heading',
                "module.py:3: `design/architecture.md` does not exist",
                "module.py:6: `webhook/nowhere.py` does not exist",
                "module.py:7: `webhook.nowhere.thing` names no module or name of the package",
            ],
        ),
    ],
    ids=["markdown", "python"],
)
def test_every_broken_reference_is_listed_with_file_and_line(
    name: str, text: str, expected: list[str]
) -> None:
    path = Path(__file__).parent / name  # never written: the rules read the text given
    kinds = (
        ("markdown-links", "markdown-paths", "markdown-section-names")
        if name.endswith(".md")
        else ("python-paths", "python-modules", "python-section-names")
    )
    problems = [p for kind in kinds for p in RULES[kind][1](path, text)]
    lines = report(problems).replace("tests/docs/", "").splitlines()
    assert sorted(lines) == sorted(expected)
