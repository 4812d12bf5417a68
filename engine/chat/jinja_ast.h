// Jinja2 syntax tree: expressions and statements of the template subset
// chat templates use (Jinja2 template designer documentation, "Expressions"
// and "List of Control Structures").
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/chat/jinja_value.h"

namespace pagoda::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,   // literal
    Name,      // name
    GetAttr,   // children[0].name
    GetItem,   // children[0][children[1]]
    Slice,     // children[0][children[1]:children[2]:children[3]] (null = omitted)
    Call,      // children[0](children[1..], kwargs)
    Filter,    // children[0] | name(children[1..], kwargs); children[0] null in filter blocks
    Test,      // children[0] is [not] name(children[1..])
    Unary,     // op children[0]; op in {not, -, +}
    Binary,    // children[0] op children[1]; op in {+ - * / // % ** ~ and or}
    Compare,   // children[0] ops[0] children[1] ops[1] ... (Python chaining)
    CondExpr,  // children[1] if children[0] else children[2] (null = undefined)
    ListLit,   // [children...] (also tuples)
    DictLit,   // {children[0]: children[1], ...}
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;  // Name, GetAttr, Filter, Test, Unary/Binary operator
  bool negated = false;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // Compare
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    Text,       // text
    Output,     // {{ expr }}
    If,         // branches (cond, body)...; else_body
    For,        // for targets in expr [if cond] ... [else] endfor
    Set,        // set targets = expr   /   set target.attr = expr
    SetBlock,   // set target %}body{% endset (optional filter)
    Macro,      // macro name(params) body endmacro
    CallBlock,  // call[(params)] expr body endcall
    FilterBlock,
    With,  // with [targets = expr, ...] body endwith (a scope of its own)
    Break,
    Continue,
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;                 // Output value, For iterable, Set value, CallBlock call, filter
  ExprPtr cond;                 // For's filter condition
  std::vector<std::string> targets;  // For/Set names; Set with attr: {ns, attr} and is_attr
  bool is_attr = false;
  std::vector<std::pair<ExprPtr, Body>> branches;  // If
  Body body, else_body;
  std::string name;                                        // Macro name
  std::vector<std::pair<std::string, ExprPtr>> params;     // Macro / caller params
  // With: each target (one name, or names unpacked from the value) = value.
  std::vector<std::pair<std::vector<std::string>, ExprPtr>> bindings;
};

}  // namespace pagoda::jinja
