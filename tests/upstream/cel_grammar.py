"""Random device selectors over the whole of what a DRA CEL environment may accept (hypothesis
strategies): every macro at right and wrong arities (two-variable comprehensions included),
`cel.bind`, optional types, the string, list, regex, math, quantity and semver libraries, with
typed holes filled from the device (attributes, capacity, driver) and literals, and now and then
a term of the wrong type. Each draw is one expression; the oracle says whether the API server
compiles it and what it matches on DEVICE."""

from __future__ import annotations

from hypothesis import strategies as st

D = "dra.example.com"
DEVICE = {"driver": D, "attributes": {
    f"{D}/model": {"string": "h100-80gb"}, f"{D}/index": {"int": 1}, f"{D}/healthy": {"bool": True},
    f"{D}/driverVersion": {"version": "1.2.3"}}, "capacity": {f"{D}/memory": {"value": "80Gi"}},
    "allowMultipleAllocations": None}

ATOMS = {
    "int": ["device.attributes['{d}'].index", "0", "1", "3", "'abc'.size()", "[1, 2, 3].size()", "-2"],
    "string": ["device.attributes['{d}'].model", "device.driver", "'h100'", "'a,b,c'", "' x '"],
    "bool": ["device.attributes['{d}'].healthy", "true", "false", "device.allowMultipleAllocations"],
    "list_int": ["[1, 2, 3]", "[3, 1, 2]", "[]"],
    "list_string": ["['a', 'b']", "'a,b,c'.split(',')", "[device.driver]"],
    "quantity": ["device.capacity['{d}'].memory", "quantity('40Gi')", "quantity('1.5')"],
    "version": ["device.attributes['{d}'].driverVersion", "semver('1.0.0')", "semver('v2.0', true)"],
    "map": ["{{'a': 1, 'b': 2}}", "device.attributes['{d}']", "device.capacity['{d}']"],
}
LIST_OF = {"list_int": "int", "list_string": "string"}

# (template, result type, hole types): holes are {0}, {1}...; `x`, `y` are comprehension variables.
FORMS = [
    # comparisons
    ("{0} == {1}", "bool", ("int", "int")), ("{0} < {1}", "bool", ("int", "int")),
    ("{0} == {1}", "bool", ("string", "string")), ("{0} != {1}", "bool", ("string", "int")),
    ("{0} in {1}", "bool", ("int", "list_int")), ("{0} in {1}", "bool", ("string", "map")),
    ("{0} && {1}", "bool", ("bool", "bool")), ("!{0} || {1}", "bool", ("bool", "bool")),
    ("({0} ? {1} : {2}) > 0", "bool", ("bool", "int", "int")),
    # macros, one variable
    ("{0}.all(x, x > 1)", "bool", ("list_int",)), ("{0}.exists(x, x == 'a')", "bool", ("list_string",)),
    ("{0}.exists_one(x, x > 2)", "bool", ("list_int",)), ("{0}.existsOne(x, x > 2)", "bool", ("list_int",)),
    ("{0}.map(x, x * 2).size() > 1", "bool", ("list_int",)),
    ("{0}.map(x, x > 1, x + 1).size() == 1", "bool", ("list_int",)),
    ("{0}.filter(x, x.startsWith('a')).size() == 1", "bool", ("list_string",)),
    ("{0}.all(k, k.endsWith('model'))", "bool", ("map",)), ("{0}.exists(k, k == 'a')", "bool", ("map",)),
    ("has({0}.model)", "bool", ("map",)),
    # macros, two variables (cel-go's two-variable comprehensions), and wrong arities
    ("{0}.all(i, x, i < 5 && x > 0)", "bool", ("list_int",)), ("{0}.exists(i, x, x == i)", "bool", ("list_int",)),
    ("{0}.existsOne(k, v, v == 1)", "bool", ("map",)), ("{0}.exists_one(i, x, x > 1)", "bool", ("list_int",)),
    ("{0}.transformList(i, x, x * i).size() == 3", "bool", ("list_int",)),
    ("{0}.transformMap(k, v, v + 1).size() == 2", "bool", ("map",)),
    ("{0}.all(x)", "bool", ("list_int",)), ("{0}.map(x).size() == 0", "bool", ("list_int",)),
    ("{0}.exists(1, true)", "bool", ("list_int",)), ("{0}.filter(x, y, z, true).size() == 0", "bool", ("list_int",)),
    # cel.bind
    ("cel.bind(v, {0}, v + v > 2)", "bool", ("int",)), ("cel.bind(v, {0}, v.size() > 0)", "bool", ("string",)),
    ("cel.bind(1, {0}, true)", "bool", ("int",)), ("cel.bind(v, {0})", "bool", ("int",)),
    # optionals
    ("device.attributes['{d}'].?model.orValue('') == {0}", "bool", ("string",)),
    ("device.attributes['{d}'].?missing.hasValue()", "bool", ()),
    ("optional.of({0}).hasValue()", "bool", ("int",)), ("optional.none().orValue({0}) == {0}", "bool", ("int",)),
    ("[?optional.of({0}), ?optional.none()].size() == 1", "bool", ("int",)),
    ("{{'a': 1}}[?'b'].orValue({0}) > 0", "bool", ("int",)), ("optional.ofNonZeroValue({0}).hasValue()", "bool", ("int",)),
    ("{0}[?0].orValue(0) == 1", "bool", ("list_int",)),
    # strings
    ("{0}.lowerAscii() == {1}", "bool", ("string", "string")), ("{0}.upperAscii().startsWith('H')", "bool", ("string",)),
    ("{0}.contains({1})", "bool", ("string", "string")), ("{0}.endsWith('gb')", "bool", ("string",)),
    ("{0}.matches('^h[0-9]+')", "bool", ("string",)), ("{0}.matches('[')", "bool", ("string",)),
    ("{0}.find('[0-9]+') == '100'", "bool", ("string",)), ("{0}.findAll('[0-9]').size() > 2", "bool", ("string",)),
    ("{0}.findAll('[0-9]', 2).size() == 2", "bool", ("string",)),
    ("{0}.replace('-', '_') == {1}", "bool", ("string", "string")), ("{0}.replace('a', 'b', 1).size() > 0", "bool", ("string",)),
    ("{0}.split('-').size() == 2", "bool", ("string",)), ("{0}.split(',', 2).size() == 2", "bool", ("string",)),
    ("{0}.substring(1) == {1}", "bool", ("string", "string")), ("{0}.substring(1, 3).size() == 2", "bool", ("string",)),
    ("{0}.substring(9, 1) == ''", "bool", ("string",)),
    ("{0}.indexOf('0') >= 0", "bool", ("string",)), ("{0}.lastIndexOf('0', 5) > 1", "bool", ("string",)),
    ("{0}.trim() == 'x'", "bool", ("string",)), ("{0}.charAt(0) == 'h'", "bool", ("string",)),
    ("{0}.join('-') == 'a-b'", "bool", ("list_string",)), ("{0}.join() != ''", "bool", ("list_string",)),
    ("{0}.reverse() == 'ih'", "bool", ("string",)), ("strings.quote({0}).size() > 2", "bool", ("string",)),
    ("'%s-%d'.format([{0}, {1}]) != ''", "bool", ("string", "int")), ("{0}.size() > 3", "bool", ("string",)),
    ("string({0}) != ''", "bool", ("int",)), ("int({0}) > 0", "bool", ("string",)),
    # lists
    ("{0}.sum() > 2", "bool", ("list_int",)), ("{0}.min() == 1", "bool", ("list_int",)),
    ("{0}.max() >= {1}", "bool", ("list_int", "int")), ("{0}.isSorted()", "bool", ("list_int",)),
    ("{0}.indexOf({1}) >= 0", "bool", ("list_int", "int")), ("{0}.lastIndexOf('a') == 0", "bool", ("list_string",)),
    ("{0}.slice(0, 1).size() == 1", "bool", ("list_int",)), ("{0}.sort()[0] == 1", "bool", ("list_int",)),
    ("{0}.distinct().size() == {0}.size()", "bool", ("list_int",)), ("[{0}, [4]].flatten().size() > 1", "bool", ("list_int",)),
    ("{0}.reverse()[0] > 0", "bool", ("list_int",)), ("lists.range({0}).size() == {0}", "bool", ("int",)),
    ("{0}.sortBy(x, -x)[0] > 0", "bool", ("list_int",)), ("{0}[1] == 2", "bool", ("list_int",)),
    # math
    ("math.greatest({0}, {1}) > 0", "bool", ("int", "int")), ("math.least([{0}, {1}]) < 3", "bool", ("int", "int")),
    ("math.abs({0}) >= 0", "bool", ("int",)), ("math.ceil(1.5) == 2.0", "bool", ()),
    ("math.bitOr({0}, 1) > 0", "bool", ("int",)), ("math.isNaN(0.0 / 0.0)", "bool", ()),
    ("math.sqrt(4) == 2.0", "bool", ()),
    # quantity
    ("{0}.compareTo({1}) >= 0", "bool", ("quantity", "quantity")), ("{0}.isGreaterThan({1})", "bool", ("quantity", "quantity")),
    ("{0}.isLessThan(quantity('100Gi'))", "bool", ("quantity",)), ("{0}.asInteger() > 0", "bool", ("quantity",)),
    ("{0}.add({1}).isInteger()", "bool", ("quantity", "quantity")), ("{0}.sub(1).sign() == 1", "bool", ("quantity",)),
    ("{0}.asApproximateFloat() > 1.0", "bool", ("quantity",)), ("isQuantity({0})", "bool", ("string",)),
    ("{0} == quantity('80Gi')", "bool", ("quantity",)), ("{0}.compareTo({1}) > 0", "bool", ("quantity", "int")),
    # semver
    ("{0}.isGreaterThan({1})", "bool", ("version", "version")), ("{0}.compareTo({1}) == 0", "bool", ("version", "version")),
    ("{0}.major() == 1", "bool", ("version",)), ("{0}.minor() < 3 && {0}.patch() >= 0", "bool", ("version",)),
    ("isSemver({0})", "bool", ("string",)), ("isSemver({0}, true)", "bool", ("string",)),
    ("{0}.isLessThan(semver('2.0.0'))", "bool", ("version",)),
]


def _atom(draw, kind: str) -> str:
    if draw(st.integers(0, 11)) == 6:  # now and then a term of another type: the checker must refuse it
        kind = draw(st.sampled_from(sorted(ATOMS)))
    return draw(st.sampled_from(ATOMS[kind])).format(d=D)


@st.composite
def selector(draw, depth: int = 2) -> str:
    """One boolean expression: a form over atoms, or two joined, or one negated, or nested in a
    comprehension over a list (its variable standing in for an int or string hole)."""
    choice = draw(st.integers(0, 9)) if depth > 0 else 0
    if choice == 7:
        return f"({draw(selector(depth - 1))}) && ({draw(selector(depth - 1))})"
    if choice == 8:
        return f"!({draw(selector(depth - 1))})"
    if choice == 9:
        inner = draw(selector(depth - 1))
        return f"[1, 2].exists(n, n > 0 && ({inner}))"
    template, _result, holes = draw(st.sampled_from(FORMS))
    return template.replace("{d}", D).format(*(_atom(draw, kind) for kind in holes))
