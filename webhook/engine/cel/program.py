"""Compiled programs and their evaluation: the only part of the package with a hot path.

`compile_expression` does all the expensive work once (parse, checks, transpile, Python
`compile`). `Program.evaluate` builds one light `Scope` over the caller's values and calls the
compiled function. Errors never escape: a CEL error, a library refusal, a runaway expression
or an unexpected Python exception all come back as `EvalResult(error=...)`.

Relies on (checked with cel-python 0.5.0 and lark 1.3.1; canaries: tests/canary/test_celpy.py):
- `celpy transpiled code names`: the `celpy.evaluation.*`, `celpy.celtypes.*` and `activation.*()`
  names generated code uses, all provided by `_GLOBALS` and `Scope`.
- `celpy.evaluation.result(activation, cel_expr)`: replaced in the code's namespace.
- `celpy.evaluation.macro_*`: celpy's macros, run on a `Scope` (only `nested_activation`).
- `celpy.evaluation.base_functions`: type names a `Scope` resolves.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any, Literal

import celpy
import celpy.evaluation
from celpy.evaluation import CELEvalError

from webhook.engine.cel import network
from webhook.engine.cel.budget import CURRENT, STEP_COST, Budget
from webhook.engine.cel.checker import check_types, require_bool_type
from webhook.engine.cel.comprehensions import comprehend
from webhook.engine.cel.cost import SELECTOR_COST_LIMIT, estimate
from webhook.engine.cel.errors import BudgetExceeded, CelCompileError, CelFunctionError
from webhook.engine.cel.ext_lists import sort_by
from webhook.engine.cel.library import FUNCTIONS, functions_for, python_name
from webhook.engine.cel.operators import (
    EVALUATION_OVERRIDES,
    OPERATOR,
    make_duration,
    make_int,
    to_string,
)
from webhook.engine.cel.optional_entries import rewrite_optional_entries
from webhook.engine.cel.optionals import rewrite_optional_syntax
from webhook.engine.cel.syntax import References, parse
from webhook.engine.cel.transpile import transpile
from webhook.engine.cel.types import UNTYPED, TypeEnvironment
from webhook.engine.cel.values import to_cel, to_plain
from webhook.types import EvalResult
from webhook.types.kubeversions import NEWEST

MAX_EXPRESSION_BYTES = 10 * 1024
"""Kubernetes' limit on a CEL selector / validation expression."""
MAX_BOUND_LENGTH = 1 << 20
"""Largest string or list a comprehension or cel.bind may bind to a variable."""

_TRAPPED = (ValueError, KeyError, TypeError, ArithmeticError, IndexError, NameError, AttributeError)


class Scope:
    """What transpiled code calls `activation`: variables, then enclosing scopes, then types."""

    __slots__ = ("_dg_budget", "_dg_parent", "_dg_vars")

    def __init__(self, values: Mapping[str, Any], parent: Scope | None, budget: Budget) -> None:
        self._dg_vars, self._dg_parent, self._dg_budget = values, parent, budget

    def __getattr__(self, name: str) -> Any:
        scope: Scope | None = self
        while scope is not None:
            found = scope._dg_vars.get(name, _MISSING)
            if found is not _MISSING:
                return found
            scope = scope._dg_parent
        if name in celpy.evaluation.base_functions:  # type names: int, string, ...
            return celpy.evaluation.base_functions[name]
        if name == "net":
            return network.TYPE_PACKAGE
        raise NameError(name)

    resolve_variable = __getattr__

    def nested_activation(self, annotations: Any = None, vars: Any = None) -> Scope:
        """A child scope for one comprehension step or binding; this is where work is metered."""
        self._dg_budget.charge(STEP_COST)
        for value in (vars or {}).values():
            if isinstance(value, str | list) and len(value) > MAX_BOUND_LENGTH:
                raise BudgetExceeded(f"a bound value is longer than {MAX_BOUND_LENGTH}")
        return Scope(vars or {}, self, self._dg_budget)


_MISSING = object()


def _type_error(error: BaseException) -> str:
    text = str(error)
    return (
        text
        if text.startswith("no such overload") and "<class" not in text
        else ("no such overload")
    )


def _overflow(error: BaseException) -> str:
    return "integer overflow" if str(error) == "overflow" else str(error)


_DESCRIBE: tuple[tuple[type[BaseException], Callable[[BaseException], str]], ...] = (
    (CelFunctionError, BaseException.__str__),
    (KeyError, lambda e: f"no such key: {e.args[0]!r}" if e.args else "no such key"),
    (NameError, lambda e: f"no value for variable {e.args[0]!r}" if e.args else str(e)),
    (ZeroDivisionError, lambda e: "division by zero"),
    (AttributeError, lambda e: "field selection on a value that is not a map or object"),
    (IndexError, lambda e: "index out of range"),
    (TypeError, _type_error),
    (ValueError, _overflow),
    (OverflowError, _overflow),
)


def describe(error: BaseException) -> str:
    """A readable message for an exception raised while evaluating."""
    for kind, text in _DESCRIBE:
        if isinstance(error, kind):
            return text(error)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _result(activation: Any, expression: Callable[[Any], Any]) -> Any:
    """celpy's "checked exception" trap, with readable messages and more exception types."""
    try:
        return expression(activation)
    except _TRAPPED as error:
        return CELEvalError(describe(error), type(error), error.args)


def _bind(
    activation: Scope, name: str, body: Callable[[Any], Any], init: Callable[[Any], Any]
) -> Any:
    """cel.bind(name, init, body): evaluate init once, then body with `name` bound to it."""
    return body(activation.nested_activation(vars={name: _result(activation, init)}))


def _error_text(error: CELEvalError) -> str:
    message = str(error.args[0]) if error.args else "evaluation error"
    cause = error.__cause__
    return (
        describe(cause)
        if isinstance(cause, BaseException)
        and message in ("return error for overflow", "no such overload")
        else message
    )


_EVALUATION = SimpleNamespace(**vars(celpy.evaluation))
_EVALUATION.result = _result
for _name, _function in EVALUATION_OVERRIDES.items():
    setattr(_EVALUATION, _name, _function)
_CELTYPES = SimpleNamespace(
    **{
        **vars(celpy.celtypes),
        "StringType": to_string,
        "IntType": make_int,
        "DurationType": make_duration,
    }
)
_GLOBALS: dict[str, Any] = {
    "celpy": SimpleNamespace(celtypes=_CELTYPES, evaluation=_EVALUATION),
    "operator": OPERATOR,
    "builtins": builtins,
    "CELEvalError": CELEvalError,
    "_dg_bind": _bind,
    "_dg_comprehend": comprehend,
    "_dg_sort_by": sort_by,
    **{python_name(name): fn for name, fn in FUNCTIONS.items()},
}


class Program:
    """One compiled expression; thread-safe, evaluate as often as needed."""

    __slots__ = ("_main", "source", "variables")

    def __init__(self, source: str, variables: frozenset[str], main: Callable[[Scope], Any]):
        self.source = source
        self.variables = variables
        self._main = main

    def __repr__(self) -> str:
        return f"Program({self.source!r})"

    def evaluate(self, activation: Mapping[str, Any], until: float | None = None) -> EvalResult:
        """The expression's value (plain Python) or the error that stopped it; never raises.

        `until` (time.monotonic) ends the evaluation earlier than the time guard: the review's
        own deadline, so one slow rule cannot carry a review far past it.
        """
        value, error = self.evaluate_cel(activation, until)
        return EvalResult(error=error) if error is not None else EvalResult(value=to_plain(value))

    def evaluate_cel(
        self, activation: Mapping[str, Any], until: float | None = None
    ) -> tuple[Any, str | None]:
        """(the CEL-typed value, None) or (None, why it failed): for tools that need the type."""
        try:
            values = {n: to_cel(activation[n]) for n in self.variables if n in activation}
            budget = Budget(until)
            token = CURRENT.set(budget)
            try:
                value = self._main(Scope(values, None, budget))
            finally:
                CURRENT.reset(token)
        except BudgetExceeded as error:
            return None, f"evaluation stopped: {error}"
        except RecursionError:
            return None, "evaluation stopped: expression nests too deeply"
        except Exception as error:
            return None, describe(error)
        if isinstance(value, CELEvalError):
            return None, _error_text(value)
        return value, None


def _load(python_source: str, minor: str = NEWEST) -> Callable[[Scope], Any]:
    namespace = dict(_GLOBALS)
    namespace.update({python_name(name): fn for name, fn in functions_for(minor).items()})
    exec(compile(python_source, "<cel>", "exec"), namespace)
    return namespace["_dg_main"]  # type: ignore[no-any-return]


def _constant_error(text: str) -> str | None:
    """Evaluate a constant sub-expression (no variables, not type-checked): its error or None."""
    try:
        _, error = Program(
            text, frozenset(), _load(transpile(parse(text), frozenset()))
        ).evaluate_cel({})
    except (SyntaxError, CelCompileError) as failure:
        return str(failure)
    return error


Environment = Literal["selector", "policy", "kubernetes"]


def _is_selector(environment: Environment | None, declared: frozenset[str]) -> bool:
    return environment == "selector" or (environment is None and declared == {"device"})


def compile_expression(
    expression: str,
    *,
    variables: Iterable[str],
    expect_bool: bool = True,
    environment: Environment | None = None,
    types: Sequence[TypeEnvironment] = (UNTYPED,),
    minor: str = NEWEST,
) -> Program:
    """Parse, type-check and transpile once; CelCompileError for what Kubernetes refuses.

    `environment`: "selector" is the DRA device selector environment (Kubernetes' base
    library plus `cel.bind`), "kubernetes" the base library alone, "policy" dragate's
    validation rules (the selector's functions, over dyn-typed request data). By default a
    program over just `device` is a selector, anything else a policy rule.
    `expect_bool=False` skips the "result must be a bool" check, for tools and tests
    that evaluate value expressions such as `quantity('1Gi').asInteger()`.
    `types`: the declared variable types of each context the program runs in (a rule on a
    Pod, on a ResourceClaim, ...): it must type-check in each (`check_in_each`).
    `minor`: the target Kubernetes minor, whose API server's functions for new expressions
    (and their cel-go semantics) the program gets; a function it lacks is refused.
    """
    if len(expression.encode("utf-8")) > MAX_EXPRESSION_BYTES:
        raise CelCompileError(f"expression is longer than {MAX_EXPRESSION_BYTES} bytes")
    declared = frozenset(variables)
    bind = environment != "kubernetes"
    text = rewrite_optional_syntax(rewrite_optional_entries(expression))
    try:
        tree = parse(text)
        references = References(declared)
        references.walk(tree, frozenset())
        dyn_allowed = not _is_selector(environment, declared)

        def check(types: TypeEnvironment) -> None:
            kind = check_types(
                tree, text, declared, _constant_error, bind=bind, environment=types, minor=minor
            )
            if expect_bool:
                require_bool_type(kind, dyn_allowed=dyn_allowed)

        check_in_each(check, types)
        if _is_selector(environment, declared) and estimate(tree) > SELECTOR_COST_LIMIT:
            raise CelCompileError("too complex, exceeds cost limit")
        main = _load(transpile(tree, declared), minor)
    except RecursionError:
        raise CelCompileError("expression nests too deeply") from None
    except (SyntaxError, MemoryError) as error:
        reason = error.msg if isinstance(error, SyntaxError) else "too complex"
        raise CelCompileError(f"expression cannot be compiled: {reason}") from None
    return Program(expression, frozenset(references.used), main)


def check_in_each(
    check: Callable[[TypeEnvironment], None], types: Sequence[TypeEnvironment]
) -> None:
    """Passes when `check` passes for every environment; else the errors, by kind.

    A rule runs on every kind of object it can see, so it must type-check for each: one that
    reads `object.spec.containers` unguarded would fail on every ResourceClaim. A kind test
    (`object.kind == 'Pod' && ...`) guards a field of one kind (see `kindtests`). When every
    kind refuses it for the same reason, the message is that reason alone.
    """
    environments = tuple(types) or (UNTYPED,)
    refusals: dict[str, list[str]] = {}
    errors: list[CelCompileError] = []
    for environment in environments:
        try:
            check(environment)
        except CelCompileError as error:
            refusals.setdefault(str(error), []).append(environment.name)
            errors.append(error)
    if not errors:
        return
    if len(errors) == len(environments) and len(refusals) == 1:
        raise errors[0]
    raise CelCompileError("; ".join(f"{', '.join(k)}: {text}" for text, k in refusals.items()))


def selector_error(expression: str, minor: str = NEWEST) -> str | None:
    """Why the API server of `minor` would refuse this DRA selector when a claim is created,
    or None."""
    try:
        compile_expression(expression, variables=["device"], environment="selector", minor=minor)
    except CelCompileError as error:
        return str(error)
    return None
