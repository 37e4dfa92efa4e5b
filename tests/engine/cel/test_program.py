"""compile_expression / Program contract: compile errors, runtime errors, variables, guards."""

import threading

import celpy
import pytest

from webhook.engine.cel import CelCompileError, compile_expression, to_cel
from webhook.types import CompiledExpression, DragateError, EvalResult

REQUEST = {
    "name": "gpu",
    "deviceClassName": "gpu.nvidia.com",
    "count": 2,
    "allocationMode": "ExactCount",
    "adminAccess": False,
    "selectors": ["device.attributes['gpu.nvidia.com'].productName == 'A100'"],
}
VARIABLES = ["request", "object", "oldObject", "namespace", "tenant", "operation", "userInfo"]

COMPILE_ERRORS = [
    ("syntax", "request.count >", "syntax error"),
    ("syntax_unclosed", "request.selectors.all(s, s.contains('x')", "syntax error"),
    ("unknown_variable", "requests.count > 1", "undeclared reference to 'requests'"),
    (
        "unknown_variable_in_macro",
        "request.selectors.all(s, t == s)",
        "undeclared reference to 't'",
    ),
    (
        "macro_variable_out_of_scope",
        "request.selectors.all(s, true) && s == ''",
        "undeclared reference to 's'",
    ),
    ("unknown_function", "frobnicate(request)", "undeclared reference to function 'frobnicate'"),
    ("unknown_method", "request.name.frobnicate()", "undeclared reference to function"),
    (
        "unknown_namespace_function",
        "sets.union([1], [2]) == [1, 2]",
        "undeclared reference to function 'sets.union'",
    ),
    ("int_result", "1 + 2", "must evaluate to bool"),
    ("string_result", "'x'", "must evaluate to bool"),
    ("list_result", "[true]", "must evaluate to bool"),
    ("compareTo_result", "quantity('1').compareTo(quantity('2'))", "must evaluate to bool"),
    ("ternary_of_ints", "request.count > 1 ? 1 : 2", "must evaluate to bool"),
    ("bind_of_string", "cel.bind(x, 1, 'a')", "must evaluate to bool"),
    ("macro_needs_variable", "request.selectors.all('s', true)", "takes a variable name"),
    ("bind_needs_three_args", "cel.bind(x, 1)", "takes a variable name"),
    ("too_long", "true && " * 1300 + "true", "longer than 10240 bytes"),
    ("too_deep", "(" * 400 + "true" + ")" * 400, "nests too deeply"),
]

ALLOWED = [
    ("unknown_type_field", "request.count"),
    ("ternary_of_bools", "request.count > 1 ? true : false"),
    ("dyn", "dyn(request.adminAccess)"),
    ("type_names", "type(request.count) == int"),
    ("has_macro", "has(request.name)"),
    ("root_dot", ".request.count > 0"),
    ("bind", "cel.bind(n, request.count, n > 0 && n < 8)"),
]

RUNTIME = [
    ("true", "request.count <= 4", True),
    ("selectors_all", "request.selectors.all(s, !s.contains('uuid'))", True),
    ("selectors_exists", "request.selectors.exists(s, s.contains('A100'))", True),
    ("map_filter", "request.selectors.map(s, size(s)).filter(n, n > 10).size() == 1", True),
    ("exists_one", "[1, 2, 3].exists_one(x, x > 2)", True),
    ("non_bool_is_returned", "request.count", 2),
    ("string_value", "request.name", "gpu"),
    ("null_namespace", "namespace == null", True),
    ("tenant", "tenant == 'team-a'", True),
    ("short_circuit_and", "false && request.missing", False),
    ("short_circuit_or", "true || request.missing", True),
    ("has_missing", "has(request.missing)", False),
    ("not_has", "!has(request.missing)", True),
    ("has_guards_and", "has(request.missing) && request.missing == 1", False),
    ("has_guards_or", "!has(request.missing) || request.missing == 1", True),
    ("in_list", "'ExactCount' in ['ExactCount', 'All']", True),
    ("in_map", "'name' in request", True),
    ("bind_shadows", "cel.bind(request, 5, request == 5)", True),
    ("nested_bind", "cel.bind(a, 2, cel.bind(b, a * 3, b == 6))", True),
    ("plain_result_list", "request.selectors.map(s, s.startsWith('device'))", [True]),
    ("plain_result_map", "{'a': 1}", {"a": 1}),
    ("quantity_result_as_text", "quantity('80Gi')", "80Gi"),
    ("semver_result_as_text", "semver('v1.2', true)", "1.2.0"),
]

RUNTIME_ERRORS = [
    ("missing_key", "request.missing == 1", "no such key: 'missing'"),
    ("division_by_zero", "request.count / 0 == 1", "division by zero"),
    ("type_mismatch", "request.count == 'x' || request.name + 1 == 2", "no such overload"),
    ("bad_quantity", "sign(quantity(request.name)) == 1", "quantities must match"),
    ("index_out_of_range", "request.selectors[5] == ''", "index out of bounds"),
    ("field_of_scalar", "request.count.foo == 1", "not a map"),
    ("overflow", "9223372036854775807 + request.count > 0", "overflow"),
]


@pytest.mark.parametrize(
    ("expr", "message"), [c[1:] for c in COMPILE_ERRORS], ids=[c[0] for c in COMPILE_ERRORS]
)
def test_compile_errors(expr, message):
    with pytest.raises(CelCompileError) as caught:
        compile_expression(expr, variables=VARIABLES)
    assert message in caught.value.message
    assert isinstance(caught.value, DragateError)


def test_compile_error_has_column():
    with pytest.raises(CelCompileError) as caught:
        compile_expression("request.count > 1 && foo", variables=VARIABLES)
    assert caught.value.column == 22


@pytest.mark.parametrize("expr", [c[1] for c in ALLOWED], ids=[c[0] for c in ALLOWED])
def test_allowed(expr):
    compile_expression(expr, variables=VARIABLES)


def _activation():
    return {"request": to_cel(REQUEST), "namespace": None, "tenant": "team-a", "object": {}}


@pytest.mark.parametrize(
    ("expr", "expected"), [c[1:] for c in RUNTIME], ids=[c[0] for c in RUNTIME]
)
def test_runtime_values(expr, expected):
    program = compile_expression(expr, variables=VARIABLES, expect_bool=False)
    assert program.evaluate(_activation()) == EvalResult(value=expected)


@pytest.mark.parametrize(
    ("expr", "message"), [c[1:] for c in RUNTIME_ERRORS], ids=[c[0] for c in RUNTIME_ERRORS]
)
def test_runtime_errors(expr, message):
    result = compile_expression(expr, variables=VARIABLES).evaluate(_activation())
    assert result.value is None
    assert message in result.error


def test_plain_python_activation_is_converted():
    program = compile_expression("request.count == 2 && tenant == 'team-a'", variables=VARIABLES)
    assert program.evaluate({"request": REQUEST, "tenant": "team-a"}).value is True


def test_declared_but_absent_variable_is_an_error_result():
    result = compile_expression("object.kind == 'Pod'", variables=VARIABLES).evaluate({})
    assert result.error == "no value for variable 'object'"


def test_variables_lists_only_what_is_referenced():
    program = compile_expression(
        "request.count > 0 && [1].all(tenant, tenant > 0) && cel.bind(x, 1, x > 0)",
        variables=VARIABLES,
    )
    assert program.variables == frozenset({"request"})
    assert program.source.startswith("request.count")


def test_program_satisfies_protocol():
    program: CompiledExpression = compile_expression("true", variables=())
    assert program.evaluate({}).value is True


def test_runaway_comprehension_is_stopped():
    expr = (
        "["
        + ",".join(["1"] * 60)
        + "].all(a, ["
        + ",".join(["1"] * 60)
        + "].all(b, ["
        + ",".join(["1"] * 60)
        + "].all(c, a + b + c > 0)))"
    )
    result = compile_expression(expr, variables=()).evaluate({})
    assert result.error is not None and result.error.startswith("evaluation stopped")


def test_doubling_strings_is_stopped():
    expr = "['ab']" + ".map(s, s + s)" * 25 + ".size() > 0"
    result = compile_expression(expr, variables=()).evaluate({})
    assert result.error is not None and "longer than" in result.error


def test_interpreted_environment_in_the_same_process_does_not_break_compile():
    celpy.celparser.CELParser.CEL_PARSER = None
    interpreted = celpy.Environment()  # primes celpy's shared parser with plain lark Trees
    assert interpreted.program(interpreted.compile("1 + 1")).evaluate({}) == 2
    program = compile_expression("[1, 2].all(x, x > 0)", variables=())
    assert program.evaluate({}).value is True


def test_concurrent_evaluation_is_isolated():
    program = compile_expression("[1, 2, 3].all(x, x < n) && n > 0", variables=["n"])
    failures: list[object] = []

    def worker(n: int) -> None:
        for _ in range(200):
            expected = n > 3
            if program.evaluate({"n": n}).value is not expected:
                failures.append(n)

    threads = [threading.Thread(target=worker, args=(n,)) for n in (1, 2, 4, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
