#include "engine/tokenizer/bpe_regex.h"

#include "engine/tokenizer/bpe_byte_level.h"

#include <stdexcept>

#ifdef PAGODA_HAVE_BPE
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

namespace pagoda::bpe {

#ifdef PAGODA_HAVE_BPE

namespace {
std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}
}  // namespace

struct RegexSplitter::Impl {
  pcre2_code* code = nullptr;
  ~Impl() { pcre2_code_free(code); }
};

bool regex_available() { return true; }

RegexSplitter::RegexSplitter(std::string_view pattern) : impl_(std::make_unique<Impl>()) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
  if (impl_->code == nullptr) {
    throw std::runtime_error("cannot compile pre-tokenizer regex at offset " +
                             std::to_string(err_offset) + ": " + pcre2_message(err));
  }
  // JIT is an optimisation only: without it (unsupported platform) the
  // interpreter gives the same matches.
  (void)pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);
}

RegexSplitter::~RegexSplitter() = default;

std::vector<std::string_view> RegexSplitter::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  for_each(text, [&pieces](std::string_view piece) {
    pieces.push_back(piece);
    return true;
  });
  return pieces;
}

void RegexSplitter::for_each(std::string_view text,
                             const std::function<bool(std::string_view)>& visit) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  if (md == nullptr) throw std::bad_alloc();
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // PCRE2 validates the whole subject's UTF-8 on every pcre2_match call
  // unless told not to: once per piece, that made splitting quadratic in the
  // text's length (a 180 KB prompt took 20 s). Validate once here instead;
  // with PCRE2_NO_UTF_CHECK, invalid UTF-8 would be undefined behaviour.
  if (!is_valid_utf8(text)) throw std::invalid_argument("text to split is not valid UTF-8");
  size_t gap_start = 0;
  size_t offset = 0;
  while (offset <= text.size()) {
    // Every offset is a character boundary (match ends, or stepped over
    // whole characters below), as PCRE2_NO_UTF_CHECK requires.
    const int rc = pcre2_match(impl_->code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      throw std::runtime_error("pre-tokenizer regex match failed: " + pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0], end = ov[1];
    if (end == start) {  // empty match: no piece; step over one character
      if (start >= text.size()) break;
      offset = start + 1;
      while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80) {
        ++offset;
      }
      continue;
    }
    bool more = true;
    try {
      if (start > gap_start) more = visit(text.substr(gap_start, start - gap_start));
      if (more) more = visit(text.substr(start, end - start));
    } catch (...) {
      pcre2_match_data_free(md);
      throw;
    }
    if (!more) {
      pcre2_match_data_free(md);
      return;
    }
    gap_start = offset = end;
  }
  pcre2_match_data_free(md);
  if (gap_start < text.size()) visit(text.substr(gap_start));
}

#else  // built without PCRE2

struct RegexSplitter::Impl {};

bool regex_available() { return false; }

RegexSplitter::RegexSplitter(std::string_view) {
  throw std::runtime_error(
      "byte-level BPE needs PCRE2: Pagoda was built without PCRE2 (install libpcre2-dev and "
      "reconfigure)");
}

RegexSplitter::~RegexSplitter() = default;

std::vector<std::string_view> RegexSplitter::split(std::string_view) const {
  throw std::logic_error("RegexSplitter built without PCRE2");
}

void RegexSplitter::for_each(std::string_view, const std::function<bool(std::string_view)>&) const {
  throw std::logic_error("RegexSplitter built without PCRE2");
}

#endif

}  // namespace pagoda::bpe
