"""Issue 33: the CEL front end on its own (no Go): the parser, the printer, the checker, the
cost estimator, the read analysis and the library's declarations."""

import pytest

from app import cel
from app.cel import checker, cost, library, reads
from app.cel.lexer import SyntaxFault
from app.cel.parser import parse
from app.cel.printer import source
from app.cel.tree import Binary, Literal, Macro, Select

SELECTOR_ENV = checker.Environment({"device": "Device"})


@pytest.mark.parametrize("text", [
    "a && b && c || d", "a - (b - c)", "a - b - c", "!(a && b)", "(a ? b : c) ? d : e", "a ? b : c ? d : e",
    "(-1).z", "-x.y", "1 == (2 == 3)", "x.?y[?0]", "[1, ?a]", "{?'a': b}", "'a\\nb' + \"q\\\"\"", "b'\\xff'",
    "cel.bind(v, 1, v)", "l.all(i, v, v > i)", "has(device.x)", "r'\\d' == '\\\\d'", "1u + 2u", "1.5e3 > 0.0",
])
def test_printing_a_parsed_tree_gives_the_same_tree(text):
    printed = source(parse(text))
    assert source(parse(printed)) == printed


def test_the_parser_builds_macros_and_folds_negative_literals():
    tree = parse("-9223372036854775808 < [1, 2].exists(x, x > 0)")
    assert isinstance(tree, Binary) and isinstance(tree.left, Literal) and tree.left.value == -2 ** 63
    assert isinstance(tree.right, Macro) and tree.right.variables == ("x",)
    assert isinstance(parse("has(a.b)"), Select) and parse("has(a.b)").test


@pytest.mark.parametrize("text, why", [
    ("device.attributes[", "mismatched input"), ("9223372036854775808 > 0", "invalid int literal"),
    ("'abc", "unterminated"), ("a.all(x.y, true)", "simple name"), ("has(a)", "has() macro"),
    ("let == 1", "reserved"), ("'\\q'", "escape"), ("a # b", "token recognition"), ("[1,2].all(x, x, x)", ""),
])
def test_syntax_errors_say_where(text, why):
    try:
        parse(text)
    except SyntaxFault as exc:
        assert why in str(exc) and exc.pos >= 0
    else:
        assert why == "", "a two-variable all() over a bound name parses; the checker decides"


def test_nesting_past_upstreams_limit_is_a_syntax_error():
    parse("[" * 200 + "]" * 200)
    with pytest.raises(SyntaxFault, match="recursion limit"):
        parse("(" * 300 + "1" + ")" * 300)
    with pytest.raises(cel.CelError, match="recursion limit"):
        cel.compile_selector(" + ".join(["1"] * 300) + " > 0")


@pytest.mark.parametrize("text, why", [
    ("device.attributes['d'].arch in ['Hopper', 9]", "expected type 'string' but found 'int'"),
    ("[1, dyn(2)].size() == 2", "expected type 'int' but found 'dyn'"),
    ("{'a': 1, 'b': 'x'}.size() == 2", "expected type 'int' but found 'string'"),
    ("1 == 1.0", "'_==_' applied to '(int, double)'"),
    ("'%s'.format(['a', 1]) == ''", "too many arguments"),
    ("[1].map(x, y) == [1]", "undeclared reference to 'y'"),
    ("1.all(x, x > 0)", "cannot be the range of a comprehension"),
    ("[1].exists(x, x)", "expected type 'bool' but found 'int'"),
    ("sets.nope([1], [1])", "'sets.nope'"),
    ("device.attributes['d'].x.all(v, v > 0)", "DRAListTypeAttributes"),
    ("'a'.find('(?=a)') == ''", "invalid find argument"),
])
def test_the_checker_refuses_what_the_api_server_refuses(text, why):
    with pytest.raises(cel.CelError, match=None) as raised:
        cel.compile_selector(text)
    assert why in str(raised.value)


def test_the_checker_types_every_node():
    tree = parse("device.attributes['d'].n + 1 == 4 && device.driver.startsWith('g')")
    checked = checker.check(tree, SELECTOR_ENV)
    assert checked.type_of(tree) == "bool"
    assert checked.type_of(tree.left.left) == "int"  # dyn + int resolves to the int overload


@pytest.mark.parametrize("text, expected", [
    # from upstream's table (tests/upstream/cel_cases.py), exact
    ('device.driver == "dra.example.com"', 4), ('"no-such-domain" in device.attributes', 3),
    ('cel.bind(dra, device.attributes["dra.example.com"], dra.name)', 15),
    ('device.attributes.exists_one(x, x == "dra.example.com")', 164),
    ('device.attributes["dra.example.com"].services.matches("[^a]?sym")', 18),
    ('device.attributes["dra.example.com"].services.split("example").size() >= 2', 19),
    ("device.allowMultipleAllocations == true", 3),
])
def test_the_cost_is_upstreams(text, expected):
    assert cel.estimated_cost(text) == expected


def test_what_upstream_cannot_bound_is_refused():
    assert cel.estimated_cost("type(1) == int") > cel.MAX_COST
    assert cel.estimated_cost("['a', 'b'].join(',') == 'a,b'") > cel.MAX_COST
    tree = parse("'a'" + ".replace('a', 'aaaaaaaaaa')" * 9 + ".size() > 0")
    assert cost.estimate(tree, checker.check(tree, SELECTOR_ENV)) == 22222225


@pytest.mark.parametrize("text, expected", [
    ("device.attributes['d'].a == 1 && 'b' in device.attributes['d']", (("attributes", "d", "a"),
                                                                        ("attributes", "d", "b"))),
    ("device.capacity['d']['m'].isGreaterThan(quantity('1')) && device.driver == 'x'",
     (("capacity", "d", "m"), ("driver",))),
    ("device.attributes.d.a == 1", (("attributes", "d", "a"),)),
    ("device.attributes.exists(d, d == 'x')", None), ("device.attributes[device.driver].a == 1", None),
    ("'device.driver' == 'x'", ()),
])
def test_reads_name_what_the_result_depends_on(text, expected):
    assert reads.reads(parse(text)) == expected


def test_every_declaration_runs_somewhere_and_every_function_is_declared():
    engine_builtins = {"_+_", "_-_", "_*_", "_/_", "_%_", "-_", "!_", "_<_", "_<=_", "_>_", "_>=_", "_==_", "_!=_",
                       "@in", "_[_]", "_?_:_", "size", "contains", "startsWith", "endsWith", "matches", "int",
                       "uint", "double", "string", "bytes", "dyn", "type", "duration", "timestamp"}
    declared = {o.engine for overloads in library.OVERLOADS.values() for o in overloads}
    missing = sorted(declared - set(library.FUNCTIONS) - engine_builtins)
    assert not missing, f"declared, but neither registered nor built into the engine: {missing}"
    undeclared = sorted(set(library.FUNCTIONS) - declared - {"cel__optional_entries", "optional__select"})
    assert not undeclared, f"registered without a declaration: {undeclared}"
