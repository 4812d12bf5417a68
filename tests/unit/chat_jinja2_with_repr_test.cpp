// The `{% with %}` block (its own scope, targets evaluated outside it) and
// Python's repr of strings inside lists and dicts (non-printable characters
// escaped as Python's str.isprintable() decides), each against Python
// Jinja2's rendering: tests/data/jinja2_with_repr_reference.py writes the
// reference (its JSON records the Python, Unicode and Jinja2 versions).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "engine/chat/chat_template.h"

namespace pagoda {
namespace {

using nlohmann::ordered_json;

ordered_json reference() {
  std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/tests/data/jinja2_with_repr_reference.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ordered_json::parse(ss.str());
}

void expect_cases(const std::string& prefix) {
  const ordered_json ref = reference();
  int checked = 0;
  for (const auto& c : ref["cases"]) {
    const std::string name = c["name"].get<std::string>();
    if (name.rfind(prefix, 0) != 0) continue;
    SCOPED_TRACE(name);
    ASSERT_TRUE(c.contains("rendered")) << c["error"];  // every case renders in Jinja2
    ordered_json vars = c["vars"];
    ordered_json messages = vars.contains("messages") ? vars["messages"] : ordered_json::array();
    vars.erase("messages");
    try {
      EXPECT_EQ(ChatTemplate(c["template"].get<std::string>())
                    .render_ordered(messages, false, "<s>", "</s>", vars),
                c["rendered"].get<std::string>());
    } catch (const ChatTemplateError& e) {
      ADD_FAILURE() << "failed with " << e.what();
    }
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

TEST(ChatJinja2With, ScopesAsJinja2) { expect_cases("with_"); }

TEST(ChatJinja2Repr, StringsInListsAndDictsPrintAsPythonRepr) { expect_cases("repr_"); }

}  // namespace
}  // namespace pagoda
