"""CEL in policy files: an expression compiled when the policy is loaded.

Compiling at load, with the rule's variables typed, means a typo or a field that does not
exist fails `dragate lint`, `dragate check` and a hot reload, never an admission. A rule is
compiled for the process's target minor (`target.kube_version`): it gets the functions, and
the cel-go semantics, of that minor's API server.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.engine.cel import CelCompileError, Program, TypeEnvironment, compile_expression
from webhook.policy.schema import INVALID, Path, Report, Str
from webhook.policy.target import kube_version
from webhook.types import JSON, CompiledExpression

VALIDATION_VARIABLES = (
    "request",
    "object",
    "oldObject",
    "namespace",
    "tenant",
    "operation",
    "userInfo",
)
SELECTOR_VARIABLES = ("device",)
SAMPLE_SUFFIX = "1g.10gb"
"""What `{suffix}` becomes when a mapping's selector template is test-compiled at load."""


@dataclass(frozen=True)
class Compiled:
    """A CEL expression as written, and the program compiled from it."""

    text: str
    program: CompiledExpression


@dataclass(frozen=True)
class Cel:
    """A CEL expression compiled at load, so a typo fails `dragate lint`, not an admission.

    With `sample` set the text is a template: `{suffix}` is replaced by the sample first.
    """

    variables: tuple[str, ...]
    sample: str | None = None
    noun: str = "a CEL expression (a non-empty string)"
    types: Callable[[], Sequence[TypeEnvironment]] | None = None
    newer: Callable[[str, Sequence[str]], str | None] | None = None
    """Names the later Kubernetes minor a refused expression needs, when one would take it."""

    def read(self, value: JSON, at: Path, report: Report) -> Any:
        text = Str(noun=self.noun).read(value, at, report)
        if text is INVALID:
            return INVALID
        source = text.replace("{suffix}", self.sample or "")
        types = self.types() if self.types is not None else None
        program, error = compile_cel(source, self.variables, types)
        if program is not None:
            return Compiled(text, program)
        if self.newer is not None:
            error = self.newer(source, self.variables) or error
        template = f' (with {{suffix}} = "{self.sample}")' if self.sample is not None else ""
        report.add(at, f"{error}{template}")
        return INVALID


def compile_cel(
    text: str,
    variables: Sequence[str],
    types: Sequence[TypeEnvironment] | None = None,
    *,
    minor: str | None = None,
) -> tuple[Program | None, str | None]:
    """The program, or why it can never run as a yes/no rule.

    The CEL engine decides (syntax, undeclared variables, a field the variable's declared type
    does not have, a result that is never bool); the loader only says where. Compiling at load
    means a typo fails `dragate lint`, not a Pod. `minor`: the Kubernetes minor to compile
    for, the process's target unless named.
    """
    minor = minor or kube_version()
    try:
        if types is None:
            return compile_expression(text, variables=variables, minor=minor), None
        return compile_expression(text, variables=variables, types=types, minor=minor), None
    except CelCompileError as err:
        return None, f"does not compile: {err}"
