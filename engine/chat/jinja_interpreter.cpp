// Jinja2 interpreter (see jinja_interpreter.h).
#include "engine/chat/jinja_interpreter.h"

#include "engine/chat/chat_template.h"
#include "engine/chat/jinja_budget.h"
#include "engine/chat/jinja_builtins.h"

namespace pagoda::jinja {

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.items();
    case Value::Kind::Dict: {
      List keys;
      for (const auto& [k, _] : v.entries()) keys.emplace_back(k);
      return keys;
    }
    case Value::Kind::String: {
      List chars;
      for (auto& c : utf8_chars(v.str())) chars.emplace_back(c);
      return chars;
    }
    default: throw ChatTemplateError("'" + v.type_name() + "' object is not iterable");
  }
}

std::string Interpreter::render(const Body& body, Dict globals) {
  steps_ = 0;
  RenderScope scope(kMaxRenderTime);  // also bounds what expressions build (jinja_budget.h)
  scope_ = &scope;
  auto root = std::make_shared<Frame>();
  root->vars = builtin_globals();
  for (auto& [k, v] : globals) root->vars.emplace_back(std::move(k), std::move(v));
  auto top = std::make_shared<Frame>();
  top->parent = root;
  std::string out;
  exec_body(body, out, top);
  check_budget(out);  // the last statement's output too
  return out;
}

Value Interpreter::lookup(const std::string& name, const FramePtr& frame) const {
  for (Frame* f = frame.get(); f; f = f->parent.get()) {
    tick(1 + f->vars.size() / 64);  // a scan: a frame may hold big chat_template_kwargs
    // Later bindings shadow earlier ones within a frame (globals list).
    for (auto it = f->vars.rbegin(); it != f->vars.rend(); ++it)
      if (it->first == name) return it->second;
  }
  return Value::undefined("'" + name + "' is undefined");
}

static void bind(Frame& f, const std::string& name, Value v) {
  for (auto& [k, old] : f.vars)
    if (k == name) {
      old = std::move(v);
      return;
    }
  f.vars.emplace_back(name, std::move(v));
}

// One name takes the value; several unpack it (Python iteration).
static void bind_names(Frame& f, const std::vector<std::string>& names, const Value& v) {
  if (names.size() == 1) {
    bind(f, names[0], v);
    return;
  }
  List items = iterate(v);
  if (items.size() != names.size())
    throw ChatTemplateError("cannot unpack " + std::to_string(items.size()) + " values into " +
                            std::to_string(names.size()) + " names");
  for (size_t i = 0; i < items.size(); ++i) bind(f, names[i], items[i]);
}

Interpreter::Flow Interpreter::exec_body(const Body& body, std::string& out, const FramePtr& frame) {
  for (const auto& s : body) {
    Flow f = exec(*s, out, frame);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

void Interpreter::check_budget(const std::string& out) {
  if (++steps_ > kMaxSteps)
    throw ChatTemplateError("chat template rendering exceeded " + std::to_string(kMaxSteps) +
                            " steps (a runaway loop?)");
  if (out.size() > kMaxOutputBytes)
    throw ChatTemplateError("chat template rendering exceeded " + std::to_string(kMaxOutputBytes >> 20) +
                            " MiB of output");
  if (steps_ % kTimeCheckSteps == 0 && scope_->past_deadline()) time_limit_error();
}

Interpreter::Flow Interpreter::exec(const Stmt& s, std::string& out, const FramePtr& frame) {
  check_budget(out);
  switch (s.kind) {
    case Stmt::Kind::Text: out += s.text; break;
    case Stmt::Kind::Output: out += eval(*s.expr, frame).to_string(); break;
    case Stmt::Kind::If:
      for (const auto& [cond, body] : s.branches)
        if (eval(*cond, frame).truthy()) return exec_body(body, out, frame);
      return exec_body(s.else_body, out, frame);
    case Stmt::Kind::For: exec_for(s, out, frame); break;
    case Stmt::Kind::Set: assign(s, eval(*s.expr, frame), frame); break;
    case Stmt::Kind::SetBlock: {
      std::string text;
      exec_body(s.body, text, frame);
      Value v(text);
      if (s.expr) {
        filter_input_ = v;
        v = eval(*s.expr, frame);
      }
      assign(s, v, frame);
      break;
    }
    case Stmt::Kind::Macro: bind(*frame, s.name, make_macro(s, frame)); break;
    case Stmt::Kind::CallBlock: {
      const Stmt* sp = &s;
      Interpreter* self = this;
      FramePtr def = frame;
      Value caller = Value::callable(
          [self, sp, def](const CallArgs& a) { return self->call_macro(*sp, def, a); }, "caller");
      out += eval_call(*s.expr, frame, &caller).to_string();
      break;
    }
    case Stmt::Kind::FilterBlock: {
      std::string text;
      exec_body(s.body, text, frame);
      filter_input_ = Value(text);
      out += eval(*s.expr, frame).to_string();
      break;
    }
    case Stmt::Kind::With: {
      // Jinja2's With: every value is evaluated in the enclosing scope (a
      // later target does not see an earlier one), then the body runs in a
      // scope of its own: what it sets is gone after endwith.
      List values;
      for (const auto& b : s.bindings) values.push_back(eval(*b.second, frame));
      auto inner = std::make_shared<Frame>();
      inner->parent = frame;
      for (size_t i = 0; i < values.size(); ++i) bind_names(*inner, s.bindings[i].first, values[i]);
      return exec_body(s.body, out, inner);
    }
    case Stmt::Kind::Break: return Flow::Break;
    case Stmt::Kind::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

void Interpreter::assign(const Stmt& s, Value v, const FramePtr& frame) {
  if (s.is_attr) {
    Value ns = lookup(s.targets[0], frame);
    if (!ns.is_namespace()) throw ChatTemplateError("cannot assign attribute on non-namespace object");
    ns.set(s.targets[1], std::move(v));
    return;
  }
  if (s.targets.size() == 1) {
    bind(*frame, s.targets[0], std::move(v));
    return;
  }
  List items = iterate(v);
  if (items.size() != s.targets.size())
    throw ChatTemplateError("cannot unpack " + std::to_string(items.size()) + " values into " +
                            std::to_string(s.targets.size()) + " names");
  for (size_t i = 0; i < items.size(); ++i) bind(*frame, s.targets[i], items[i]);
}

// For loops (template designer documentation, "For"): the loop variable
// describes the filtered sequence; `else` runs when nothing was iterated.
void Interpreter::exec_for(const Stmt& s, std::string& out, const FramePtr& frame) {
  List items = iterate(eval(*s.expr, frame));
  auto bind_targets = [&](Frame& f, const Value& item) {
    if (s.targets.size() == 1) {
      bind(f, s.targets[0], item);
      return;
    }
    List parts = iterate(item);
    if (parts.size() != s.targets.size())
      throw ChatTemplateError("cannot unpack " + std::to_string(parts.size()) + " values into " +
                              std::to_string(s.targets.size()) + " names");
    for (size_t i = 0; i < parts.size(); ++i) bind(f, s.targets[i], parts[i]);
  };
  if (s.cond) {
    List kept;
    for (const Value& item : items) {
      auto f = std::make_shared<Frame>();
      f->parent = frame;
      bind_targets(*f, item);
      if (eval(*s.cond, f).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    auto f = std::make_shared<Frame>();
    f->parent = frame;
    Value loop = Value::dict({
        {"index", Value(i + 1)},
        {"index0", Value(i)},
        {"revindex", Value(n - i)},
        {"revindex0", Value(n - i - 1)},
        {"first", Value(i == 0)},
        {"last", Value(i == n - 1)},
        {"length", Value(n)},
        {"depth", Value(int64_t{1})},
        {"depth0", Value(int64_t{0})},
        {"previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item")},
        {"nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item")},
    });
    loop.set("cycle", Value::callable(
                          [i](const CallArgs& a) {
                            if (a.pos.empty()) throw ChatTemplateError("no items for cycling given");
                            return a.pos[static_cast<size_t>(i) % a.pos.size()];
                          },
                          "cycle"));
    bind(*f, "loop", loop);
    bind_targets(*f, items[static_cast<size_t>(i)]);
    if (exec_body(s.body, out, f) == Flow::Break) break;
  }
  if (n == 0) {
    auto f = std::make_shared<Frame>();
    f->parent = frame;
    exec_body(s.else_body, out, f);
  }
}

Value Interpreter::make_macro(const Stmt& s, const FramePtr& frame) {
  const Stmt* sp = &s;
  Interpreter* self = this;
  std::weak_ptr<Frame> def = frame;  // weak: the macro is stored in that frame
  return Value::callable(
      [self, sp, def](const CallArgs& a) {
        FramePtr f = def.lock();
        if (!f) throw ChatTemplateError("macro '" + sp->name + "' called outside its scope");
        return self->call_macro(*sp, f, a);
      },
      s.name);
}

// Macros (template designer documentation, "Macros"): parameters bind by
// position then keyword, defaults evaluate at call time, extra positional
// arguments go to `varargs`, extra keywords to `kwargs`; the result is the
// rendered body.
Value Interpreter::call_macro(const Stmt& s, const FramePtr& def_frame, const CallArgs& args) {
  struct Depth {
    int& d;
    explicit Depth(int& depth) : d(depth) {
      if (++d > kMaxMacroDepth) throw ChatTemplateError("maximum macro recursion depth exceeded");
    }
    ~Depth() { --d; }
  } depth(macro_depth_);
  auto f = std::make_shared<Frame>();
  f->parent = def_frame;
  List varargs;
  Dict kwargs;
  for (size_t i = 0; i < args.pos.size(); ++i) {
    if (i < s.params.size()) bind(*f, s.params[i].first, args.pos[i]);
    else varargs.push_back(args.pos[i]);
  }
  for (const auto& [k, v] : args.kw) {
    bool is_param = k == "caller";
    for (const auto& p : s.params) is_param = is_param || p.first == k;
    if (is_param) bind(*f, k, v);
    else kwargs.emplace_back(k, v);
  }
  for (size_t i = args.pos.size(); i < s.params.size(); ++i) {
    const auto& [name, def] = s.params[i];
    bool given = false;
    for (const auto& [k, _] : args.kw) given = given || k == name;
    if (!given) bind(*f, name, def ? eval(*def, f) : Value::undefined("parameter '" + name + "' was not provided"));
  }
  bind(*f, "varargs", Value::list(std::move(varargs)));
  bind(*f, "kwargs", Value::dict(std::move(kwargs)));
  std::string out;
  exec_body(s.body, out, f);
  return Value(out);
}

CallArgs Interpreter::eval_args(const Expr& e, size_t first, const FramePtr& frame) {
  CallArgs a;
  for (size_t i = first; i < e.children.size(); ++i) a.pos.push_back(eval(*e.children[i], frame));
  for (const auto& [k, v] : e.kwargs) a.kw.emplace_back(k, eval(*v, frame));
  return a;
}

Value Interpreter::eval_call(const Expr& e, const FramePtr& frame, const Value* caller) {
  Value fn = eval(*e.children[0], frame);
  CallArgs a = eval_args(e, 1, frame);
  if (caller) a.kw.emplace_back("caller", *caller);
  if (fn.is_undefined()) throw ChatTemplateError(fn.undefined_message());
  if (!fn.is_callable()) throw ChatTemplateError("'" + fn.type_name() + "' object is not callable");
  return fn.fn()(a);
}

Value Interpreter::eval(const Expr& e, const FramePtr& frame) {
  switch (e.kind) {
    case Expr::Kind::Literal: return e.literal;
    case Expr::Kind::Name: return lookup(e.name, frame);
    case Expr::Kind::GetAttr: return get_attr(eval(*e.children[0], frame), e.name);
    case Expr::Kind::GetItem: return get_item(eval(*e.children[0], frame), eval(*e.children[1], frame));
    case Expr::Kind::Slice: {
      Value obj = eval(*e.children[0], frame);
      Value parts[3];
      const Value* ptrs[3] = {nullptr, nullptr, nullptr};
      for (int i = 0; i < 3; ++i)
        if (e.children[static_cast<size_t>(i) + 1]) {
          parts[i] = eval(*e.children[static_cast<size_t>(i) + 1], frame);
          ptrs[i] = &parts[i];
        }
      return slice(obj, ptrs[0], ptrs[1], ptrs[2]);
    }
    case Expr::Kind::Call: return eval_call(e, frame, nullptr);
    case Expr::Kind::Filter: {
      Value operand = e.children[0] ? eval(*e.children[0], frame) : filter_input_;
      return apply_filter(e.name, operand, eval_args(e, 1, frame));
    }
    case Expr::Kind::Test: {
      Value operand = eval(*e.children[0], frame);
      return Value(apply_test(e.name, operand, eval_args(e, 1, frame)) != e.negated);
    }
    case Expr::Kind::Unary: {
      Value v = eval(*e.children[0], frame);
      if (e.name == "not") return Value(!v.truthy());
      if (e.name == "-") return negate(v);
      if (v.is_undefined()) throw ChatTemplateError(v.undefined_message());
      if (!v.is_number()) throw ChatTemplateError("bad operand type for unary +: '" + v.type_name() + "'");
      return v;
    }
    case Expr::Kind::Binary: {
      Value l = eval(*e.children[0], frame);
      if (e.name == "and") return l.truthy() ? eval(*e.children[1], frame) : l;
      if (e.name == "or") return l.truthy() ? l : eval(*e.children[1], frame);
      return binary_op(e.name, l, eval(*e.children[1], frame));
    }
    case Expr::Kind::Compare: {
      Value l = eval(*e.children[0], frame);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value r = eval(*e.children[i + 1], frame);
        const std::string& op = e.ops[i];
        bool ok;
        if (op == "==") ok = equals(l, r);
        else if (op == "!=") ok = !equals(l, r);
        else if (op == "in") ok = contains(r, l);
        else if (op == "not in") ok = !contains(r, l);
        else {
          int c = compare(l, r);
          ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
        }
        if (!ok) return Value(false);
        l = std::move(r);
      }
      return Value(true);
    }
    case Expr::Kind::CondExpr:
      if (eval(*e.children[0], frame).truthy()) return eval(*e.children[1], frame);
      return e.children[2] ? eval(*e.children[2], frame) : Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
    case Expr::Kind::ListLit: {
      List l;
      for (const auto& c : e.children) l.push_back(eval(*c, frame));
      return Value::list(std::move(l));
    }
    case Expr::Kind::DictLit: {
      Value d = Value::dict();
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        Value k = eval(*e.children[i], frame);
        d.set(k.to_string(), eval(*e.children[i + 1], frame));
      }
      return d;
    }
  }
  return Value();
}

}  // namespace pagoda::jinja
