// Differential vectors: templates exercising the Jinja2 features chat
// templates use (whitespace control, expressions, loops, macros, filters,
// tests, str/dict methods, tojson options, Unicode case mapping, Llama-3.1-
// and Hermes-style tool templates), each with the output (or error message)
// of the reference implementation: Python Jinja2 3.1.6
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
// extensions=[loopcontrols]) with transformers' tojson override and
// raise_exception global, rendered with messages=kMessages[m],
// add_generation_prompt, bos_token="<s>", eos_token="</s>" and **kVars[v].
// Cases where this renderer knowingly differs (Python tuples, '%' string
// formatting, unbounded integers, syntax error wording) are not included.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "engine/chat/chat_template.h"

namespace pagoda {
namespace {

struct Vector {
  const char* source;
  int messages;  // index into kMessages
  int vars;      // index into kVars
  bool add_generation_prompt;
  bool is_error;         // expected is the ChatTemplateError message
  const char* expected;  // Jinja2's rendering
};

const char* const kMessages[] = {
    R"~~([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]}])~~",
    R"~~([{"role": "user", "content": "Hi"}])~~",
    R"~~([{"role": "system", "content": " Sys prompt  "}, {"role": "user", "content": "Hello there"}, {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get", "arguments": {"q": "x", "n": 2}}}]}, {"role": "tool", "content": {"result": [1, 2]}}, {"role": "assistant", "content": "Done."}])~~",
};
const char* const kVars[] = {
    R"~~({"tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}], "enable_thinking": false})~~",
    R"~~({"tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]})~~",
    R"~~({"tools": [{"type": "function", "function": {"name": "get", "description": "Get it", "parameters": {"type": "object", "properties": {"q": {"type": "string", "description": "query"}, "n": {"type": ["integer", "boolean"]}, "tags": {"type": "array", "items": {"type": "string"}}, "meta": {"type": "object", "additionalProperties": {"type": "number"}}}}}}], "builtin_tools": ["brave_search", "code_interpreter", "wolfram"]})~~",
};
const Vector kVectors[] = {
    {R"~~({% if true %}
A
{% endif %}
B)~~",
     0, 0, false, false,
     R"~~(A
B)~~"},
    {R"~~(  {% if true %}
  x
  {% endif %}
)~~",
     0, 0, false, false,
     R"~~(  x
)~~"},
    {R"~~(a  {{- 'b' -}}  c)~~",
     0, 0, false, false,
     R"~~(abc)~~"},
    {R"~~(a
  {%- if true -%}
  b
{%- endif %})~~",
     0, 0, false, false,
     R"~~(ab)~~"},
    {R"~~(  {%+ if true %}x{% endif %})~~",
     0, 0, false, false,
     R"~~(  x)~~"},
    {R"~~(  {{ 'x' }})~~",
     0, 0, false, false,
     R"~~(  x)~~"},
    {R"~~({{ 'x' }}
y)~~",
     0, 0, false, false,
     R"~~(x
y)~~"},
    {R"~~(a{# c #}b)~~",
     0, 0, false, false,
     R"~~(ab)~~"},
    {R"~~({# c #}
b)~~",
     0, 0, false, false,
     R"~~(b)~~"},
    {R"~~(x
)~~",
     0, 0, false, false,
     R"~~(x)~~"},
    {R"~~(x

)~~",
     0, 0, false, false,
     R"~~(x
)~~"},
    {R"~~({% raw %}{{ x }}{% endraw %})~~",
     0, 0, false, false,
     R"~~({{ x }})~~"},
    {R"~~(x {% if true %}y{% endif %})~~",
     0, 0, false, false,
     R"~~(x y)~~"},
    {R"~~({% for m in messages %}
  {{ m.role }}
{% endfor %}
)~~",
     0, 0, false, false,
     R"~~(  user
  assistant
)~~"},
    {R"~~(  {# c #}  
x)~~",
     0, 0, false, false,
     R"~~(  
x)~~"},
    {R"~~({% if true %}  
x{% endif %})~~",
     0, 0, false, false,
     R"~~(  
x)~~"},
    {R"~~(	{% if true %}
		{{ 1 }}
	{% endif %}
)~~",
     0, 0, false, false,
     R"~~(		1
)~~"},
    {R"~~(a {%- if true %} b {%+ endif -%} c)~~",
     0, 0, false, false,
     R"~~(a b c)~~"},
    {R"~~({% if true -%}

  x  {%- endif %})~~",
     0, 0, false, false,
     R"~~(x)~~"},
    {R"~~({{ 'a\nb' }})~~",
     0, 0, false, false,
     R"~~(a
b)~~"},
    {R"~~({{ "it's" }}|{{ 'tab\there' }}|{{ '\u00e9' }}|{{ '\d' }}|{{ '\x41' }})~~",
     0, 0, false, false,
     R"~~(it's|tab	here|é|\d|A)~~"},
    {R"~~({{ 1 + 2 * 3 }}|{{ 7 / 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 2 ** 10 }}|{{ 4 / 2 }})~~",
     0, 0, false, false,
     R"~~(7|3.5|3|-4|2|1024|2.0)~~"},
    {R"~~({{ 1.5 + 1 }}|{{ 1e3 }}|{{ 0.1 + 0.2 }}|{{ 1.0 }}|{{ 1e-5 * 1 }}|{{ 1e16 }}|{{ 123456789.123 }}|{{ 1e15 }}|{{ 0.0001 }}|{{ -2.5e-7 }})~~",
     0, 0, false, false,
     R"~~(2.5|1000.0|0.30000000000000004|1.0|1e-05|1e+16|123456789.123|1000000000000000.0|0.0001|-2.5e-07)~~"},
    {R"~~({{ 'a' ~ 1 ~ none }}|{{ 'a' + 'b' }}|{{ [1] + [2] }}|{{ 'ab' * 2 }})~~",
     0, 0, false, false,
     R"~~(a1None|ab|[1, 2]|abab)~~"},
    {R"~~({{ [1, 'a', none, true, False] }}|{{ {'a': 1, 'b': 'x'} }})~~",
     0, 0, false, false,
     R"~~([1, 'a', None, True, False]|{'a': 1, 'b': 'x'})~~"},
    {R"~~({{ True }}{{ none }}{{ undefined_name }})~~",
     0, 0, false, false,
     R"~~(TrueNone)~~"},
    {R"~~({{ 1 < 2 < 3 }}{{ 1 < 2 > 3 }}{{ 1 == 1.0 }}{{ 'a' != 'b' }})~~",
     0, 0, false, false,
     R"~~(TrueFalseTrueTrue)~~"},
    {R"~~({{ 'a' in 'cat' }}{{ 3 not in [1, 2] }}{{ 'k' in {'k': 1} }}{{ 1 in [1] }})~~",
     0, 0, false, false,
     R"~~(TrueTrueTrueTrue)~~"},
    {R"~~({{ 0 or 'x' }}|{{ 'a' and 'b' }}|{{ not none }}|{{ not 'a' }})~~",
     0, 0, false, false,
     R"~~(x|b|True|False)~~"},
    {R"~~({{ 'y' if 1 else 'n' }}|{{ 'y' if 0 else 'n' }}|{{ 'y' if 0 }}|)~~",
     0, 0, false, false,
     R"~~(y|n||)~~"},
    {R"~~({{ (true) != (1 % 2 == 0) }})~~",
     0, 0, false, false,
     R"~~(True)~~"},
    {R"~~({{ [1, 2, 3][::-1] }}|{{ 'hello'[1:3] }}|{{ [1, 2, 3][-1] }}|{{ [1, 2, 3, 4, 5][1::2] }}|{{ 'abc'[::-1] }}|{{ [1,2,3][-2:] }}|{{ [1,2,3][:-5] }}|{{ [1,2,3,4][3:0:-1] }})~~",
     0, 0, false, false,
     R"~~([3, 2, 1]|el|3|[2, 4]|cba|[2, 3]|[]|[4, 3, 2])~~"},
    {R"~~({% set d = {'a': {'b': 'c'}} %}{{ d.a.b }}{{ d['a']['b'] }}[{{ d.zz }}])~~",
     0, 0, false, false,
     R"~~(cc[])~~"},
    {R"~~({% set d = {} %}{{ d.zz.yy }})~~",
     0, 0, false, true,
     R"~~('dict object' has no attribute 'zz')~~"},
    {R"~~({{ nope + 1 }})~~",
     0, 0, false, true,
     R"~~('nope' is undefined)~~"},
    {R"~~({{ nope.attr }})~~",
     0, 0, false, true,
     R"~~('nope' is undefined)~~"},
    {R"~~({{ nope | length }}{% for x in nope %}x{% endfor %}{{ nope ~ 'a' }}{{ nope is defined }})~~",
     0, 0, false, false,
     R"~~(0aFalse)~~"},
    {R"~~({{ 'a' + 1 }})~~",
     0, 0, false, true,
     R"~~(can only concatenate str (not "int") to str)~~"},
    {R"~~({{ 'a' + none }})~~",
     0, 0, false, true,
     R"~~(can only concatenate str (not "NoneType") to str)~~"},
    {R"~~({{ 1 / 0 }})~~",
     0, 0, false, true,
     R"~~(division by zero)~~"},
    {R"~~({{ 1 // 0 }})~~",
     0, 0, false, true,
     R"~~(integer division or modulo by zero)~~"},
    {R"~~({{ [1][3].x }})~~",
     0, 0, false, true,
     R"~~(list object has no element 3)~~"},
    {R"~~({{ none.x }})~~",
     0, 0, false, false,
     R"~~()~~"},
    {R"~~({{ none.x.y }})~~",
     0, 0, false, true,
     R"~~('None' has no attribute 'x')~~"},
    {R"~~({% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %})~~",
     0, 0, false, false,
     R"~~(103TrueFalse3;212FalseFalse3;321FalseTrue3;)~~"},
    {R"~~({% for x in [] %}a{% else %}empty{% endfor %})~~",
     0, 0, false, false,
     R"~~(empty)~~"},
    {R"~~({% for x in range(10) if x is odd %}{{ x }}{{ ',' if not loop.last }}{% endfor %})~~",
     0, 0, false, false,
     R"~~(1,3,5,7,9)~~"},
    {R"~~({% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %})~~",
     0, 0, false, false,
     R"~~(0134)~~"},
    {R"~~({% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }} {% endfor %})~~",
     0, 0, false, false,
     R"~~(a=1 b=2 )~~"},
    {R"~~({% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %})~~",
     0, 0, false, false,
     R"~~(ab)~~"},
    {R"~~({% for x in [1, 2, 3] %}{{ loop.cycle('o', 'e') }}{% endfor %})~~",
     0, 0, false, false,
     R"~~(oeo)~~"},
    {R"~~({% for x in [1, 2] %}{% for y in 'ab' %}{{ x }}{{ y }}{{ loop.index }} {% endfor %}{% endfor %})~~",
     0, 0, false, false,
     R"~~(1a1 1b2 2a1 2b2 )~~"},
    {R"~~({% for x in none %}{% endfor %})~~",
     0, 0, false, true,
     R"~~('NoneType' object is not iterable)~~"},
    {R"~~({% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }},{% endfor %})~~",
     0, 0, false, false,
     R"~~(-2,1-3,2-,)~~"},
    {R"~~({% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }})~~",
     0, 0, false, false,
     R"~~(21)~~"},
    {R"~~({% if true %}{% set x = 3 %}{% endif %}{{ x }})~~",
     0, 0, false, false,
     R"~~(3)~~"},
    {R"~~({% set ns = namespace(x=1, found=false) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% set ns.found = true %}{% endfor %}{{ ns.x }}{{ ns.found }})~~",
     0, 0, false, false,
     R"~~(4True)~~"},
    {R"~~({% set s %}a{{ 1 }}b{% endset %}[{{ s }}])~~",
     0, 0, false, false,
     R"~~([a1b])~~"},
    {R"~~({% set a, b = [1, 2] %}{{ b }}{{ a }})~~",
     0, 0, false, false,
     R"~~(21)~~"},
    {R"~~({% set d = {} %}{% set d.x = 1 %})~~",
     0, 0, false, true,
     R"~~(cannot assign attribute on non-namespace object)~~"},
    {R"~~({% macro greet(name, greeting='Hi') %}{{ greeting }} {{ name }}{% endmacro %}{{ greet('Bob') }}|{{ greet('Al', greeting='Yo') }})~~",
     0, 0, false, false,
     R"~~(Hi Bob|Yo Al)~~"},
    {R"~~({% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}x{% endcall %})~~",
     0, 0, false, false,
     R"~~(<x>)~~"},
    {R"~~({% macro m(a) %}{{ a }}{{ varargs | length }}{% endmacro %}{{ m(1, 2, 3) }})~~",
     0, 0, false, false,
     R"~~(12)~~"},
    {R"~~({{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}{{ {} is mapping }}{{ [] is iterable }}{{ [] is sequence }}{{ true is boolean }}{{ true is true }}{{ false is false }}{{ 3 is odd }}{{ 4 is even }}{{ 1 is not string }}{{ 1.5 is number }})~~",
     0, 0, false, false,
     R"~~(FalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue)~~"},
    {R"~~({{ 1 is boolean }}{{ 1 is true }}{{ 'a' is mapping }}{{ none is string }}{{ 6 is divisibleby 3 }}{{ 2 is equalto 2 }}{{ 'x' is in 'xy' }})~~",
     0, 0, false, false,
     R"~~(FalseFalseFalseFalseTrueTrueTrue)~~"},
    {R"~~({{ 1 is frobbed }})~~",
     0, 0, false, true,
     R"~~(No test named 'frobbed'.)~~"},
    {R"~~({{ '  a b  ' | trim }}|{{ [1, 2, 3] | length }}|{{ 'héllo' | length }}|{{ [1, 2, 3] | first }}{{ [1, 2, 3] | last }}|{{ 'ab' | upper }}|{{ 'AB' | lower }})~~",
     0, 0, false, false,
     R"~~(a b|3|5|13|AB|ab)~~"},
    {R"~~({{ 'hello world' | title }}|{{ 'hELLO' | capitalize }}|{{ 'aXa' | replace('a', 'b') }}|{{ [1, 2] | join(', ') }}|{{ ['a', 'b'] | join }})~~",
     0, 0, false, false,
     R"~~(Hello World|Hello|bXb|1, 2|ab)~~"},
    {R"~~({{ x | default('d') }}|{{ '' | default('d') }}|{{ '' | default('d', true) }}|{{ x | d('e') }})~~",
     0, 0, false, false,
     R"~~(d||d|e)~~"},
    {R"~~({{ 42 | string }}|{{ '42' | int + 1 }}|{{ '3.5' | float }}|{{ 'x' | int }}|{{ 3.9 | int }}|{{ 'ab' | list }})~~",
     0, 0, false, false,
     R"~~(42|43|3.5|0|3|['a', 'b'])~~"},
    {R"~~({% for k, v in {'b': 1, 'a': 2} | dictsort %}{{ k }}{{ v }}{% endfor %})~~",
     0, 0, false, false,
     R"~~(a2b1)~~"},
    {R"~~({% for k, v in {'b': 1} | items %}{{ k }}{{ v }}{% endfor %})~~",
     0, 0, false, false,
     R"~~(b1)~~"},
    {R"~~({{ '<a href="x">' | escape }}|{{ '<b>' | safe }})~~",
     0, 0, false, false,
     R"~~(&lt;a href=&#34;x&#34;&gt;|<b>)~~"},
    {R"~~({{ [3, 1, 2] | sort | list }}|{{ [1, 2, 1] | unique | list }}|{{ [1, 2] | reverse | list }}|{{ [1, 2, 3] | sum }}|{{ [4, 2, 8] | max }}|{{ -3 | abs }})~~",
     0, 0, false, false,
     R"~~([1, 2, 3]|[1, 2]|[2, 1]|6|8|3)~~"},
    {R"~~({{ 'a
b' | indent(2) }}|{{ 'a
b' | indent(2, true) }}|{{ 'a

b' | indent }})~~",
     0, 0, false, false,
     R"~~(a
  b|  a
  b|a

    b)~~"},
    {R"~~({{ 1 | frob }})~~",
     0, 0, false, true,
     R"~~(No filter named 'frob'.)~~"},
    {R"~~({{ {'a': [1, 2.5, 'é', none, true], 'b': 'q"\n'} | tojson }})~~",
     0, 0, false, false,
     R"~~({"a": [1, 2.5, "é", null, true], "b": "q\"\n"})~~"},
    {R"~~({{ {'a': [1, 2], 'b': {}} | tojson(indent=2) }})~~",
     0, 0, false, false,
     R"~~({
  "a": [
    1,
    2
  ],
  "b": {}
})~~"},
    {R"~~({{ '<x>' | tojson }})~~",
     0, 0, false, false,
     R"~~("<x>")~~"},
    {R"~~({{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }})~~",
     0, 0, false, false,
     R"~~({"a": 2, "b": 1})~~"},
    {R"~~({{ '\x01\x7f' | tojson }})~~",
     0, 0, false, false,
     R"~~("\u0001")~~"},
    {R"~~({{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  x'.lstrip() }}|{{ 'x  '.rstrip() }}|{{ '\n\nx'.lstrip('\n') }})~~",
     0, 0, false, false,
     R"~~(x|a|x|x|x)~~"},
    {R"~~({{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('bc') }}{{ 'abc'.startswith('b') }}{{ 'abc'.startswith(('x','a')) }})~~",
     0, 0, false, false,
     R"~~(TrueTrueFalseTrue)~~"},
    {R"~~({{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'x</think>y'.split('</think>')[-1] }})~~",
     0, 0, false, false,
     R"~~(['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|y)~~"},
    {R"~~({{ 'aaa'.replace('a', 'b', 2) }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ 'hello there'.title() }})~~",
     0, 0, false, false,
     R"~~(bba|ABab|Hello There)~~"},
    {R"~~({% set d = {'a': 1} %}{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 5) }}{{ d.keys() | list }}{{ d.values() | list }})~~",
     0, 0, false, false,
     R"~~(1None5['a'][1])~~"},
    {R"~~({% set l = [] %}{{ l.append(1) }})~~",
     0, 0, false, true,
     R"~~(access to attribute 'append' of 'list' object is unsafe.)~~"},
    {R"~~({{ raise_exception('Bad role: ' ~ 'x') }})~~",
     0, 0, false, true,
     R"~~(Bad role: x)~~"},
    {R"~~({{ messages[0].content }}{{ messages | length }}{{ messages[-1]['role'] }})~~",
     0, 0, false, false,
     R"~~(Hi2assistant)~~"},
    {R"~~({{ messages[5].role }})~~",
     0, 0, false, true,
     R"~~(list object has no element 5)~~"},
    {R"~~({% for m in messages %}{{ m.tool_calls is defined }}{{ m.tool_calls }}{{ not m.tool_calls }}{% endfor %})~~",
     0, 0, false, false,
     R"~~(FalseTrueTrue[{'function': {'name': 'f', 'arguments': {'a': 1}}}]False)~~"},
    {R"~~({{ tools | tojson }}{% for t in tools %}{{ t.function.name }}{% endfor %})~~",
     0, 0, false, false,
     R"~~([{"type": "function", "function": {"name": "get", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]get)~~"},
    {R"~~({{ 'x' if tools else 'y' }}{{ tools is none }})~~",
     0, 0, false, false,
     R"~~(xFalse)~~"},
    {R"~~({{ enable_thinking is defined and enable_thinking is false }})~~",
     0, 0, false, false,
     R"~~(True)~~"},
    {R"~~({{ [1,2,3] | map('string') | join('-') }})~~",
     0, 0, false, false,
     R"~~(1-2-3)~~"},
    {R"~~({{ messages | selectattr('role', 'eq', 'user') | map(attribute='content') | list }})~~",
     0, 0, false, false,
     R"~~(['Hi'])~~"},
    {R"~~({{ messages | rejectattr('role', 'equalto', 'user') | list | length }})~~",
     0, 0, false, false,
     R"~~(1)~~"},
    {R"~~({{ range(3) | list }}{{ range(1, 7, 2) | list }})~~",
     0, 0, false, false,
     R"~~([0, 1, 2][1, 3, 5])~~"},
    {R"~~({% set x = namespace(items=[]) %}{{ x.items }})~~",
     0, 0, false, false,
     R"~~([])~~"},
    {R"~~({{ 'abc' | first }}{{ 'abc' | last }})~~",
     0, 0, false, false,
     R"~~(ac)~~"},
    {R"~~({{ [] | first }})~~",
     0, 0, false, false,
     R"~~()~~"},
    {R"~~({{ [] | first | default('z') }})~~",
     0, 0, false, false,
     R"~~(z)~~"},
    {R"~~({{ 3 * 'ab' }}{{ [0] * 2 }})~~",
     0, 0, false, false,
     R"~~(ababab[0, 0])~~"},
    {R"~~({{ -(3) }}{{ - 2 ** 2 }}{{ (2 ** 3) ** 2 }})~~",
     0, 0, false, false,
     R"~~(-3464)~~"},
    {R"~~({{ 5 - 2 - 1 }}{{ 2 * 3 % 4 }})~~",
     0, 0, false, false,
     R"~~(22)~~"},
    {R"~~({{ 1 + 1 ~ 2 }})~~",
     0, 0, false, true,
     R"~~(unsupported operand type(s) for +: 'int' and 'str')~~"},
    {R"~~({{ 'a' < 'b' }}{{ [1,2] < [1,3] }})~~",
     0, 0, false, false,
     R"~~(TrueTrue)~~"},
    {R"~~({{ 1 < 'a' }})~~",
     0, 0, false, true,
     R"~~('<' not supported between instances of 'int' and 'str')~~"},
    {R"~~({{ 'é'.upper() }}{{ 'É' | lower }})~~",
     0, 0, false, false,
     R"~~(Éé)~~"},
    {R"~~({% for i in range(3) %}{% set i2 = i * 2 %}{{ i2 }}{% endfor %}{{ i2 }})~~",
     0, 0, false, false,
     R"~~(024)~~"},
    {R"~~({% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(3) }})~~",
     0, 0, false, false,
     R"~~(321)~~"},
    {R"~~({% filter upper %}abc{{ 'd' }}{% endfilter %})~~",
     0, 0, false, false,
     R"~~(ABCD)~~"},
    {R"~~({% set y | upper %}abc{% endset %}{{ y }})~~",
     0, 0, false, false,
     R"~~(ABC)~~"},
    {R"~~({{ 'a' ~ {'k': none} }})~~",
     0, 0, false, false,
     R"~~(a{'k': None})~~"},
    {R"~~({{ 1.5 | round }}{{ 2.5 | round }}{{ 3.14159 | round(2) }})~~",
     0, 0, false, false,
     R"~~(2.02.03.14)~~"},
    {R"~~({{ 'x'.join(['a','b']) }})~~",
     0, 0, false, false,
     R"~~(axb)~~"},
    {R"~~({{ 'a b'.split(' ')|length }})~~",
     0, 0, false, false,
     R"~~(2)~~"},
    {R"~~({{ "a" "b" }})~~",
     0, 0, false, false,
     R"~~(ab)~~"},
    {R"~~({{ 10 // 3 }}{{ 10 % 3 }}{{ 10.0 // 3 }}{{ -10 % 3.0 }})~~",
     0, 0, false, false,
     R"~~(313.02.0)~~"},
    {R"~~({{ 2 ** -1 }})~~",
     0, 0, false, false,
     R"~~(0.5)~~"},
    {R"~~({{ 7 is divisibleby(7) }})~~",
     0, 0, false, false,
     R"~~(True)~~"},
    {R"~~({{ {'a':1} | length }}{{ {'a': 1} == {'a': 1} }}{{ [1, 2] == [1, 2] }})~~",
     0, 0, false, false,
     R"~~(1TrueTrue)~~"},
    {R"~~({{ true + 1 }}{{ true == 1 }})~~",
     0, 0, false, false,
     R"~~(2True)~~"},
    {R"~~({% if messages %}yes{% endif %}{% if [] %}no{% endif %}{% if {} %}no{% endif %}{% if 0.0 %}no{% endif %})~~",
     0, 0, false, false,
     R"~~(yes)~~"},
    {R"~~({% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %})~~",
     0, 0, false, false,
     R"~~(37)~~"},
    {R"~~({%- for x in [1,2] -%}
  {{ x }}
{%- endfor -%}
)~~",
     0, 0, false, false,
     R"~~(12)~~"},
    {R"~~({% if 1 %}a{% elif 2 %}b{% else %}c{% endif %}{% if 0 %}a{% elif 2 %}b{% else %}c{% endif %}{% if 0 %}a{% elif 0 %}b{% else %}c{% endif %})~~",
     0, 0, false, false,
     R"~~(abc)~~"},
    {R"~~({{ foo(1) }})~~",
     0, 0, false, true,
     R"~~('foo' is undefined)~~"},
    {R"~~({{ 'abc'(1) }})~~",
     0, 0, false, true,
     R"~~('str' object is not callable)~~"},
    {R"~~({{ x.y }})~~",
     0, 0, false, true,
     R"~~('x' is undefined)~~"},
    {R"~~({{ [1,2,3] | join(attribute='x') }})~~",
     0, 0, false, false,
     R"~~()~~"},
    {R"~~({{ 1 if 2 if 3 else 4 }})~~",
     0, 0, false, false,
     R"~~(1)~~"},
    {R"~~({{ 'x' is string and 'y' }}{{ none is not none }})~~",
     0, 0, false, false,
     R"~~(yFalse)~~"},
    {R"~~({{ not 1 == 2 }}{{ not 1 in [1] }})~~",
     0, 0, false, false,
     R"~~(TrueFalse)~~"},
    {R"~~({{ tools[0]['function']['parameters'] | tojson(indent=4) }})~~",
     0, 0, false, false,
     R"~~({
    "type": "object",
    "properties": {
        "q": {
            "type": "string"
        }
    }
})~~"},
    {R"~~({{ messages[0] }})~~",
     0, 0, false, false,
     R"~~({'role': 'user', 'content': 'Hi'})~~"},
    {R"~~({{ 'é'.upper() }}{{ 'É' | lower }})~~",
     0, 0, false, false,
     R"~~(Éé)~~"},
    {R"~~({{ 'straße'.upper() }}|{{ 'ÀÉÎÕÜ'.lower() }}|{{ 'àéîõüÿ'.upper() }})~~",
     0, 0, false, false,
     R"~~(STRASSE|àéîõü|ÀÉÎÕÜŸ)~~"},
    {R"~~({{ 'Γειά σου Κόσμε'.upper() }}|{{ 'ΣΊΣΥΦΟΣ'.lower() }})~~",
     0, 0, false, false,
     R"~~(ΓΕΙΆ ΣΟΥ ΚΌΣΜΕ|σίσυφος)~~"},
    {R"~~({{ 'привет мир'.upper() }}|{{ 'ПРИВЕТ'.lower() }}|{{ 'ёж'.upper() }})~~",
     0, 0, false, false,
     R"~~(ПРИВЕТ МИР|привет|ЁЖ)~~"},
    {R"~~({{ 'ĀāĹĺŹźŁł'.upper() }}{{ 'ĀāĹĺŹźŁł'.lower() }})~~",
     0, 0, false, false,
     R"~~(ĀĀĹĹŹŹŁŁāāĺĺźźłł)~~"},
    {R"~~({{ 'héllo wörld'.title() }}|{{ 'they\'re ok'.title() }}|{{ 'ÉCOLE'.capitalize() }})~~",
     0, 0, false, false,
     R"~~(Héllo Wörld|They'Re Ok|École)~~"},
    {R"~~({{ 'héllo wörld-ça' | title }}|{{ 'éCOLE' | capitalize }}|{{ '中文abc' | upper }})~~",
     0, 0, false, false,
     R"~~(Héllo Wörld-Ça|École|中文ABC)~~"},
    {R"~~({{ 'ＡＢＣ'.lower() }}{{ 'ａｂｃ'.upper() }})~~",
     0, 0, false, false,
     R"~~(ａｂｃＡＢＣ)~~"},
    {R"~~({{ 'Ձ'.lower() }}{{ 'ձ'.upper() }})~~",
     0, 0, false, false,
     R"~~(ձՁ)~~"},
    {R"~~({{ 'é' is lower }}{{ 'É' is upper }})~~",
     0, 0, false, false,
     R"~~(TrueTrue)~~"},
    {R"~~({{ {'a': 'é😀', 'b': [1, {}], 'c': []} | tojson(ensure_ascii=true) }})~~",
     1, 1, false, false,
     R"~~({"a": "\u00e9\ud83d\ude00", "b": [1, {}], "c": []})~~"},
    {R"~~({{ {'a': 1, 'b': [1, 2]} | tojson(indent=0) }})~~",
     1, 1, false, false,
     R"~~({
"a": 1,
"b": [
1,
2
]
})~~"},
    {R"~~({{ {'a': 1, 'b': [1, 2]} | tojson(separators=(',', ':')) }})~~",
     1, 1, false, false,
     R"~~({"a":1,"b":[1,2]})~~"},
    {R"~~({{ {'a': 1, 'b': [1, 2]} | tojson(indent='\t') }})~~",
     1, 1, false, false,
     R"~~({
	"a": 1,
	"b": [
		1,
		2
	]
})~~"},
    {R"~~({{ {'z': 1, 'a': {'y': 2, 'b': 3}} | tojson(sort_keys=true, indent=2) }})~~",
     1, 1, false, false,
     R"~~({
  "a": {
    "b": 3,
    "y": 2
  },
  "z": 1
})~~"},
    {R"~~({{ [1.0, 1e100, -0.0, 3.14] | tojson }})~~",
     1, 1, false, false,
     R"~~([1.0, 1e+100, -0.0, 3.14])~~"},
    {R"~~({{ tools | tojson(indent=4) }})~~",
     1, 1, false, false,
     R"~~([
    {
        "type": "function",
        "function": {
            "name": "get",
            "parameters": {
                "type": "object",
                "properties": {
                    "q": {
                        "type": "string"
                    }
                }
            }
        }
    }
])~~"},
    {R"~~({{ x | tojson }})~~",
     1, 1, false, true,
     R"~~(Object of type Undefined is not JSON serializable)~~"},
    {R"~~({{ 'a\u2028b\x00' | tojson }})~~",
     1, 1, false, false,
     R"~~("a b\u0000")~~"},
    {R"~~({{ [none, true, 'x'] | tojson(true) }})~~",
     1, 1, false, false,
     R"~~([null, true, "x"])~~"},
    {R"~~({%- macro json_to_python_type(json_spec) %}
{%- set basic_type_map = {
    "string": "str",
    "number": "float",
    "integer": "int",
    "boolean": "bool"
} %}

{%- if basic_type_map[json_spec.type] is defined %}
    {{- basic_type_map[json_spec.type] }}
{%- elif json_spec.type == "array" %}
    {{- "list[" +  json_to_python_type(json_spec['items']) + "]"}}
{%- elif json_spec.type == "object" %}
    {%- if json_spec.additionalProperties is defined %}
        {{- "dict[str, " + json_to_python_type(json_spec.additionalProperties) + ']'}}
    {%- else %}
        {{- "dict" }}
    {%- endif %}
{%- elif json_spec.type is iterable and json_spec.type is not string %}
    {{- "Union[" }}
    {%- for t in json_spec.type %}
      {{- json_to_python_type({"type": t}) }}
      {%- if not loop.last %}
        {{- "," }}
    {%- endif %}
    {%- endfor %}
    {{- "]" }}
{%- else %}
    {{- "Any" }}
{%- endif %}
{%- endmacro %}
{%- for tool in tools %}
{%- for param_name, param_fields in tool.function.parameters.properties|items %}
{{ param_name }}({{ json_to_python_type(param_fields) }}): {{ param_fields.description | default('none') }}
{%- endfor %}
{% endfor %}
)~~",
     2, 2, false, false,
     R"~~(q(str): queryn(Union[int,bool]): nonetags(list[str]): nonemeta(dict[str, float]): none)~~"},
    {R"~~({%- macro json_to_python_type(json_spec) %}
{%- set basic_type_map = {
    "string": "str",
    "number": "float",
    "integer": "int",
    "boolean": "bool"
} %}

{%- if basic_type_map[json_spec.type] is defined %}
    {{- basic_type_map[json_spec.type] }}
{%- elif json_spec.type == "array" %}
    {{- "list[" +  json_to_python_type(json_spec['items']) + "]"}}
{%- elif json_spec.type == "object" %}
    {%- if json_spec.additionalProperties is defined %}
        {{- "dict[str, " + json_to_python_type(json_spec.additionalProperties) + ']'}}
    {%- else %}
        {{- "dict" }}
    {%- endif %}
{%- elif json_spec.type is iterable and json_spec.type is not string %}
    {{- "Union[" }}
    {%- for t in json_spec.type %}
      {{- json_to_python_type({"type": t}) }}
      {%- if not loop.last %}
        {{- "," }}
    {%- endif %}
    {%- endfor %}
    {{- "]" }}
{%- else %}
    {{- "Any" }}
{%- endif %}
{%- endmacro %}
{%- for tool in tools %}
{%- for param_name, param_fields in tool.function.parameters.properties|items %}
{{ param_name }}({{ json_to_python_type(param_fields) }}): {{ param_fields.description | default('none') }}
{%- endfor %}
{% endfor %}
)~~",
     2, 2, true, false,
     R"~~(q(str): queryn(Union[int,bool]): nonetags(list[str]): nonemeta(dict[str, float]): none)~~"},
    {R"~~({{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- if tools_in_user_message and not tools is none %}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)~~",
     2, 2, false, false,
     R"~~(<s><|start_header_id|>system<|end_header_id|>

Environment: ipython
Tools: brave_search, wolfram

Cutting Knowledge Date: December 2023
Today Date: 26 Jul 2024

Sys prompt<|eot_id|><|start_header_id|>user<|end_header_id|>

{
    "type": "function",
    "function": {
        "name": "get",
        "description": "Get it",
        "parameters": {
            "type": "object",
            "properties": {
                "q": {
                    "type": "string",
                    "description": "query"
                },
                "n": {
                    "type": [
                        "integer",
                        "boolean"
                    ]
                },
                "tags": {
                    "type": "array",
                    "items": {
                        "type": "string"
                    }
                },
                "meta": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "number"
                    }
                }
            }
        }
    }
}

Hello there<|eot_id|><|start_header_id|>assistant<|end_header_id|>

{"name": "get", "parameters": {"q": "x", "n": 2}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>

{"result": [1, 2]}<|eot_id|><|start_header_id|>assistant<|end_header_id|>

Done.<|eot_id|>)~~"},
    {R"~~({{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- if tools_in_user_message and not tools is none %}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)~~",
     2, 2, true, false,
     R"~~(<s><|start_header_id|>system<|end_header_id|>

Environment: ipython
Tools: brave_search, wolfram

Cutting Knowledge Date: December 2023
Today Date: 26 Jul 2024

Sys prompt<|eot_id|><|start_header_id|>user<|end_header_id|>

{
    "type": "function",
    "function": {
        "name": "get",
        "description": "Get it",
        "parameters": {
            "type": "object",
            "properties": {
                "q": {
                    "type": "string",
                    "description": "query"
                },
                "n": {
                    "type": [
                        "integer",
                        "boolean"
                    ]
                },
                "tags": {
                    "type": "array",
                    "items": {
                        "type": "string"
                    }
                },
                "meta": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "number"
                    }
                }
            }
        }
    }
}

Hello there<|eot_id|><|start_header_id|>assistant<|end_header_id|>

{"name": "get", "parameters": {"q": "x", "n": 2}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>

{"result": [1, 2]}<|eot_id|><|start_header_id|>assistant<|end_header_id|>

Done.<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)~~"},
    {R"~~({% for m in messages %}
    {% if m.role == 'user' %}
        U: {{ m.content }}
    {% else %}
        A: {{ m.content }}
    {% endif %}
{% endfor %}
)~~",
     2, 2, false, false,
     R"~~(        A:  Sys prompt  
        U: Hello there
        A: 
        A: {'result': [1, 2]}
        A: Done.
)~~"},
    {R"~~({% for m in messages %}
    {% if m.role == 'user' %}
        U: {{ m.content }}
    {% else %}
        A: {{ m.content }}
    {% endif %}
{% endfor %}
)~~",
     2, 2, true, false,
     R"~~(        A:  Sys prompt  
        U: Hello there
        A: 
        A: {'result': [1, 2]}
        A: Done.
)~~"},
    {R"~~({%- set ns = namespace(out=[], i=0) -%}
{%- for m in messages if m.role != 'system' -%}
  {%- set ns.out = ns.out + [loop.index ~ ':' ~ m.role] -%}
  {%- set ns.i = ns.i + 1 -%}
{%- endfor -%}
{{ ns.out | join(' ') }} {{ ns.i }})~~",
     2, 2, false, false,
     R"~~(1:user 2:assistant 3:tool 4:assistant 4)~~"},
    {R"~~({%- set ns = namespace(out=[], i=0) -%}
{%- for m in messages if m.role != 'system' -%}
  {%- set ns.out = ns.out + [loop.index ~ ':' ~ m.role] -%}
  {%- set ns.i = ns.i + 1 -%}
{%- endfor -%}
{{ ns.out | join(' ') }} {{ ns.i }})~~",
     2, 2, true, false,
     R"~~(1:user 2:assistant 3:tool 4:assistant 4)~~"},
    {R"~~({{ messages | map(attribute='role') | unique | list }} {{ messages | selectattr('tool_calls', 'defined') | list | length }}
{{ (messages | last).content }} {{ messages[1:] | map(attribute='content') | join('+') }})~~",
     2, 2, false, false,
     R"~~(['system', 'user', 'assistant', 'tool'] 1
Done. Hello there++{'result': [1, 2]}+Done.)~~"},
    {R"~~({{ messages | map(attribute='role') | unique | list }} {{ messages | selectattr('tool_calls', 'defined') | list | length }}
{{ (messages | last).content }} {{ messages[1:] | map(attribute='content') | join('+') }})~~",
     2, 2, true, false,
     R"~~(['system', 'user', 'assistant', 'tool'] 1
Done. Hello there++{'result': [1, 2]}+Done.)~~"},
    {R"~~({%- for m in messages %}{% if loop.index is divisibleby 2 %}{% continue %}{% endif %}{{ m.role[0] | upper }}{{ m.content[:3] }}{% endfor %})~~",
     2, 2, false, false,
     R"~~(S SyAADon)~~"},
    {R"~~({%- for m in messages %}{% if loop.index is divisibleby 2 %}{% continue %}{% endif %}{{ m.role[0] | upper }}{{ m.content[:3] }}{% endfor %})~~",
     2, 2, true, false,
     R"~~(S SyAADon)~~"},
};

TEST(ChatJinja2Vectors, MatchPythonJinja2) {
  int checked = 0;
  for (const Vector& v : kVectors) {
    SCOPED_TRACE(v.source);
    auto messages = nlohmann::ordered_json::parse(kMessages[v.messages]);
    auto vars = nlohmann::ordered_json::parse(kVars[v.vars]);
    try {
      std::string out = ChatTemplate(v.source).render_ordered(messages, v.add_generation_prompt, "<s>", "</s>", vars);
      EXPECT_FALSE(v.is_error) << "rendered " << out << " instead of failing with " << v.expected;
      if (!v.is_error) {
        EXPECT_EQ(out, v.expected);
      }
    } catch (const ChatTemplateError& e) {
      EXPECT_TRUE(v.is_error) << "failed with " << e.what();
      if (v.is_error) {
        EXPECT_EQ(std::string(e.what()), v.expected);
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 150);
}

}  // namespace
}  // namespace pagoda
