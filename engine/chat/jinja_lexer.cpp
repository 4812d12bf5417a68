// Jinja2 lexer (see jinja_lexer.h). Mirrors jinja2/lexer.py's rules for
// trim_blocks / lstrip_blocks and the `-` / `+` tag modifiers.
#include "engine/core/utf8.h"
#include "engine/chat/jinja_lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "engine/chat/chat_template.h"

namespace pagoda::jinja {
namespace {

[[noreturn]] void fail(const std::string& msg, int line) {
  throw ChatTemplateError("template syntax error: " + msg + " (line " + std::to_string(line) + ")");
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python "unicode-escape" decoding, as Jinja2 applies to string literals.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out += s[i];
      continue;
    }
    char c = s[++i];
    switch (c) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        size_t n = c == 'x' ? 2 : (c == 'u' ? 4 : 8);
        uint32_t cp = 0;
        if (i + n >= s.size()) throw ChatTemplateError("truncated \\" + std::string(1, c) + " escape");
        for (size_t k = 1; k <= n; ++k) {
          int h = hexval(s[i + k]);
          if (h < 0) throw ChatTemplateError("truncated \\" + std::string(1, c) + " escape");
          cp = cp * 16 + static_cast<uint32_t>(h);
        }
        i += n;
        // Not a Unicode scalar value: beyond U+10FFFF Python refuses the
        // literal ("illegal Unicode character"); a surrogate has no UTF-8
        // form, so the rendered prompt could not be tokenized (transformers
        // fails encoding it). Both would write invalid UTF-8.
        if (cp > 0x10FFFF)
          throw ChatTemplateError("illegal Unicode character in \\" + std::string(1, c) +
                                  " escape");
        if (cp >= 0xD800 && cp <= 0xDFFF)
          throw ChatTemplateError("surrogate code point in \\" + std::string(1, c) +
                                  " escape cannot be encoded as UTF-8");
        pagoda::append_utf8(out, cp);
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          uint32_t cp = static_cast<uint32_t>(c - '0');
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k)
            cp = cp * 8 + static_cast<uint32_t>(s[++i] - '0');
          pagoda::append_utf8(out, cp);
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t start = find_tag(pos_);
      if (start == std::string::npos) {
        emit_text(src_.substr(pos_), line_);
        advance_to(src_.size());
        break;
      }
      char kind = src_[start + 1];
      char mod = start + 2 < src_.size() ? src_[start + 2] : '\0';
      std::string text = src_.substr(pos_, start - pos_);
      if (mod == '-') {
        size_t e = text.size();
        while (e > 0 && is_space(text[e - 1])) --e;
        text.resize(e);
      } else if (mod != '+' && kind != '{') {
        lstrip(text);
      }
      emit_text(text, line_);
      advance_to(start);
      size_t body = start + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      if (kind == '#') {
        comment(body);
      } else {
        tag(kind, body);
      }
    }
    toks_.push_back({TokType::Eof, "", line_});
    return std::move(toks_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t p = src_.find('{', from); p != std::string::npos; p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) return p;
    }
    return std::string::npos;
  }

  // lstrip_blocks: drop spaces/tabs between the start of the line and a block
  // or comment tag when nothing else precedes it on that line.
  void lstrip(std::string& text) const {
    size_t nl = text.rfind('\n');
    size_t from = nl == std::string::npos ? 0 : nl + 1;
    if (nl == std::string::npos && !(pos_ == 0 || src_[pos_ - 1] == '\n')) return;
    for (size_t i = from; i < text.size(); ++i)
      if (text[i] != ' ' && text[i] != '\t') return;
    text.resize(from);
  }

  void emit_text(const std::string& text, int line) {
    if (!text.empty()) toks_.push_back({TokType::Text, text, line});
  }

  void advance_to(size_t p) {
    for (size_t i = pos_; i < p && i < src_.size(); ++i)
      if (src_[i] == '\n') ++line_;
    pos_ = p;
  }

  // After a tag end: `-` strips all following whitespace, trim_blocks removes
  // one newline after a block or comment tag unless `+` was given.
  void after_end(char mod, bool block_like) {
    if (mod == '-') {
      size_t p = pos_;
      while (p < src_.size() && is_space(src_[p])) ++p;
      advance_to(p);
    } else if (mod != '+' && block_like && pos_ < src_.size() && src_[pos_] == '\n') {
      advance_to(pos_ + 1);
    }
  }

  void comment(size_t body) {
    int line = line_;
    size_t end = src_.find("#}", body);
    if (end == std::string::npos) fail("Missing end of comment tag", line);
    char mod = end > body && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    advance_to(end + 2);
    after_end(mod, true);
  }

  void tag(char kind, size_t body) {
    int open_line = line_;
    toks_.push_back({kind == '{' ? TokType::VarBegin : TokType::BlockBegin, "", line_});
    size_t first_tok = toks_.size();
    advance_to(body);
    const char* close = kind == '{' ? "}}" : "%}";
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= src_.size()) fail(std::string("unexpected end of template, expected '") + close + "'", open_line);
      if (depth == 0) {
        char mod = src_[pos_];
        size_t at = (mod == '-' || (mod == '+' && kind == '%')) ? pos_ + 1 : pos_;
        if (src_.compare(at, 2, close) == 0) {
          toks_.push_back({kind == '{' ? TokType::VarEnd : TokType::BlockEnd, "", line_});
          char end_mod = at != pos_ ? mod : '\0';
          advance_to(at + 2);
          const bool is_raw = kind == '%' && toks_.size() == first_tok + 2 &&
                              toks_[first_tok].type == TokType::Name &&
                              toks_[first_tok].value == "raw";
          // trim_blocks does not apply after {% raw %} (Jinja2's lexer gives
          // raw_begin no block suffix: the body keeps its first newline);
          // `-%}` still strips.
          after_end(end_mod, kind == '%' && !is_raw);
          if (is_raw) raw(first_tok - 1, open_line);
          return;
        }
      }
      read_token(depth);
    }
  }

  // {% raw %}...{% endraw %}: the body is emitted as text, unparsed.
  void raw(size_t begin_index, int line) {
    toks_.resize(begin_index);
    size_t p = pos_;
    while (true) {
      p = src_.find("{%", p);
      if (p == std::string::npos) fail("missing end of raw directive", line);
      size_t q = p + 2;
      char mod_open = src_[q] == '-' || src_[q] == '+' ? src_[q++] : '\0';
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) {
        p += 2;
        continue;
      }
      q += 6;
      while (q < src_.size() && is_space(src_[q])) ++q;
      char mod_close = src_[q] == '-' || src_[q] == '+' ? src_[q++] : '\0';
      if (src_.compare(q, 2, "%}") != 0) fail("invalid endraw tag", line_);
      std::string text = src_.substr(pos_, p - pos_);
      if (mod_open == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      }
      emit_text(text, line_);
      advance_to(q + 2);
      after_end(mod_close, true);
      return;
    }
  }

  void read_token(int& depth) {
    int line = line_;
    char c = src_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = pos_;
      while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
      toks_.push_back({TokType::Name, src_.substr(pos_, e - pos_), line});
      advance_to(e);
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      number(line);
    } else if (c == '\'' || c == '"') {
      size_t e = pos_ + 1;
      while (e < src_.size() && src_[e] != c) e += src_[e] == '\\' ? 2 : 1;
      if (e >= src_.size()) fail("unexpected end of string", line);
      toks_.push_back({TokType::String, unescape(src_.substr(pos_ + 1, e - pos_ - 1)), line});
      advance_to(e + 1);
    } else {
      static const char* kOps2[] = {"//", "**", "==", "!=", "<=", ">="};
      for (const char* op : kOps2) {
        if (src_.compare(pos_, 2, op) == 0) {
          toks_.push_back({TokType::Op, op, line});
          advance_to(pos_ + 2);
          return;
        }
      }
      if (!std::strchr("+-*/%~[](){}<>=.:|,;", c)) fail(std::string("unexpected char '") + c + "'", line);
      if (c == '(' || c == '[' || c == '{') ++depth;
      if (c == ')' || c == ']' || c == '}') {
        if (depth == 0) fail(std::string("unexpected '") + c + "'", line);
        --depth;
      }
      toks_.push_back({TokType::Op, std::string(1, c), line});
      advance_to(pos_ + 1);
    }
  }

  void number(int line) {
    auto digits = [&](size_t p) {
      while (p < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[p])) || src_[p] == '_')) ++p;
      return p;
    };
    size_t e = digits(pos_);
    bool is_float = false;
    bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';
    if (!after_dot && e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      e = digits(e + 1);
      is_float = true;
    }
    if (!after_dot && e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        e = digits(q);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = pos_; i < e; ++i)
      if (src_[i] != '_') text += src_[i];
    Token t{is_float ? TokType::Float : TokType::Int, text, line};
    errno = 0;
    if (is_float) {
      t.fval = std::strtod(text.c_str(), nullptr);  // overflow gives inf, as in Python
    } else {
      t.ival = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) fail("integer literal " + text + " does not fit in 64 bits", line);
    }
    toks_.push_back(t);
    advance_to(e);
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> toks_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) {
  // newline_sequence "\n": normalise \r\n and \r; keep_trailing_newline=False
  // drops one trailing newline.
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src += source[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  return Lexer(std::move(src)).run();
}

}  // namespace pagoda::jinja
