// Unit tests of the Jinja2 subset behind ChatTemplate. Expected outputs follow
// the Jinja2 template designer documentation (and Python semantics for
// operators, str() and json.dumps) under transformers' environment:
// trim_blocks, lstrip_blocks, keep_trailing_newline=False, loopcontrols.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/chat/chat_template.h"

namespace pagoda {
namespace {

using nlohmann::json;

std::string R(const std::string& src, const json& vars = json::object()) {
  return ChatTemplate(src).render(json::array(), false, "<s>", "</s>", vars);
}

std::string Err(const std::string& src, const json& vars = json::object()) {
  try {
    R(src, vars);
  } catch (const ChatTemplateError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(ChatJinja, WhitespaceControl) {
  EXPECT_EQ(R("{% if true %}\nA\n{% endif %}\nB"), "A\nB");                      // trim_blocks
  EXPECT_EQ(R("  {% if true %}\n  x\n  {% endif %}\n"), "  x\n");                // lstrip_blocks
  EXPECT_EQ(R("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(R("a\n  {%- if true -%}\n  b\n{%- endif %}"), "ab");
  EXPECT_EQ(R("  {%+ if true %}x{% endif %}"), "  x");                          // + keeps indentation
  EXPECT_EQ(R("  {{ 'x' }}"), "  x");                                           // no lstrip for {{
  EXPECT_EQ(R("{{ 'x' }}\ny"), "x\ny");                                          // no trim after }}
  EXPECT_EQ(R("a{# c #}b"), "ab");
  EXPECT_EQ(R("{# c #}\nb"), "b");
  EXPECT_EQ(R("x\n"), "x");                                                      // keep_trailing_newline=False
  EXPECT_EQ(R("x\n\n"), "x\n");
  EXPECT_EQ(R("a\r\nb"), "a\nb");
  EXPECT_EQ(R("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
  EXPECT_EQ(R("x {% if true %}y{% endif %}"), "x y");                           // text before tag on the line
}

// trim_blocks applies after {% endraw %}, not after {% raw %}: Jinja2's
// lexer gives raw_begin no block suffix, so the body keeps its first
// newline (vLLM's template_dse_qwen2_vl.jinja writes its newlines so);
// `-%}` still strips. Outputs of Python Jinja2 3.1.6 under transformers'
// environment.
TEST(ChatJinja, RawKeepsTheNewlineAfterItsOpeningTag) {
  EXPECT_EQ(R("{% raw %}\nA{% endraw %}\nB"), "\nAB");
  EXPECT_EQ(R("{% raw -%}\n A{% endraw %}B"), "AB");
  EXPECT_EQ(R("x\n  {% raw %}\nA\n{%- endraw %}\nB"), "x\n\nAB");
}

TEST(ChatJinja, LiteralsAndArithmetic) {
  EXPECT_EQ(R("{{ 'a\\nb' }}"), "a\nb");
  EXPECT_EQ(R("{{ \"it's\" }}|{{ 'tab\\there' }}|{{ '\\u00e9' }}"), "it's|tab\there|\xc3\xa9");
  EXPECT_EQ(R("{{ 1 + 2 * 3 }}|{{ 7 / 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 2 ** 10 }}|{{ 4 / 2 }}"),
            "7|3.5|3|-4|2|1024|2.0");
  EXPECT_EQ(R("{{ 1.5 + 1 }}|{{ 1e3 }}|{{ 0.1 + 0.2 }}|{{ 1.0 }}|{{ 1e-5 * 1 }}|{{ 1e16 }}"),
            "2.5|1000.0|0.30000000000000004|1.0|1e-05|1e+16");
  EXPECT_EQ(R("{{ 'a' ~ 1 ~ none }}|{{ 'a' + 'b' }}|{{ [1] + [2] }}|{{ 'ab' * 2 }}"), "a1None|ab|[1, 2]|abab");
  EXPECT_EQ(R("{{ [1, 'a', none, true, False] }}|{{ {'a': 1, 'b': 'x'} }}"), "[1, 'a', None, True, False]|{'a': 1, 'b': 'x'}");
  EXPECT_EQ(R("{{ True }}{{ none }}{{ undefined_name }}"), "TrueNone");
}

TEST(ChatJinja, LogicAndComparisons) {
  EXPECT_EQ(R("{{ 1 < 2 < 3 }}{{ 1 < 2 > 3 }}{{ 1 == 1.0 }}{{ 'a' != 'b' }}"), "TrueFalseTrueTrue");
  EXPECT_EQ(R("{{ 'a' in 'cat' }}{{ 3 not in [1, 2] }}{{ 'k' in {'k': 1} }}{{ 1 in [1] }}"), "TrueTrueTrueTrue");
  EXPECT_EQ(R("{{ 0 or 'x' }}|{{ 'a' and 'b' }}|{{ not none }}|{{ not 'a' }}"), "x|b|True|False");
  EXPECT_EQ(R("{{ 'y' if 1 else 'n' }}|{{ 'y' if 0 else 'n' }}|{{ 'y' if 0 }}|"), "y|n||");
  EXPECT_EQ(R("{{ (true) != (1 % 2 == 0) }}"), "True");
}

TEST(ChatJinja, SubscriptsAndSlices) {
  EXPECT_EQ(R("{{ [1, 2, 3][::-1] }}|{{ 'hello'[1:3] }}|{{ [1, 2, 3][-1] }}|{{ [1, 2, 3, 4, 5][1::2] }}|{{ 'abc'[::-1] }}"),
            "[3, 2, 1]|el|3|[2, 4]|cba");
  EXPECT_EQ(R("{{ xs[1:] }}|{{ xs[:-1] }}|{{ xs[5:] }}", {{"xs", {1, 2, 3}}}), "[2, 3]|[1, 2]|[]");
  EXPECT_EQ(R("{% set d = {'a': {'b': 'c'}} %}{{ d.a.b }}{{ d['a']['b'] }}[{{ d.zz }}]"), "cc[]");
  EXPECT_EQ(R("{{ m.role }}:{{ m['content'] }}", {{"m", {{"role", "user"}, {"content", "hi"}}}}), "user:hi");
  EXPECT_EQ(R("{{ xs.0 }}{{ xs[5] is undefined }}", {{"xs", {7}}}), "7True");
}

TEST(ChatJinja, UndefinedIsStrictWhereJinjaRaises) {
  EXPECT_EQ(Err("{% set d = {} %}{{ d.zz.yy }}"), "'dict object' has no attribute 'zz'");
  EXPECT_EQ(Err("{{ nope + 1 }}"), "'nope' is undefined");
  EXPECT_EQ(Err("{{ nope.attr }}"), "'nope' is undefined");
  EXPECT_EQ(R("{{ nope | length }}{% for x in nope %}x{% endfor %}{{ nope ~ 'a' }}{{ nope is defined }}"), "0aFalse");
  EXPECT_EQ(Err("{{ 'a' + 1 }}"), "can only concatenate str (not \"int\") to str");
  EXPECT_EQ(Err("{{ 'a' + none }}"), "can only concatenate str (not \"NoneType\") to str");
  EXPECT_EQ(Err("{{ 1 / 0 }}"), "division by zero");
}

TEST(ChatJinja, ForLoops) {
  EXPECT_EQ(R("{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}"
              "{{ loop.last }}{{ loop.length }};{% endfor %}"),
            "103TrueFalse3;212FalseFalse3;321FalseTrue3;");
  EXPECT_EQ(R("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(R("{% for x in range(10) if x is odd %}{{ x }}{{ ',' if not loop.last }}{% endfor %}"), "1,3,5,7,9");
  EXPECT_EQ(R("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}"
              "{{ x }}{% endfor %}"),
            "0134");
  EXPECT_EQ(R("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }} {% endfor %}"), "a=1 b=2 ");
  EXPECT_EQ(R("{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}"), "ab");
  EXPECT_EQ(R("{% for x in [1, 2, 3] %}{{ loop.cycle('o', 'e') }}{% endfor %}"), "oeo");
  EXPECT_EQ(R("{% for x in [1, 2] %}{% for y in 'ab' %}{{ x }}{{ y }}{{ loop.index }} {% endfor %}{% endfor %}"),
            "1a1 1b2 2a1 2b2 ");
  EXPECT_EQ(Err("{% for x in none %}{% endfor %}"), "'NoneType' object is not iterable");
}

TEST(ChatJinja, AssignmentScopingAndNamespace) {
  EXPECT_EQ(R("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"), "21");
  EXPECT_EQ(R("{% if true %}{% set x = 3 %}{% endif %}{{ x }}"), "3");
  EXPECT_EQ(R("{% set ns = namespace(x=1, found=false) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}"
              "{% set ns.found = true %}{% endfor %}{{ ns.x }}{{ ns.found }}"),
            "4True");
  EXPECT_EQ(R("{% set s %}a{{ 1 }}b{% endset %}[{{ s }}]"), "[a1b]");
  EXPECT_EQ(R("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(Err("{% set d = {} %}{% set d.x = 1 %}"), "cannot assign attribute on non-namespace object");
}

TEST(ChatJinja, MacrosAndCall) {
  EXPECT_EQ(R("{% macro greet(name, greeting='Hi') %}{{ greeting }} {{ name }}{% endmacro %}"
              "{{ greet('Bob') }}|{{ greet('Al', greeting='Yo') }}"),
            "Hi Bob|Yo Al");
  EXPECT_EQ(R("{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}x{% endcall %}"), "<x>");
  EXPECT_EQ(R("{% macro m(a) %}{{ a }}{{ varargs | length }}{% endmacro %}{{ m(1, 2, 3) }}"), "12");
}

TEST(ChatJinja, Tests) {
  EXPECT_EQ(R("{{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}"
              "{{ {} is mapping }}{{ [] is iterable }}{{ [] is sequence }}{{ true is boolean }}{{ true is true }}"
              "{{ false is false }}{{ 3 is odd }}{{ 4 is even }}{{ 1 is not string }}{{ 1.5 is number }}",
              {{"x", 1}}),
            "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(R("{{ 1 is boolean }}{{ 1 is true }}{{ 'a' is mapping }}{{ none is string }}{{ 6 is divisibleby 3 }}"
              "{{ 2 is equalto 2 }}{{ 'x' is in 'xy' }}"),
            "FalseFalseFalseFalseTrueTrueTrue");
  EXPECT_EQ(Err("{{ 1 is frobbed }}"), "No test named 'frobbed'.");
}

TEST(ChatJinja, Filters) {
  EXPECT_EQ(R("{{ '  a b  ' | trim }}|{{ [1, 2, 3] | length }}|{{ 'h\xc3\xa9llo' | length }}|{{ [1, 2, 3] | first }}"
              "{{ [1, 2, 3] | last }}|{{ 'ab' | upper }}|{{ 'AB' | lower }}"),
            "a b|3|5|13|AB|ab");
  EXPECT_EQ(R("{{ 'hello world' | title }}|{{ 'hELLO' | capitalize }}|{{ 'aXa' | replace('a', 'b') }}|"
              "{{ [1, 2] | join(', ') }}|{{ ['a', 'b'] | join }}"),
            "Hello World|Hello|bXb|1, 2|ab");
  EXPECT_EQ(R("{{ x | default('d') }}|{{ '' | default('d') }}|{{ '' | default('d', true) }}|{{ x | d('e') }}"), "d||d|e");
  EXPECT_EQ(R("{{ 42 | string }}|{{ '42' | int + 1 }}|{{ '3.5' | float }}|{{ 'x' | int }}|{{ 3.9 | int }}|{{ 'ab' | list }}"),
            "42|43|3.5|0|3|['a', 'b']");
  json users = {{{"name", "a"}, {"role", "user"}}, {{"name", "b"}, {"role", "assistant"}}, {{"name", "c"}, {"role", "user"}}};
  EXPECT_EQ(R("{{ u | map(attribute='name') | join(',') }}|{{ u | selectattr('role', 'equalto', 'user') | list | length }}|"
              "{{ u | rejectattr('role', 'equalto', 'user') | map(attribute='name') | first }}|"
              "{{ [0, 1, 2] | select | list }}|{{ ['a', 'B'] | map('upper') | join }}",
              {{"u", users}}),
            "a,b,c|2|b|[1, 2]|AB");
  EXPECT_EQ(R("{% for k, v in {'b': 1, 'a': 2} | dictsort %}{{ k }}{{ v }}{% endfor %}"), "a2b1");
  EXPECT_EQ(R("{% for k, v in {'b': 1} | items %}{{ k }}{{ v }}{% endfor %}"), "b1");
  EXPECT_EQ(R("{{ '<a href=\"x\">' | escape }}|{{ '<b>' | safe }}"), "&lt;a href=&#34;x&#34;&gt;|<b>");
  EXPECT_EQ(R("{{ [3, 1, 2] | sort | list }}|{{ [1, 2, 1] | unique | list }}|{{ [1, 2] | reverse | list }}|"
              "{{ [1, 2, 3] | sum }}|{{ [4, 2, 8] | max }}|{{ -3 | abs }}"),
            "[1, 2, 3]|[1, 2]|[2, 1]|6|8|3");
  EXPECT_EQ(R("{{ 'a\nb' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}"), "a\n  b|  a\n  b");
  EXPECT_EQ(Err("{{ 1 | frob }}"), "No filter named 'frob'.");
}

TEST(ChatJinja, ToJsonMatchesPythonJsonDumps) {
  EXPECT_EQ(R("{{ {'a': [1, 2.5, '\xc3\xa9', none, true], 'b': 'q\"\\n'} | tojson }}"),
            "{\"a\": [1, 2.5, \"\xc3\xa9\", null, true], \"b\": \"q\\\"\\n\"}");
  EXPECT_EQ(R("{{ {'a': [1, 2], 'b': {}} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}");
  EXPECT_EQ(R("{{ '<x>' | tojson }}"), "\"<x>\"");  // transformers' tojson does not HTML-escape
  EXPECT_EQ(R("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}"), "{\"a\": 2, \"b\": 1}");
  // transformers' signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  EXPECT_EQ(R("{{ '\u00e9\U0001F600' | tojson(ensure_ascii=true) }}|{{ ['x'] | tojson(true) }}"),
            "\"\\u00e9\\ud83d\\ude00\"|[\"x\"]");
  EXPECT_EQ(R("{{ {'a': 1, 'b': [1, 2]} | tojson(separators=(',', ':')) }}"), "{\"a\":1,\"b\":[1,2]}");
  EXPECT_EQ(R("{{ {'a': [1]} | tojson(indent='\t') }}|{{ [1] | tojson(indent=0) }}"), "{\n\t\"a\": [\n\t\t1\n\t]\n}|[\n1\n]");
  EXPECT_EQ(R("{{ [1.0, 1e100, -0.0, 3.14] | tojson }}"), "[1.0, 1e+100, -0.0, 3.14]");
  EXPECT_EQ(Err("{{ x | tojson }}"), "Object of type Undefined is not JSON serializable");
}

TEST(ChatJinja, StringDictListMethods) {
  EXPECT_EQ(R("{{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  x'.lstrip() }}|{{ 'x  '.rstrip() }}|"
              "{{ '\\n\\nx'.lstrip('\\n') }}"),
            "x|a|x|x|x");
  EXPECT_EQ(R("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('bc') }}{{ 'abc'.startswith('b') }}"), "TrueTrueFalse");
  EXPECT_EQ(R("{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'x</think>y'.split('</think>')[-1] }}"),
            "['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|y");
  EXPECT_EQ(R("{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ 'hello there'.title() }}"),
            "bba|ABab|Hello There");
  EXPECT_EQ(R("{% set d = {'a': 1} %}{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 5) }}{{ d.keys() | list }}"
              "{{ d.values() | list }}"),
            "1None5['a'][1]");
  // ImmutableSandboxedEnvironment forbids mutating methods.
  EXPECT_EQ(Err("{% set l = [] %}{{ l.append(1) }}"), "access to attribute 'append' of 'list' object is unsafe.");
}

// Python's str.upper/lower/title/capitalize map non-ASCII letters too
// (Unicode case mappings; ß upper-cases to "SS"; final sigma).
TEST(ChatJinja, UnicodeCaseMapping) {
  EXPECT_EQ(R("{{ '\u00e9'.upper() }}|{{ 'stra\u00dfe'.upper() }}|{{ '\u041f\u0420\u0418\u0412\u0415\u0422' | lower }}"),
            "\u00c9|STRASSE|\u043f\u0440\u0438\u0432\u0435\u0442");
  EXPECT_EQ(R("{{ '\u03a3\u0399\u03a3\u03a5\u03a6\u039f\u03a3'.lower() }}"),
            "\u03c3\u03b9\u03c3\u03c5\u03c6\u03bf\u03c2");
  EXPECT_EQ(R("{{ 'h\u00e9llo w\u00f6rld'.title() }}|{{ '\u00e9COLE' | capitalize }}|{{ '\u4e2d\u6587abc' | upper }}"),
            "H\u00e9llo W\u00f6rld|\u00c9cole|\u4e2d\u6587ABC");
}

TEST(ChatJinja, RaiseExceptionAndParseErrors) {
  EXPECT_EQ(Err("{{ raise_exception('Bad role: ' ~ 'x') }}"), "Bad role: x");
  std::string e = Err("line1\n{% if x %}\nno end");
  EXPECT_NE(e.find("(line 3)"), std::string::npos) << e;
  EXPECT_NE(e.find("endif"), std::string::npos) << e;
  e = Err("ok\n{{ 1 + }}");
  EXPECT_NE(e.find("(line 2)"), std::string::npos) << e;
  e = Err("\n\n{% frob %}");
  EXPECT_NE(e.find("unknown tag 'frob'"), std::string::npos) << e;
  EXPECT_NE(e.find("(line 3)"), std::string::npos) << e;
  e = Err("{{ 'abc }}");
  EXPECT_NE(e.find("(line 1)"), std::string::npos) << e;
  e = Err("a\n{# never closed");
  EXPECT_NE(e.find("(line 2)"), std::string::npos) << e;
  EXPECT_THROW(ChatTemplate("{% for x in %}{% endfor %}"), ChatTemplateError);
  EXPECT_THROW(ChatTemplate("{% endif %}"), ChatTemplateError);
}

TEST(ChatJinja, FilterBlocksAndBadInputLimits) {
  EXPECT_EQ(R("{% filter upper %}abc{{ 'd' }}{% endfilter %}"), "ABCD");
  EXPECT_EQ(R("{% set y | upper %}abc{% endset %}{{ y }}"), "ABC");
  // 64-bit integers fail cleanly where Python would switch to big integers.
  EXPECT_NE(Err("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
  EXPECT_NE(Err("{{ 2 ** 64 }}").find("overflow"), std::string::npos);
  // Python: exact integers by squaring (a huge exponent of 1 or -1 is
  // instant), ZeroDivisionError for 0 to a negative power.
  EXPECT_EQ(R("{{ 2 ** 62 }}|{{ (-2) ** 63 }}|{{ 3 ** 39 }}|{{ 1 ** 999999999999 }}|{{ (-1) ** "
              "999999999999 }}|{{ 7 ** 0 }}"),
            "4611686018427387904|-9223372036854775808|4052555153018976267|1|-1|1");
  EXPECT_NE(Err("{{ 2 ** 63 }}").find("overflow"), std::string::npos);
  EXPECT_NE(Err("{{ 3 ** 40 }}").find("overflow"), std::string::npos);
  EXPECT_EQ(Err("{{ 0 ** -1 }}"), "0.0 cannot be raised to a negative power");
  EXPECT_EQ(Err("{{ 0.0 ** -2.5 }}"), "0.0 cannot be raised to a negative power");
  EXPECT_NE(Err("{{ 99999999999999999999 }}").find("(line 1)"), std::string::npos);
  EXPECT_NE(Err("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("recursion"), std::string::npos);
  EXPECT_NE(Err("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").find("nesting too deep"),
            std::string::npos);
  std::string nested_ifs;
  for (int i = 0; i < 5000; ++i) nested_ifs += "{% if 1 %}";
  EXPECT_NE(Err(nested_ifs).find("nesting too deep"), std::string::npos);
  EXPECT_NE(Err("{{ 'ab' * 100000000000 }}").find("too large"), std::string::npos);
  EXPECT_EQ(Err("{{ range(1000000) | length }}"),
            "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  // A runaway template (loops under MAX_RANGE each) fails instead of
  // rendering for hours: by output size (16 MiB), steps (2 million) or time.
  EXPECT_NE(Err("{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}").find("16 MiB of output"),
            std::string::npos);
  // Steps or wall time (500 ms), whichever comes first on this machine.
  const std::string steps =
      Err("{% set l = range(100000) %}{% for i in range(100000) %}{% for j in l %}{% set x = j %}"
          "{% endfor %}{% endfor %}");
  EXPECT_TRUE(steps.find("2000000 steps") != std::string::npos ||
              steps.find("time limit of 500 ms") != std::string::npos)
      << steps;
  // Few steps, each slow (comparing two 100,000-item lists, ~100 s in all)
  // and building nothing: only the time limit can stop it.
  EXPECT_EQ(Err("{% set l = range(100000) | list %}{% set m = range(100000) | list %}"
                "{% for i in range(100000) %}{% set x = l == m %}{% endfor %}"),
            "chat template rendering exceeded its time limit of 500 ms");
  // One expression, no loop (two comparisons of ~10^10 steps in all).
  EXPECT_EQ(Err("{{ (range(100000) | list + range(100000) | list) | unique | length }}"),
            "chat template rendering exceeded its time limit of 500 ms");
}

// What a single expression may build is bounded (engine/chat/jinja_budget.h):
// each of these would take gigabytes (several found by fuzz_chat_template
// as out-of-memory), and fails with the same error instead.
TEST(ChatJinja, ExpressionsThatWouldTakeGigabytesFail) {
  const std::string limit = "chat template rendering exceeded its memory limit of 64 MiB";
  // On a loaded machine the time limit (500 ms) may come first for the
  // ones that build tens of megabytes: either bound is the answer.
  const auto bounded = [&](const std::string& e) {
    return e == limit || e == "chat template rendering exceeded its time limit of 500 ms";
  };
  EXPECT_PRED1(bounded, Err("{{ ('a' * 30000000) | list | length }}"));
  EXPECT_PRED1(bounded, Err("{{ ([0] * 30000000) | length }}"));
  EXPECT_PRED1(bounded, Err("{% set s = 'a' * 30000000 %}{{ [s, s, s] | join | length }}"));
  EXPECT_PRED1(bounded, Err("{% set s = 'a' * 30000000 %}{{ ', '.join([s, s, s]) | length }}"));
  EXPECT_PRED1(bounded, Err("{% set s = 'a' * 30000000 %}{{ [s, s, s] | string | length }}"));
  EXPECT_EQ(R("{{ 'a-b-c' | replace('-', '==') }}|{{ 'a-b-c'.replace('-', '', 1) }}|"
              "{{ ['x', 1, 'yz'] | join('; ') }}|{{ ', '.join(['p', 'q']) }}"),
            "a==b==c|ab-c|x; 1; yz|p, q");
  EXPECT_PRED1(bounded, Err("{{ ('a' * 1000000) | replace('a', 'b' * 1000) | length }}"));
  EXPECT_PRED1(bounded, Err("{{ ('a' * 1000000).replace('a', 'b' * 1000) | length }}"));
  EXPECT_PRED1(bounded, Err("{{ (',' * 30000000).split(',') | length }}"));
  EXPECT_PRED1(bounded, Err("{{ ('a\n' * 1000000) | indent(1000) | length }}"));
  EXPECT_PRED1(bounded, Err("{{ [[1, [2]] * 100] | tojson(indent=1000000) | length }}"));
  // Many statements each under the bound add up (a bound on work too).
  EXPECT_PRED1(bounded, Err("{% for i in range(1000) %}{% set x = 'ab' * 1000000 %}{% endfor %}"));
  // Real use stays far inside it: a 10 MB message through trim and join.
  const json big = json::array({{{"role", "user"}, {"content", std::string(10'000'000, 'x')}}});
  EXPECT_EQ(ChatTemplate("{% for m in messages %}{{ [m.role, m.content | trim] | join(': ') }}"
                         "{% endfor %}")
                .render(big, false, "", "")
                .size(),
            10'000'006u);
}

// Found by a fresh-user attack on the server (issue 12): each took seconds,
// hours or the process.
TEST(ChatJinja, HostileTemplatesFromTheAttackFailFast) {
  // A 20,000-link chain (a + a + ..., x.a.a..., x | f | f ...) is a
  // 20,000-deep tree: it overflowed the stack when evaluated.
  auto chain = [](const std::string& first, const std::string& link, int n) {
    std::string s = "{{ " + first;
    for (int i = 0; i < n; ++i) s += link;
    return s + " }}";
  };
  for (const std::string& t :
       {chain("1", " + 1", 20000), chain("'a'", " ~ 'a'", 20000), chain("'x'", " | upper", 20000),
        chain("x", ".a", 20000), chain("1", " and 1", 20000), chain("'x'", "[0]", 20000)})
    EXPECT_NE(Err(t).find("template nesting too deep"), std::string::npos) << t.substr(0, 40);
  EXPECT_EQ(R(chain("1", " + 1", 50)), "51");  // a real chain still renders
  // A list shared 2^64 times (ns.a = [ns.a, ns.a], 64 times): Python
  // compares a shared item once (identity), so == and < are instant; two
  // separately built ones take the time limit, not forever.
  EXPECT_EQ(R("{% set ns = namespace(a=[1]) %}{% for i in range(64) %}{% set ns.a = [ns.a, ns.a] "
              "%}{% endfor %}{{ ns.a < ns.a }} {{ ns.a == ns.a }}"),
            "False True");
  EXPECT_EQ(Err("{% set ns = namespace(a=[1], b=[1]) %}{% for i in range(64) %}{% set ns.a = "
                "[ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}{{ [ns.a, ns.b] | sort "
                "| length }}"),
            "chat template rendering exceeded its time limit of 500 ms");
  // Printing it is bounded by time or memory, whichever comes first.
  for (const char* print : {"string", "tojson"}) {
    const std::string e =
        Err(std::string("{% set ns = namespace(a=['x']) %}{% for i in range(60) %}{% set ns.a = "
                        "[ns.a, ns.a] %}{% endfor %}{{ ns.a | ") +
            print + " | length }}");
    EXPECT_TRUE(e.find("time limit") != std::string::npos ||
                e.find("memory limit") != std::string::npos)
        << e;
  }
  // Substring search is linear (Boyer-Moore): a 10,001-byte needle that
  // almost matches everywhere in 1 MB took seconds to hours.
  EXPECT_EQ(R("{% set h = 'a' * 1000000 %}{% set n = 'a' * 10000 ~ 'b' %}{{ h.find(n) }} "
              "{{ n in h }} {{ h.count(n) }} {{ h.split(n) | length }} "
              "{{ h.replace(n, 'x') | length }}"),
            "-1 False 0 1 1000000");
  EXPECT_EQ(
      R("{% set n = 'a' * 20 ~ 'y' %}{{ ('xx' ~ n ~ n).find(n) }} {{ ('x' ~ n ~ n).count(n) "
        "}} {{ ('1' ~ n ~ '2' ~ n ~ '3').split(n) }} {{ ('1' ~ n ~ '2') | replace(n, '-') }}"),
      "2 2 ['1', '2', '3'] 1-2");
  // raise_exception's message is capped (it becomes a 400's JSON).
  const std::string big = Err("{{ raise_exception('x' * 1000000) }}");
  EXPECT_EQ(big, std::string(4096, 'x') + "...");
  // The second attack: int with a base Python refuses is int(float(s)) as
  // in jinja2 (a null dereference before), a slice step near INT64_MAX
  // ends the slice (a signed overflow before), long string comparisons are
  // held to the time limit, and huge indent widths are refused before built.
  EXPECT_EQ(R("{{ '1' | int(base=999) }} {{ '12' | int(0, 37) }} {{ 'ff' | int(base=16) }}"),
            "1 12 255");
  EXPECT_EQ(R("{{ ['a', 'b', 'c'][1::9223372036854775807] }} {{ [1, 2, 3][2::-9223372036854775807] "
              "}} {{ 'abc'[::9223372036854775807] }}"),
            "['b'] [3] a");
  EXPECT_EQ(Err("{% set a = 'x' * 20000000 %}{% set b = 'x' * 20000000 %}{{ ([a, b] * 4500) | "
                "max(case_sensitive=true) | length }}"),
            "chat template rendering exceeded its time limit of 500 ms");
  // One statement whose output alone passes the 16 MiB bound.
  EXPECT_EQ(Err("{{ 'x' * 20000000 }}"), "chat template rendering exceeded 16 MiB of output");
  EXPECT_EQ(Err("{% set a = 'x' * 20000000 %}{% set b = 'x' * 20000000 %}{{ ([a] * 9000) == "
                "([b] * 9000) }}"),
            "chat template rendering exceeded its time limit of 500 ms");
  EXPECT_EQ(Err("{{ [[[[1]]]] | tojson(indent=99999999) }}"),
            "chat template rendering exceeded its memory limit of 64 MiB");
  EXPECT_EQ(Err("{{ 'a\nb' | indent(99999999) }}"),
            "chat template rendering exceeded its memory limit of 64 MiB");
  // tojson of control characters (6x) is refused before it is built.
  EXPECT_EQ(Err("{{ ('\x01' * 20000000) | tojson | length }}"),
            "chat template rendering exceeded its memory limit of 64 MiB");
}

// Namespaces are the only mutable values, so the only way to a cycle; the
// render frees them anyway (LeakSanitizer checks this in the sanitizer
// build), and nesting is bounded so printing or freeing never overflows
// the stack.
TEST(ChatJinja, NamespaceCyclesAndDeepNesting) {
  EXPECT_EQ(R("{% set ns = namespace(a=1) %}{% set ns.a = ns %}{% set ns.b = [ns, {'k': ns}] %}"
              "{{ ns.a.a.a.b | length }}"),
            "2");
  // A chain of namespaces, released link by link when the render ends. Kept
  // short so the render stays far inside its 500 ms under ASan on a loaded
  // CI core (10,000 links took ~500 ms there); the 100,000-link chain is the
  // fuzz corpus's stack-namespace-chain.
  EXPECT_EQ(R("{% set ns = namespace(p=none) %}{% for i in range(2000) %}"
              "{% set n = namespace(x=[ns.p]) %}{% set ns.p = n %}{% endfor %}ok"),
            "ok");
  EXPECT_EQ(Err("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}"
                "{% endfor %}"),
            "lists and dicts nested deeper than 500 levels");
  EXPECT_EQ(Err("{% set ns = namespace(d={}) %}{% for i in range(1000) %}{% set ns.d = {'k': "
                "ns.d} %}{% endfor %}"),
            "lists and dicts nested deeper than 500 levels");
  EXPECT_EQ(R("{% set ns = namespace(l=[]) %}{% for i in range(400) %}{% set ns.l = [ns.l] %}"
              "{% endfor %}{{ ns.l | tojson | length }}"),
            "802");
}

TEST(ChatJinja, RenderOrderedKeepsKeyOrderForToJson) {
  nlohmann::ordered_json tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}])");
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  extra["tools"] = tools;
  ChatTemplate t("{{ tools | tojson }}|{{ tools[0] }}");
  // json.dumps / str() of a Python dict print keys in insertion order.
  EXPECT_EQ(t.render_ordered(nlohmann::ordered_json::array(), false, "", "", extra),
            "[{\"type\": \"function\", \"function\": {\"name\": \"get\", \"parameters\": {\"type\": \"object\"}}}]|"
            "{'type': 'function', 'function': {'name': 'get', 'parameters': {'type': 'object'}}}");
}

TEST(ChatJinja, RealTemplateFeatures) {
  const std::string dir = std::string(PAGODA_SHARED_DIR) + "/chat_templates/";
  auto load = [&](const std::string& name) {
    std::ifstream f(dir + name + ".jinja");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  json user = json::array({{{"role", "user"}, {"content", "Hi"}}});
  // Qwen3 with enable_thinking=false appends an empty think block.
  EXPECT_EQ(ChatTemplate(load("qwen3")).render(user, true, "", "<|im_end|>", {{"enable_thinking", false}}),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // Qwen2.5 tool call and tool response.
  json msgs = json::array({{{"role", "user"}, {"content", "Hi"}},
                           {{"role", "assistant"},
                            {"content", ""},
                            {"tool_calls", json::array({{{"type", "function"},
                                                         {"function", {{"name", "f"}, {"arguments", {{"x", 1}}}}}}})}},
                           {{"role", "tool"}, {"content", "42"}}});
  EXPECT_EQ(ChatTemplate(load("qwen2.5-instruct")).render(msgs, false, "", "<|im_end|>"),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n");
}

}  // namespace
}  // namespace pagoda
