"""Upstream's CEL table (k8s.io/dynamic-resource-allocation v0.37.2, cel/compile_test.go `testcases`),
transcribed as data: expression, device, the answer upstream expects and its cost estimate.

`features` is the CEL feature set a case needs when it is not Kubernetes 1.37's default
(consumable capacity on, list-type attributes off); `env` "new" (the default: what the API server
checks when a claim is created) or "stored". Cases that only exist for a feature off by default
in 1.37 say so in `off_by_default`.
"""

D = "dra.example.com"
LIST_ON = {"listTypeAttributes": True}
LIST_OFF = {"listTypeAttributes": False}
MAX_LIST = 64  # max(DeviceAttributeMaxValueLength, ResourceSliceMaxAttributeValuesPerDevice) with list types on


def case(name, expression, expect, cost=None, driver="", attributes=None, capacity=None, multiple=None,
         features=None, env="new", off_by_default=None):
    return {"name": name, "expression": expression, "expect": expect, "cost": cost, "driver": driver,
            "attributes": attributes or {}, "capacity": capacity or {}, "allowMultipleAllocations": multiple,
            "features": features, "env": env, "off_by_default": off_by_default}


def match(value):
    return {"match": value}


def compile_error(text):
    return {"compileError": text}


def match_error(text):
    return {"matchError": text}


def _expensive_attributes():
    out = {}
    for i in range(32):
        suffix = f"-{i}"
        out[f"{D}/" + "x" * (32 - len(suffix)) + suffix] = {"string": "abc"}
    return out


LISTS = "list-type attributes (DRAListTypeAttributes) are alpha, off in 1.37"

CASES = [
    case("true", "true", match(True)),
    case("false", "false", match(False)),
    case("syntax-error", "?!", compile_error("Syntax error")),
    case("type-error", "1", compile_error("must evaluate to bool or the unknown type, not int")),
    case("runtime-error-lookup-identifier",
         'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))',
         match_error("no such key: noSuchAttr"), 6),
    case("runtime-error-lookup-map",
         'device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))',
         match_error("no such key: noSuchAttr"), 6),
    case("domain-check-negative", '"no-such-domain" in device.attributes', match(False), 3),
    # Ours (issue 11): the driver's domain exists only when the device has attributes there, and a
    # domain computed at run time reads as an empty map.
    case("driver-domain-absent-without-attributes", '"dra.example.com" in device.attributes', match(False),
         driver=D),
    case("driver-domain-absent-without-capacity", '"dra.example.com" in device.capacity', match(False), driver=D),
    case("computed-domain-is-empty-map", '"x" in device.attributes[device.driver]', match(False), driver=D),
    case("domain-check-positive", '"dra.example.com" in device.attributes', match(True), 3,
         attributes={"dra.example.com/something": {"bool": True}}),
    case("empty-driver-name", 'device.driver == ""', match(True), 2),
    case("real-driver-name", 'device.driver == "dra.example.com"', match(True), 4, driver=D),
    case("driver-name-qualifier", 'device.attributes["dra.example.com"].name', match(True), 4, driver=D,
         attributes={"name": {"bool": True}}),
    case("driver-name-qualifier-map-lookup", 'device.attributes["dra.example.com"]["name"]', match(True), 4,
         driver=D, attributes={"name": {"bool": True}}),
    case("bind", 'cel.bind(dra, device.attributes["dra.example.com"], dra.name)', match(True), 15, driver=D,
         attributes={"name": {"bool": True}}),
    case("qualified-attribute-name", 'device.attributes["other.example.com"].name', match(True), 4, driver=D,
         attributes={"other.example.com/name": {"bool": True}}),
    case("bool", 'device.attributes["dra.example.com"].name', match(True), 4, driver=D,
         attributes={"name": {"bool": True}}),
    case("int", 'device.attributes["dra.example.com"].name > 0', match(True), 5, driver=D,
         attributes={"name": {"int": 1}}),
    case("string", 'device.attributes["dra.example.com"].name == "fish"', match(True), 5, driver=D,
         attributes={"name": {"string": "fish"}}),
    case("macro-compilation-error-new-expressions", 'device.attributes["dra.example.com"].ids.exists(id, id == 1)',
         compile_error("compilation failed"), driver=D, features=LIST_OFF),
    case("macro-exists-on-int", 'device.attributes["dra.example.com"].name.exists(x, x > 0)',
         match_error("got 'types.Int', expected iterable type"), 5 + 6 * MAX_LIST, driver=D,
         attributes={"name": {"int": 1}}, features=LIST_ON, off_by_default=LISTS),
    case("macro-exists-on-bool", 'device.attributes["dra.example.com"].name.exists(x, x == true)',
         match_error("got 'types.Bool', expected iterable type"), 5 + 6 * MAX_LIST, driver=D,
         attributes={"name": {"bool": True}}, features=LIST_ON, off_by_default=LISTS),
    case("macro-exists-on-string", 'device.attributes["dra.example.com"].name.exists(x, x == "fish")',
         match_error("got 'types.String', expected iterable type"), 5 + 6 * MAX_LIST, driver=D,
         attributes={"name": {"string": "fish"}}, features=LIST_ON, off_by_default=LISTS),
    case("list-result-type-causes-match-error", 'device.attributes["dra.example.com"].names',
         match_error("CEL result of type list could not be converted to bool"), 4, driver=D,
         attributes={"names": {"strings": ["fish", "bird"]}}),
    case("includes-function-can-evaluate", 'device.attributes["dra.example.com"].name.includes("fish")',
         match(True), 68, driver=D, attributes={"name": {"strings": ["fish", "bird"]}}, features=LIST_ON,
         off_by_default=LISTS),
    case("list-of-bool", 'device.attributes["dra.example.com"].names.size() == 2', match(True), 6, driver=D,
         attributes={"names": {"bools": [True, False]}}),
    case("list-of-int", 'device.attributes["dra.example.com"].names.size() == 2', match(True), 6, driver=D,
         attributes={"names": {"ints": [1, 2]}}),
    case("list-of-string", 'device.attributes["dra.example.com"].names.size() == 2', match(True), 6, driver=D,
         attributes={"names": {"strings": ["fish", "bird"]}}),
    case("list-of-semver", 'device.attributes["dra.example.com"].names.size() == 2', match(True), 6, driver=D,
         attributes={"names": {"versions": ["1.0.0", "2.0.0"]}}),
    case("macro-on-list-of-int", 'device.attributes["dra.example.com"].names.exists(x, x > 0)', match(True),
         5 + 6 * MAX_LIST, driver=D, attributes={"names": {"ints": [1, 2]}}, features=LIST_ON,
         off_by_default=LISTS),
    case("macro-on-list-of-string", 'device.attributes["dra.example.com"].names.all(x, x != "")', match(True),
         5 + 4 * MAX_LIST, driver=D, attributes={"names": {"strings": ["fish", "bird"]}}, features=LIST_ON,
         off_by_default=LISTS),
    case("macro-on-list-of-semver",
         'device.attributes["dra.example.com"].names.all(x, x.isGreaterThan(semver("0.0.1")))',
         match(True), 5 + 6 * MAX_LIST, driver=D, attributes={"names": {"versions": ["1.0.0", "2.0.0"]}},
         features=LIST_ON, off_by_default=LISTS),
    case("includes-function-compilation-error", 'device.attributes["dra.example.com"].attr.includes("fish")',
         compile_error("undeclared reference to 'includes'"), driver=D, features=LIST_OFF),
    case("includes-function-compilation-and-eval-success", 'device.attributes["dra.example.com"].attr.includes("fish")',
         match(True), 68, driver=D, attributes={"attr": {"string": "fish"}}, features=LIST_ON, off_by_default=LISTS),
    case("includes-bool-scalar-positive", 'device.attributes["dra.example.com"].name.includes(true)', match(True), 68,
         driver=D, attributes={"name": {"bool": True}}, features=LIST_ON, off_by_default=LISTS),
    case("includes-bool-scalar-negative", 'device.attributes["dra.example.com"].name.includes(true)', match(False),
         68, driver=D, attributes={"name": {"bool": False}}, features=LIST_ON, off_by_default=LISTS),
    case("includes-int-list-positive", 'device.attributes["dra.example.com"].name.includes(1)', match(True), 68,
         driver=D, attributes={"name": {"ints": [1, 2]}}, features=LIST_ON, off_by_default=LISTS),
    case("includes-int-list-negative", 'device.attributes["dra.example.com"].name.includes(3)', match(False), 68,
         driver=D, attributes={"name": {"ints": [1, 2]}}, features=LIST_ON, off_by_default=LISTS),
    case("includes-string-list-negative", 'device.attributes["dra.example.com"].name.includes("cat")', match(False),
         68, driver=D, attributes={"name": {"strings": ["fish", "bird"]}}, features=LIST_ON, off_by_default=LISTS),
    case("includes-semver-scalar-positive", 'device.attributes["dra.example.com"].name.includes(semver("1.0.0"))',
         match(True), 69, driver=D, attributes={"name": {"version": "1.0.0"}}, features=LIST_ON,
         off_by_default=LISTS),
    case("includes-semver-list-negative", 'device.attributes["dra.example.com"].name.includes(semver("3.0.0"))',
         match(False), 69, driver=D, attributes={"name": {"versions": ["1.0.0", "2.0.0"]}}, features=LIST_ON,
         off_by_default=LISTS),
    case("in-operator-on-list", '1 in device.attributes["dra.example.com"].names', match(True), 68, driver=D,
         attributes={"names": {"ints": [1, 2, 3]}}),
    case("version", 'device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))', match(True), 6,
         driver=D, attributes={"name": {"version": "1.0.0"}}),
    case("version_v", 'device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) && '
         'isSemver("v1.0.0", true)', match(True), 7, driver=D, attributes={"name": {"version": "1.0.0"}}),
    case("macro-exists-on-version",
         'device.attributes["dra.example.com"].name.exists(x, x.isGreaterThan(semver("0.0.1")))',
         match_error("got 'cel.Semver', expected iterable type"), 5 + 7 * MAX_LIST, driver=D,
         attributes={"name": {"version": "1.0.0"}}, features=LIST_ON, off_by_default=LISTS),
    case("quantity", 'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', match(True), 6,
         driver=D, capacity={"name": {"value": "1Mi"}}),
    case("check-positive", '"name" in device.capacity["dra.example.com"] && '
         'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', match(True), 10, driver=D,
         capacity={"name": {"value": "1Mi"}}),
    case("check-negative", '!("name" in device.capacity["dra.example.com"]) || '
         'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', match(True), 11),
    case("all", """
device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"].bool &&
device.attributes["dra.example.com"].int > 0 &&
device.attributes["dra.example.com"].string == "fish" &&
device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1")) &&
device.capacity["dra.example.com"]["quantity"].isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"]["bool"] &&
device.attributes["dra.example.com"]["int"] > 0 &&
device.attributes["dra.example.com"]["string"] == "fish" &&
device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1"))
""", match(True), 52, driver=D,
         attributes={"bool": {"bool": True}, "int": {"int": 1}, "string": {"string": "fish"},
                     "version": {"version": "1.0.0"}},
         capacity={"quantity": {"value": "1Mi"}}),
    case("many", 'device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b && '
         'device.attributes["dra.example.com"].c', match(True), 12, driver=D,
         attributes={"a": {"bool": True}, "b": {"bool": True}, "c": {"bool": True}}),
    case("check_attribute_domains", 'device.attributes.exists_one(x, x == "dra.example.com")', match(True), 164,
         driver=D, attributes={"services": {"string": "some_example_value"}}),
    case("check_attribute_ids", 'device.attributes["dra.example.com"].exists_one(x, x == "services")', match(True),
         133, driver=D, attributes={"services": {"string": "some_example_value"}}),
    case("split_attribute", 'device.attributes["dra.example.com"].services.split("example").size() >= 2',
         match(True), 19, driver=D, attributes={"services": {"string": "some_example_value"}}),
    case("regexp_attribute", 'device.attributes["dra.example.com"].services.matches("[^a]?sym")', match(True), 18,
         driver=D, attributes={"services": {"string": "asymetric"}}),
    case("check_capacity_domains", 'device.capacity.exists_one(x, x == "dra.example.com")', match(True), 164,
         driver=D, capacity={"memory": {"value": "1Mi"}}),
    case("check_capacity_ids", 'device.capacity["dra.example.com"].exists_one(x, x == "memory")', match(True), 133,
         driver=D, capacity={"memory": {"value": "1Mi"}}),
    case("expensive", "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, "
         "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, "
         "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z4, "
         "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z5, int('1'.find('[0-9]*')) < 100)))))))",
         match_error("actual cost limit exceeded"), 85555551, driver=D, attributes=_expensive_attributes()),
    case("allow_multiple_allocations", "device.allowMultipleAllocations == true", match(True), 3, driver=D,
         multiple=True),
    case("allow_multiple_allocations_default", "device.allowMultipleAllocations == false", match(True), 3,
         driver=D),
    case("allow_multiple_allocations_false", "device.allowMultipleAllocations == false", match(True), 3,
         driver=D, multiple=False),
    case("allow_multiple_allocations_disabled", "device.allowMultipleAllocations == false",
         compile_error("undefined field 'allowMultipleAllocations'"), driver=D,
         features={"consumableCapacity": False}),
]

# The Kubernetes CEL library beyond upstream's table (ours, issue 11): each answer checked by the oracle.
LIBRARY = [
    case('library-device-attributes-dra-example-com-x-orva-0',
         "device.attributes['dra.example.com'].?x.orValue(1) == 1", match(True), driver=D),
    case('library-device-attributes-dra-example-com-orvalu-1',
         "device.attributes[?'dra.example.com'].orValue({}).size() >= 0", match(True), driver=D),
    case('library-isurl-https-example-com-a-2', "isURL('https://example.com/a')", match(True), driver=D),
    case('library-url-https-example-com-a-gethost-example--3',
         "url('https://example.com/a').getHost() == 'example.com'", match(True), driver=D),
    case('library-ip-10-0-0-1-family-4-4', "ip('10.0.0.1').family() == 4", match(True), driver=D),
    case('library-cidr-10-0-0-0-8-containsip-ip-10-1-2-3-5',
         "cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))", match(True), driver=D),
    case('library-isip-10-0-0-1-6', "isIP('10.0.0.1')", match(True), driver=D),
    case('library-sets-contains-1-2-3-1-7', 'sets.contains([1, 2, 3], [1])', match(True), driver=D),
    case('library-sets-equivalent-1-2-2-1-8', 'sets.equivalent([1, 2], [2, 1])', match(True), driver=D),
    case('library-sets-intersects-1-1-2-9', 'sets.intersects([1], [1, 2])', match(True), driver=D),
    case('library-1-2-all-i-v-v-i-10', '[1, 2].all(i, v, v > i)', match(True), driver=D),
    case('library-1-2-exists-i-v-v-2-11', '[1, 2].exists(i, v, v == 2)', match(True), driver=D),
    case('library-a-1-all-k-v-v-1-12', "{'a': 1}.all(k, v, v == 1)", match(True), driver=D),
    case('library-1-2-transformlist-i-v-v-2-2-4-13',
         '[1, 2].transformList(i, v, v * 2) == [2, 4]', match(True), driver=D),
    case('library-3-1-2-sort-1-2-3-14', '[3, 1, 2].sort() == [1, 2, 3]', match(True), driver=D),
    case('library-1-1-2-distinct-1-2-15', '[1, 1, 2].distinct() == [1, 2]', match(True), driver=D),
    case('library-1-2-3-slice-1-2-2-16', '[1, 2, 3].slice(1, 2) == [2]', match(True), driver=D),
    case('library-1-2-flatten-1-2-17', '[[1], [2]].flatten() == [1, 2]', match(True), driver=D),
    case('library-1-2-reverse-2-1-18', '[1, 2].reverse() == [2, 1]', match(True), driver=D),
    case('library-lists-range-3-0-1-2-19', 'lists.range(3) == [0, 1, 2]', match(True), driver=D),
    case('library-1-2-3-sortby-x-x-3-2-1-20', '[1, 2, 3].sortBy(x, -x) == [3, 2, 1]', match(True), driver=D),
    case('library-s-d-format-a-1-a-1-21', "'%s-%d'.format(['a', 1]) == 'a-1'", match(True), driver=D),
    case('library-strings-quote-a-a-22', 'strings.quote(\'a\') == \'"a"\'', match(True), driver=D),
    case('library-abcabc-lastindexof-a-2-0-23', "'abcabc'.lastIndexOf('a', 2) == 0", match(True), driver=D),
    case('library-abcabc-indexof-c-3-5-24', "'abcabc'.indexOf('c', 3) == 5", match(True), driver=D),
    case('library-1-2-max-2-25', '[1, 2].max() == 2', match(True), driver=D),
    case('library-1-2-min-1-26', '[1, 2].min() == 1', match(True), driver=D),
    case('library-math-greatest-1-2-2-27',
         'math.greatest(1, 2) == 2', compile_error("undeclared reference to 'math'"), driver=D),
    case('library-math-least-1-2-1-28',
         'math.least([1, 2]) == 1', compile_error("undeclared reference to 'math'"), driver=D),
    case('library-math-ceil-1-2-2-0-29',
         'math.ceil(1.2) == 2.0', compile_error("undeclared reference to 'math'"), driver=D),
    case('library-math-abs-1-1-30', 'math.abs(-1) == 1', compile_error("undeclared reference to 'math'"), driver=D),
    case('library-semver-1-2-3-compareto-semver-1-2-4-1-34',
         "semver('1.2.3').compareTo(semver('1.2.4')) == -1", match(True), driver=D),
    case('library-quantity-1gi-isgreaterthan-quantity-1mi-35',
         "quantity('1Gi').isGreaterThan(quantity('1Mi'))", match(True), driver=D),
    case('library-aaa-matches-a-36', "'aaa'.matches('^a+$')", match(True), driver=D),
    case('library-xyz-find-a-z-xyz-37', "'xyz'.find('[a-z]+') == 'xyz'", match(True), driver=D),
    case('library-a1b2-findall-0-9-1-2-38', "'a1b2'.findAll('[0-9]') == ['1', '2']", match(True), driver=D),
    case('library-optional-of-1-value-1-39', 'optional.of(1).value() == 1', match(True), driver=D),
    case('library-optional-none-orvalue-2-2-40', 'optional.none().orValue(2) == 2', match(True), driver=D),
    case('library-1-2-3-filter-x-x-1-size-2-41', '[1, 2, 3].filter(x, x > 1).size() == 2', match(True), driver=D),
    case('library-dyn-1-1-42', 'dyn(1) == 1', match(True), driver=D),
    case('library-int-5-5-44', "int('5') == 5", match(True), driver=D),
    case('library-double-1-1-0-45', 'double(1) == 1.0', match(True), driver=D),
    case('library-string-1-1-46', "string(1) == '1'", match(True), driver=D),
    case('library-bytes-a-b-a-47', "bytes('a') == b'a'", match(True), driver=D),
    case('library-duration-1s-duration-1000ms-48', "duration('1s') == duration('1000ms')", match(True), driver=D),
    case('library-timestamp-2020-01-01t00-00-00z-timestamp-49',
         "timestamp('2020-01-01T00:00:00Z') < timestamp('2021-01-01T00:00:00Z')", match(True), driver=D),
    case('library-hello-lowerascii-hello-50', "'Hello'.lowerAscii() == 'hello'", match(True), driver=D),
    case('library-a-trim-a-51', "'  a '.trim() == 'a'", match(True), driver=D),
    case('library-abc-substring-1-bc-52', "'abc'.substring(1) == 'bc'", match(True), driver=D),
    case('library-abc-charat-1-b-53', "'abc'.charAt(1) == 'b'", match(True), driver=D),
    case('library-1-2-3-issorted-54', '[1,2,3].isSorted()', match(True), driver=D),
    case('library-1-2-3-sum-6-55', '[1,2,3].sum() == 6', match(True), driver=D),
    case('library-1-2-3-indexof-2-1-56', '[1,2,3].indexOf(2) == 1', match(True), driver=D),
]
CASES += LIBRARY

# Compile-time type errors upstream's checker gives (ours, issue 11): each checked by the oracle.
def typed(name, expression, expect):
    """A type-checking case, evaluated on one device of our driver with a memory capacity."""
    return case(name, expression, expect, driver=D, capacity={'memory': {'value': '2Gi'}})


TYPE_ERRORS = [
    typed('typed-quantity-1-quantity-2-0',
          "quantity('1') > quantity('2')", compile_error("")),
    typed('typed-device-capacity-dra-example-com-memory-q-1',
          "device.capacity['dra.example.com'].memory > quantity('1Gi')", compile_error("")),
    typed('typed-device-capacity-dra-example-com-memory-c-2',
          "device.capacity['dra.example.com'].memory.compareTo(quantity('1Gi')) > 0", match(True)),
    typed('typed-device-attributes-dra-example-com-x-matc-3',
          "device.attributes['dra.example.com'].x.matches('[')", compile_error("")),
    typed('typed-a-matches-a-4',
          "'a'.matches('(a')", compile_error("")),
    typed('typed-a-find-5',
          "'a'.find('[') == ''", compile_error("")),
    typed('typed-1-a-size-2-6',
          "[1, 'a'].size() == 2", compile_error("")),
    typed('typed-1-2-0-size-2-7',
          '[1, 2.0].size() == 2', compile_error("")),
    typed('typed-1-2-size-2-8',
          '[1, 2].size() == 2', match(True)),
    typed('typed-a-device-driver-size-2-9',
          "['a', device.driver].size() == 2", match(True)),
    typed('typed-quantity-1-size-1-10',
          "quantity('1').size() == 1", compile_error("")),
    typed('typed-device-capacity-dra-example-com-memory-s-11',
          "device.capacity['dra.example.com'].memory.size() == 1", compile_error("")),
    typed('typed-semver-1-0-0-semver-2-0-0-12',
          "semver('1.0.0') < semver('2.0.0')", compile_error("")),
    typed('typed-a-1-b-x-size-2-13',
          "{'a': 1, 'b': 'x'}.size() == 2", compile_error("")),
    typed('typed-1-1-b-2-size-2-14',
          "{1: 1, 'b': 2}.size() == 2", compile_error("")),
]
CASES += TYPE_ERRORS

# Adversarial selectors (issue 12): upstream's RE2 answers in linear time, its runtime cost limit
# stops strings that grow without bound, and long selectors compile. Each checked by the oracle.
_ADVERSARY = {"s": {"string": "a" * 28 + "!"}}
ADVERSARIAL = [
    case("redos-find", "device.attributes['dra.example.com'].s.find('(a+)+$') == ''", match(True),
         driver=D, attributes=_ADVERSARY),
    case("redos-findall", "device.attributes['dra.example.com'].s.findAll('(a|aa)+$').size() == 0", match(True),
         driver=D, attributes=_ADVERSARY),
    case("redos-matches", "device.attributes['dra.example.com'].s.matches('^(a+)+$')", match(False),
         driver=D, attributes=_ADVERSARY),
    case("re2-classes", "'x9_ü'.findAll('\\\\w') == ['x', '9', '_']", match(True), driver=D),
    case("growth-replace", "'a'" + ".replace('a', 'aaaaaaaaaa')" * 9 + ".size() > 0",
         match_error("actual cost limit exceeded"), cost=22222225, driver=D),
    # Refused at creation (estimated cost), yet it runs: upstream charges replace by its receiver.
    case("growth-replace-attribute", "device.attributes['dra.example.com'].s" + ".replace('a', 'aaaaaaaaaa')" * 6
         + ".size() > 0", match(True), cost=1422227, driver=D, attributes=_ADVERSARY),
    case("join-literal", "['a', 'b'].join(',') == 'a,b'", match(True), cost=1844674407370955275, driver=D),
    case("growth-replace-small", "'a'" + ".replace('a', 'aaaaaaaaaa')" * 3 + ".size() == 1000", match(True), driver=D),
    case("long-macros", " && ".join(["[1, 2].all(x, x > 0)"] * 420), match(True), driver=D),
    case("long-binds", " && ".join(["cel.bind(x, 1, x == 1)"] * 390), match(True), driver=D),
    case("long-two-variable", " && ".join(["[1, 2].all(i, v, v > i)"] * 300), match(True), driver=D),
    case("long-maps", "{" + ", ".join(f"'k{i}': {i}" for i in range(700)) + "}.size() == 700", match(True),
         driver=D),
]
CASES += ADVERSARIAL
