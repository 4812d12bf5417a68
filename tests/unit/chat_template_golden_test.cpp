// Golden test: every rendering in ../shared/testvectors/chat_template_renderings.json
// (produced by Python Jinja2 3.1.2 set up as transformers' apply_chat_template)
// must be reproduced byte for byte, or fail with the recorded error message.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/chat/chat_template.h"

namespace pagoda {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ChatTemplateGolden, MatchesJinja2Renderings) {
  const std::string dir = std::string(PAGODA_SHARED_DIR);
  nlohmann::json vectors = nlohmann::json::parse(read_file(dir + "/testvectors/chat_template_renderings.json"));
  const auto& cases = vectors.at("cases");
  ASSERT_GE(cases.size(), 40u);
  int rendered = 0, errors = 0;
  for (const auto& c : cases) {
    const std::string name = c.at("template").get<std::string>();
    SCOPED_TRACE(name + " / " + c.at("conversation").get<std::string>() +
                 " / add_generation_prompt=" + (c.at("add_generation_prompt").get<bool>() ? "true" : "false"));
    ChatTemplate tmpl(read_file(dir + "/chat_templates/" + name + ".jinja"));
    // A null token is passed as "" (the templates that have none never print it).
    auto token = [&](const char* key) { return c.at(key).is_null() ? std::string() : c.at(key).get<std::string>(); };
    if (!c.at("error").is_null()) {
      try {
        tmpl.render(c.at("messages"), c.at("add_generation_prompt").get<bool>(), token("bos_token"),
                    token("eos_token"));
        ADD_FAILURE() << "expected ChatTemplateError";
      } catch (const ChatTemplateError& e) {
        EXPECT_EQ(std::string(e.what()), c.at("error").get<std::string>());
        ++errors;
      }
      continue;
    }
    std::string out = tmpl.render(c.at("messages"), c.at("add_generation_prompt").get<bool>(), token("bos_token"),
                                  token("eos_token"));
    EXPECT_EQ(out, c.at("rendered").get<std::string>());
    ++rendered;
  }
  EXPECT_EQ(rendered + errors, static_cast<int>(cases.size()));
  EXPECT_GT(errors, 0);
}

// The chat templates bundled in chat_templates.json are the same sources as
// the .jinja files (so either can be used by the server).
TEST(ChatTemplateGolden, JsonTemplatesMatchFiles) {
  const std::string dir = std::string(PAGODA_SHARED_DIR) + "/chat_templates/";
  nlohmann::json all = nlohmann::json::parse(read_file(dir + "chat_templates.json"));
  ASSERT_FALSE(all.empty());
  for (const auto& [name, entry] : all.items()) {
    SCOPED_TRACE(name);
    std::string file = read_file(dir + name + ".jinja");
    std::string json_src = entry.at("chat_template").get<std::string>();
    nlohmann::json msgs = nlohmann::json::array({{{"role", "user"}, {"content", "Hi"}}});
    EXPECT_EQ(ChatTemplate(file).render(msgs, true, "<s>", "</s>"), ChatTemplate(json_src).render(msgs, true, "<s>", "</s>"));
  }
}

}  // namespace
}  // namespace pagoda
