// HTML escaping of text, as MarkupSafe's escape() (used by Jinja2's `escape`/`e`
// filter) does it: & < > " ' become &amp; &lt; &gt; &#34; &#39;.
#pragma once
#include <string>
#include <string_view>

namespace pagoda {

// Returns `s` (bytes, UTF-8 passes through unchanged) with the five characters
// & < > " ' replaced by their entities &amp; &lt; &gt; &#34; &#39;
// (markupsafe/_native.py escape()). Safe for element text and quoted attribute
// values. Never throws except std::bad_alloc.
inline std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace pagoda
