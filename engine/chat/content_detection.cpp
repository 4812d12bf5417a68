#include "engine/chat/content_detection.h"

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

namespace pagoda::jinja {

namespace {

// Every Set and For statement, in Jinja2's find_all order (depth first, a
// statement before its bodies).
void collect(const Body& body, std::vector<const Stmt*>& sets, std::vector<const Stmt*>& fors) {
  for (const StmtPtr& s : body) {
    if (!s) continue;
    if (s->kind == Stmt::Kind::Set) sets.push_back(s.get());
    if (s->kind == Stmt::Kind::For) fors.push_back(s.get());
    for (const auto& branch : s->branches) collect(branch.second, sets, fors);
    collect(s->body, sets, fors);
    collect(s->else_body, sets, fors);
  }
}

bool is_var(const Expr* e, const std::string& var) {
  return e && e->kind == Expr::Kind::Name && e->name == var;
}

// var['key'] or var.key.
bool is_attr(const Expr* e, const std::string& var, const std::string& key) {
  if (!e || e->children.empty() || !is_var(e->children[0].get(), var)) return false;
  if (e->kind == Expr::Kind::GetAttr) return e->name == key;
  if (e->kind == Expr::Kind::GetItem && e->children.size() > 1) {
    const Expr* arg = e->children[1].get();
    return arg && arg->kind == Expr::Kind::Literal && arg->literal.is_string() &&
           arg->literal.str() == key;
  }
  return false;
}

// var (or var['key'] when key is given), possibly filtered, tested or sliced.
bool is_var_or_elems(const Expr* e, const std::string& var, const std::string* key) {
  if (!e) return false;
  switch (e->kind) {
    case Expr::Kind::Filter:
    case Expr::Kind::Test:
    case Expr::Kind::Slice:
      return !e->children.empty() && is_var_or_elems(e->children[0].get(), var, key);
    default:
      return key ? is_attr(e, var, *key) : is_var(e, var);
  }
}

struct Unrecognised {};  // a shape vLLM's walk asserts against

// `messages` and the variables set from it, transitively.
std::vector<std::string> messages_names(const std::vector<const Stmt*>& sets) {
  std::vector<std::string> names{"messages"};
  std::deque<std::string> pending{"messages"};
  while (!pending.empty()) {
    const std::string var = pending.front();
    pending.pop_front();
    for (const Stmt* s : sets) {
      if (!is_var_or_elems(s->expr.get(), var, nullptr)) continue;
      if (s->is_attr || s->targets.size() != 1) throw Unrecognised{};
      const std::string& lhs = s->targets[0];
      // vLLM follows each assignment once per variable it comes from; a
      // name already followed adds nothing new (and ends cycles).
      if (std::find(names.begin(), names.end(), lhs) != names.end()) continue;
      names.push_back(lhs);
      pending.push_back(lhs);
    }
  }
  return names;
}

// The targets of loops whose iterable is one of `vars` (with key: its
// element `key`). With stop_at_first, returns after the first such loop.
std::vector<std::string> loop_targets(const std::vector<const Stmt*>& fors,
                                      const std::vector<std::string>& vars, const std::string* key,
                                      bool stop_at_first) {
  std::vector<std::string> out;
  for (const Stmt* loop : fors) {
    const bool over = std::any_of(vars.begin(), vars.end(), [&](const std::string& v) {
      return is_var_or_elems(loop->expr.get(), v, key);
    });
    if (!over) continue;
    if (loop->targets.size() != 1) throw Unrecognised{};
    out.push_back(loop->targets[0]);
    if (stop_at_first) break;
  }
  return out;
}

}  // namespace

bool iterates_message_content(const Body& body) {
  std::vector<const Stmt*> sets, fors;
  collect(body, sets, fors);
  try {
    const std::vector<std::string> message_vars =
        loop_targets(fors, messages_names(sets), nullptr, /*stop_at_first=*/false);
    const std::string content = "content";
    return !loop_targets(fors, message_vars, &content, /*stop_at_first=*/true).empty();
  } catch (const Unrecognised&) {
    return false;
  }
}

}  // namespace pagoda::jinja
