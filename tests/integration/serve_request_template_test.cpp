// A request's own chat template on the real `pagoda serve`, as vLLM's
// serving layer treats it (_validate_chat_template, serving_engine.py):
// without --trust-request-chat-template, /v1/chat/completions and /tokenize
// refuse a request carrying chat_template or chat_template_kwargs.
// chat_template with vLLM's 400; with the flag, chat_template_kwargs.
// chat_template is the template the chat renders with (vLLM's
// ChatParams.get_apply_chat_template_kwargs), not a template variable.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include "engine/tokenizer/tokenizer.h"
#include "tests/integration/serve_test_util.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

const char* const kRefused =
    "Chat template is passed with request, but --trust-request-chat-template is not set. "
    "Refused request with untrusted chat template.";
const char* const kOwn =
    "{% for m in messages %}<{{ m.content }}|{{ chat_template is defined }}>"
    "{% endfor %}";

json messages() { return json::array({{{"role", "user"}, {"content", "Once upon a time"}}}); }

class ServeUntrustedTemplate : public BundledServerSuite<ServeUntrustedTemplate> {
 public:
  static std::vector<std::string> server_args() {
    return {"--chat-template", shared_path("chat_templates/llama-2-chat.jinja")};
  }
};

TEST_F(ServeUntrustedTemplate, RequestTemplatesAreRefused) {
  const json bodies[] = {
      {{"messages", messages()}, {"chat_template", kOwn}},
      {{"messages", messages()}, {"chat_template_kwargs", {{"chat_template", kOwn}}}},
  };
  for (const char* path : {"/v1/chat/completions", "/tokenize"}) {
    for (const json& body : bodies) {
      SCOPED_TRACE(std::string(path) + " " + body.dump());
      const json r = post_json(port(), path, body, 400);
      EXPECT_EQ(r["error"]["message"], kRefused) << r.dump();
      EXPECT_EQ(r["error"]["type"], "BadRequestError");
      EXPECT_EQ(r["error"]["code"], 400);
    }
  }
  // The server's own template still serves a plain chat.
  const json ok = post_json(port(), "/tokenize", {{"messages", messages()}});
  EXPECT_GT(ok["count"].get<int64_t>(), 0) << ok.dump();
}

class ServeTrustedTemplate : public BundledServerSuite<ServeTrustedTemplate> {
 public:
  static std::vector<std::string> server_args() {
    return {"--chat-template", shared_path("chat_templates/llama-2-chat.jinja"),
            "--trust-request-chat-template"};
  }
};

TEST_F(ServeTrustedTemplate, KwargsTemplateIsTheTemplate) {
  auto tok = load_tokenizer(std::string(PAGODA_SOURCE_DIR) + "/models/stories260K");
  auto prompt = [&](const json& body) {
    const json r = post_json(port(), "/tokenize", body);
    return tok->decode(r["tokens"].get<std::vector<int32_t>>(), true);
  };
  EXPECT_EQ(prompt({{"messages", messages()}, {"chat_template_kwargs", {{"chat_template", kOwn}}}}),
            "<Once upon a time|False>");
  EXPECT_EQ(prompt({{"messages", messages()}, {"chat_template", kOwn}}),
            "<Once upon a time|False>");
  // The request's chat_template wins over the kwargs' one.
  EXPECT_EQ(prompt({{"messages", messages()},
                    {"chat_template", kOwn},
                    {"chat_template_kwargs", {{"chat_template", "{{ 'kwargs' }}"}}}}),
            "<Once upon a time|False>");
  const json chat = post_json(port(), "/v1/chat/completions",
                              {{"messages", messages()},
                               {"chat_template_kwargs", {{"chat_template", kOwn}}},
                               {"max_tokens", 2},
                               {"return_token_ids", true}});
  EXPECT_EQ(tok->decode(chat["choices"][0]["prompt_token_ids"].get<std::vector<int32_t>>(), true),
            "<Once upon a time|False>");
}

}  // namespace
}  // namespace pagoda::testing_http
