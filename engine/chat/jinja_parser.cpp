// Jinja2 recursive-descent parser (see jinja_parser.h); grammar after
// jinja2/parser.py.
#include "engine/chat/jinja_parser.h"

#include <algorithm>

#include "engine/chat/chat_template.h"

namespace pagoda::jinja {
namespace {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& toks) : t_(toks) {}

  Body parse_template() {
    std::string found;
    return parse_body({}, &found);
  }

 private:
  const Token& cur() const { return t_[p_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  bool is_op(const char* op) const { return cur().type == TokType::Op && cur().value == op; }
  bool is_name(const char* n) const { return cur().type == TokType::Name && cur().value == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    ++p_;
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    ++p_;
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokType::Text: return "template data";
      case TokType::VarBegin: return "begin of print statement";
      case TokType::VarEnd: return "end of print statement";
      case TokType::BlockBegin: return "begin of statement block";
      case TokType::BlockEnd: return "end of statement block";
      case TokType::Eof: return "end of template";
      case TokType::String: return "string";
      default: return "'" + t.value + "'";
    }
  }

  [[noreturn]] void fail(const std::string& msg) const {
    throw ChatTemplateError("template syntax error: " + msg + " (line " + std::to_string(cur().line) + ")");
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
  }
  void expect(TokType type, const char* what) {
    if (cur().type != type) fail(std::string("expected ") + what + ", got " + describe(cur()));
    ++p_;
  }
  std::string expect_name() {
    if (cur().type != TokType::Name) fail("expected name, got " + describe(cur()));
    return t_[p_++].value;
  }

  ExprPtr make(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // ---- statements ----
  Body parse_body(const std::vector<std::string>& ends, std::string* found) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == TokType::Eof) {
        if (!ends.empty()) {
          std::string want;
          for (size_t i = 0; i < ends.size(); ++i) want += (i ? " or '" : "'") + ends[i] + "'";
          fail("Unexpected end of template. Jinja was looking for the following tags: " + want + ".");
        }
        return body;
      }
      if (t.type == TokType::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->line = t.line;
        s->text = t.value;
        body.push_back(std::move(s));
        ++p_;
      } else if (t.type == TokType::VarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Output;
        s->line = t.line;
        ++p_;
        s->expr = parse_tuple();
        expect(TokType::VarEnd, "end of print statement");
        body.push_back(std::move(s));
      } else if (t.type == TokType::BlockBegin) {
        ++p_;
        if (cur().type == TokType::Name && std::find(ends.begin(), ends.end(), cur().value) != ends.end()) {
          *found = t_[p_++].value;
          return body;
        }
        parse_statement(body);
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  StmtPtr stmt(Stmt::Kind k, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->line = line;
    return s;
  }

  void parse_statement(Body& out) {
    DepthGuard guard(this);
    int line = cur().line;
    std::string kw = expect_name();
    std::string found;
    if (kw == "if") {
      auto s = stmt(Stmt::Kind::If, line);
      ExprPtr cond = parse_expression();
      expect(TokType::BlockEnd, "end of statement block");
      while (true) {
        Body b = parse_body({"elif", "else", "endif"}, &found);
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (found == "elif") {
          cond = parse_expression();
          expect(TokType::BlockEnd, "end of statement block");
          continue;
        }
        if (found == "else") {
          expect(TokType::BlockEnd, "end of statement block");
          s->else_body = parse_body({"endif"}, &found);
        }
        break;
      }
      out.push_back(std::move(s));
    } else if (kw == "for") {
      auto s = stmt(Stmt::Kind::For, line);
      do {
        s->targets.push_back(expect_name());
      } while (skip_op(","));
      if (!skip_name("in")) fail("expected 'in', got " + describe(cur()));
      s->expr = parse_or();
      if (skip_name("if")) s->cond = parse_expression();
      if (is_name("recursive")) fail("recursive loops are not supported");
      expect(TokType::BlockEnd, "end of statement block");
      s->body = parse_body({"else", "endfor"}, &found);
      if (found == "else") {
        expect(TokType::BlockEnd, "end of statement block");
        s->else_body = parse_body({"endfor"}, &found);
      }
      out.push_back(std::move(s));
    } else if (kw == "set") {
      auto s = stmt(Stmt::Kind::Set, line);
      s->targets.push_back(expect_name());
      if (skip_op(".")) {
        s->is_attr = true;
        s->targets.push_back(expect_name());
      } else {
        while (skip_op(",")) s->targets.push_back(expect_name());
      }
      if (skip_op("=")) {
        s->expr = parse_tuple();
      } else {
        if (s->is_attr || s->targets.size() != 1) fail("expected '='");
        s->kind = Stmt::Kind::SetBlock;
        if (is_op("|")) s->expr = parse_filters(nullptr);
        expect(TokType::BlockEnd, "end of statement block");
        s->body = parse_body({"endset"}, &found);
      }
      out.push_back(std::move(s));
    } else if (kw == "macro") {
      auto s = stmt(Stmt::Kind::Macro, line);
      s->name = expect_name();
      parse_params(s->params);
      expect(TokType::BlockEnd, "end of statement block");
      s->body = parse_body({"endmacro"}, &found);
      out.push_back(std::move(s));
    } else if (kw == "call") {
      auto s = stmt(Stmt::Kind::CallBlock, line);
      if (is_op("(")) parse_params(s->params);
      s->expr = parse_expression();
      if (s->expr->kind != Expr::Kind::Call) fail("expected call");
      expect(TokType::BlockEnd, "end of statement block");
      s->body = parse_body({"endcall"}, &found);
      out.push_back(std::move(s));
    } else if (kw == "filter") {
      auto s = stmt(Stmt::Kind::FilterBlock, line);
      t_pipe_ = true;  // the first filter has no leading '|'
      s->expr = parse_filters(nullptr);
      expect(TokType::BlockEnd, "end of statement block");
      s->body = parse_body({"endfilter"}, &found);
      out.push_back(std::move(s));
    } else if (kw == "with") {
      // Jinja2's parse_with: `target = expr` pairs separated by commas (a
      // target may be names to unpack: `a, b = pair`), possibly none.
      auto s = stmt(Stmt::Kind::With, line);
      while (cur().type != TokType::BlockEnd) {
        if (!s->bindings.empty()) expect_op(",");
        std::vector<std::string> names{expect_name()};
        while (skip_op(",")) names.push_back(expect_name());
        expect_op("=");
        s->bindings.emplace_back(std::move(names), parse_expression());
      }
      expect(TokType::BlockEnd, "end of statement block");
      s->body = parse_body({"endwith"}, &found);
      out.push_back(std::move(s));
    } else if (kw == "generation") {
      // transformers' AssistantTracker extension: renders its body unchanged.
      expect(TokType::BlockEnd, "end of statement block");
      Body b = parse_body({"endgeneration"}, &found);
      for (auto& st : b) out.push_back(std::move(st));
    } else if (kw == "break" || kw == "continue") {
      out.push_back(stmt(kw == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, line));
    } else {
      --p_;
      fail("Encountered unknown tag '" + kw + "'.");
    }
    expect(TokType::BlockEnd, "end of statement block");
  }

  void parse_params(std::vector<std::pair<std::string, ExprPtr>>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string n = expect_name();
      ExprPtr def;
      if (skip_op("=")) def = parse_expression();
      params.emplace_back(n, std::move(def));
    }
    expect_op(")");
  }

  // ---- expressions ----
  ExprPtr parse_tuple() {
    int line = cur().line;
    ExprPtr first = parse_expression();
    if (!is_op(",")) return first;
    auto t = make(Expr::Kind::ListLit, line);
    t->children.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().type == TokType::VarEnd || cur().type == TokType::BlockEnd || is_op("=")) break;
      t->children.push_back(parse_expression());
    }
    return t;
  }

  ExprPtr parse_expression() {
    ExprPtr e = parse_or();
    ChainGuard chain(this);
    while (is_name("if")) {
      chain.grow();
      int line = cur().line;
      ++p_;
      auto c = make(Expr::Kind::CondExpr, line);
      c->children.push_back(parse_or());
      c->children.push_back(std::move(e));
      c->children.push_back(skip_name("else") ? parse_expression() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const std::string& op, ExprPtr l, ExprPtr r, int line) {
    auto b = make(Expr::Kind::Binary, line);
    b->name = op;
    b->children.push_back(std::move(l));
    b->children.push_back(std::move(r));
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    ChainGuard chain(this);
    while (is_name("or")) {
      chain.grow();
      int line = t_[p_++].line;
      l = binary("or", std::move(l), parse_and(), line);
    }
    return l;
  }
  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    ChainGuard chain(this);
    while (is_name("and")) {
      chain.grow();
      int line = t_[p_++].line;
      l = binary("and", std::move(l), parse_not(), line);
    }
    return l;
  }
  ExprPtr parse_not() {
    DepthGuard guard(this);
    if (is_name("not")) {
      auto u = make(Expr::Kind::Unary, t_[p_++].line);
      u->name = "not";
      u->children.push_back(parse_not());
      return u;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().type == TokType::Op &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op("<=") || is_op(">") || is_op(">="))) {
        op = t_[p_++].value;
      } else if (is_name("in")) {
        ++p_;
        op = "in";
      } else if (is_name("not") && peek().type == TokType::Name && peek().value == "in") {
        p_ += 2;
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Expr::Kind::Compare, line);
        cmp->children.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->children.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    ChainGuard chain(this);
    while (is_op("+") || is_op("-")) {
      chain.grow();
      const Token& t = t_[p_++];
      l = binary(t.value, std::move(l), parse_concat(), t.line);
    }
    return l;
  }
  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    ChainGuard chain(this);
    while (is_op("~")) {
      chain.grow();
      int line = t_[p_++].line;
      l = binary("~", std::move(l), parse_math2(), line);
    }
    return l;
  }
  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    ChainGuard chain(this);
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      chain.grow();
      const Token& t = t_[p_++];
      l = binary(t.value, std::move(l), parse_pow(), t.line);
    }
    return l;
  }
  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    ChainGuard chain(this);
    while (is_op("**")) {
      chain.grow();
      int line = t_[p_++].line;
      l = binary("**", std::move(l), parse_unary(true), line);
    }
    return l;
  }
  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      auto u = make(Expr::Kind::Unary, cur().line);
      u->name = t_[p_++].value;
      u->children.push_back(parse_unary(false));
      node = std::move(u);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    if (t.type == TokType::Name) {
      ++p_;
      auto e = make(Expr::Kind::Literal, line);
      if (t.value == "true" || t.value == "True") e->literal = Value(true);
      else if (t.value == "false" || t.value == "False") e->literal = Value(false);
      else if (t.value == "none" || t.value == "None") e->literal = Value::none();
      else {
        e->kind = Expr::Kind::Name;
        e->name = t.value;
      }
      return e;
    }
    if (t.type == TokType::String) {
      std::string s;
      while (cur().type == TokType::String) s += t_[p_++].value;
      auto e = make(Expr::Kind::Literal, line);
      e->literal = Value(s);
      return e;
    }
    if (t.type == TokType::Int || t.type == TokType::Float) {
      ++p_;
      auto e = make(Expr::Kind::Literal, line);
      e->literal = t.type == TokType::Int ? Value(t.ival) : Value(t.fval);
      return e;
    }
    if (skip_op("(")) {
      if (skip_op(")")) return make(Expr::Kind::ListLit, line);
      ExprPtr e = parse_expression();
      if (is_op(",")) {
        auto tup = make(Expr::Kind::ListLit, line);
        tup->children.push_back(std::move(e));
        while (skip_op(",") && !is_op(")")) tup->children.push_back(parse_expression());
        e = std::move(tup);
      }
      expect_op(")");
      return e;
    }
    if (skip_op("[")) {
      auto e = make(Expr::Kind::ListLit, line);
      while (!is_op("]")) {
        if (!e->children.empty()) expect_op(",");
        if (is_op("]")) break;
        e->children.push_back(parse_expression());
      }
      expect_op("]");
      return e;
    }
    if (skip_op("{")) {
      auto e = make(Expr::Kind::DictLit, line);
      while (!is_op("}")) {
        if (!e->children.empty()) expect_op(",");
        if (is_op("}")) break;
        e->children.push_back(parse_expression());
        expect_op(":");
        e->children.push_back(parse_expression());
      }
      expect_op("}");
      return e;
    }
    fail("unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    ChainGuard chain(this);
    while (true) {
      chain.grow();
      int line = cur().line;
      if (skip_op(".")) {
        if (cur().type == TokType::Int) {
          auto g = make(Expr::Kind::GetItem, line);
          auto k = make(Expr::Kind::Literal, line);
          k->literal = Value(t_[p_++].ival);
          g->children.push_back(std::move(node));
          g->children.push_back(std::move(k));
          node = std::move(g);
        } else {
          auto g = make(Expr::Kind::GetAttr, line);
          g->name = expect_name();
          g->children.push_back(std::move(node));
          node = std::move(g);
        }
      } else if (skip_op("[")) {
        node = parse_subscript(std::move(node), line);
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj, int line) {
    std::vector<ExprPtr> parts(1);
    bool slice = false;
    if (!is_op(":")) parts[0] = parse_expression();
    while (skip_op(":")) {
      slice = true;
      parts.emplace_back(is_op(":") || is_op("]") ? nullptr : parse_expression());
    }
    expect_op("]");
    if (!slice) {
      auto g = make(Expr::Kind::GetItem, line);
      g->children.push_back(std::move(obj));
      g->children.push_back(std::move(parts[0]));
      return g;
    }
    if (parts.size() > 3) fail("invalid slice");
    parts.resize(3);
    auto s = make(Expr::Kind::Slice, line);
    s->children.push_back(std::move(obj));
    for (auto& p : parts) s->children.push_back(std::move(p));
    return s;
  }

  // Arguments "(a, b, k=v)" appended to node->children (after any existing) and kwargs.
  void parse_args(Expr& node) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (cur().type == TokType::Name && peek().type == TokType::Op && peek().value == "=") {
        std::string k = t_[p_].value;
        p_ += 2;
        node.kwargs.emplace_back(k, parse_expression());
      } else {
        if (!node.kwargs.empty()) fail("positional argument after keyword argument");
        node.children.push_back(parse_expression());
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = make(Expr::Kind::Call, cur().line);
    c->children.push_back(std::move(callee));
    parse_args(*c);
    return c;
  }

  // One or more "| name(args)"; the first pipe is optional in filter blocks.
  ExprPtr parse_filters(ExprPtr node) {
    bool first = true;
    ChainGuard chain(this);
    while (is_op("|") || (first && t_pipe_)) {
      chain.grow();
      if (!(first && t_pipe_)) ++p_;
      first = false;
      t_pipe_ = false;
      auto f = make(Expr::Kind::Filter, cur().line);
      f->name = expect_name();
      while (skip_op(".")) f->name += "." + expect_name();
      f->children.push_back(std::move(node));
      if (is_op("(")) parse_args(*f);
      node = std::move(f);
    }
    return node;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    ChainGuard chain(this);
    while (true) {
      chain.grow();
      if (is_op("|")) {
        node = parse_filters(std::move(node));
      } else if (is_name("is")) {
        auto t = make(Expr::Kind::Test, t_[p_++].line);
        t->negated = skip_name("not");
        t->name = expect_name();
        t->children.push_back(std::move(node));
        if (is_op("(")) {
          parse_args(*t);
        } else if ((cur().type == TokType::Name || cur().type == TokType::String || cur().type == TokType::Int ||
                    cur().type == TokType::Float || is_op("[") || is_op("{") || is_op("(")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) fail("You cannot chain multiple tests with is");
          t->children.push_back(parse_postfix(parse_primary()));
        }
        node = std::move(t);
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  // Bounds the recursion on deeply nested input (kMaxDepth nested
  // expressions or blocks) so that bad templates fail instead of overflowing.
  struct DepthGuard {
    static constexpr int kMaxDepth = 200;
    Parser* p;
    explicit DepthGuard(Parser* parser) : p(parser) {
      if (++p->depth_ > kMaxDepth) p->fail("template nesting too deep");
    }
    ~DepthGuard() { --p->depth_; }
  };
  // A chain of operators, postfixes or filters (a + b + c ..., x.a.b ...,
  // x | f | g ...) is parsed by a loop but builds a left-deep tree: each
  // link counts as a level of nesting, so evaluating or freeing the tree
  // never recurses deeper than kMaxDepth (20,000 links overflowed the
  // stack; found by a fresh-user attack on the server).
  struct ChainGuard {
    Parser* p;
    int links = 0;
    explicit ChainGuard(Parser* parser) : p(parser) {}
    void grow() {
      ++links;
      if (++p->depth_ > DepthGuard::kMaxDepth) p->fail("template nesting too deep");
    }
    ~ChainGuard() { p->depth_ -= links; }
  };

  const std::vector<Token>& t_;
  size_t p_ = 0;
  bool t_pipe_ = false;
  int depth_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace pagoda::jinja
