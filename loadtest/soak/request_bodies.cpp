#include "loadtest/soak/request_bodies.h"

#include <algorithm>
#include <array>

namespace pagoda::loadtest {

using nlohmann::json;

namespace {

constexpr std::array<const char*, 8> kPrompts = {"Once upon a time",
                                                 "The little dog",
                                                 "Lily and Tom went to the park",
                                                 "One day, a bird",
                                                 "There was a big red ball",
                                                 "Sam liked to",
                                                 "The sun was",
                                                 "Mom said"};

template <typename T>
const T& pick(Rng& rng, const std::vector<T>& v) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}
const char* prompt(Rng& rng) {
  return kPrompts[std::uniform_int_distribution<size_t>(0, kPrompts.size() - 1)(rng)];
}
bool chance(Rng& rng, double p) { return std::bernoulli_distribution(p)(rng); }

json base(Rng& rng, const ModelInfo& model, bool chat) {
  json body = json::object();
  if (!model.id.empty()) body["model"] = model.id;
  if (chat) {
    json messages = json::array();
    if (chance(rng, 0.3))
      messages.push_back({{"role", "system"}, {"content", "You tell short stories."}});
    messages.push_back({{"role", "user"}, {"content", prompt(rng)}});
    body["messages"] = messages;
  } else {
    // Sometimes a list of prompts: several engine requests that finish,
    // or are aborted, together.
    if (chance(rng, 0.15))
      body["prompt"] = json::array({prompt(rng), prompt(rng)});
    else
      body["prompt"] = prompt(rng);
  }
  return body;
}

}  // namespace

int expected_choices(const json& body) {
  auto p = body.find("prompt");
  int prompts = p != body.end() && p->is_array() && !p->empty() && (*p)[0].is_string()
                    ? static_cast<int>(p->size())
                    : 1;
  return prompts * body.value("n", 1);
}

json short_request(Rng& rng, const ModelInfo& model, bool chat) {
  json body = base(rng, model, chat);
  body["max_tokens"] = std::uniform_int_distribution<int>(1, 48)(rng);
  body["temperature"] = pick(rng, std::vector<double>{0.0, 0.7, 1.0});
  // n > 1 samples: with temperature 0 it is a 400, as vLLM's
  // SamplingParams (the draw is made either way, so the sequence of
  // requests a seed gives stays the same).
  if (chance(rng, 0.2) && body["temperature"].get<double>() > 0) body["n"] = 2;
  if (chance(rng, 0.2)) body["stop"] = json::array({".", "\n"});
  if (chance(rng, 0.2)) body["top_p"] = 0.9;
  if (chance(rng, 0.2)) body["seed"] = std::uniform_int_distribution<int>(0, 1000)(rng);
  return body;
}

json long_request(Rng& rng, const ModelInfo& model, bool chat) {
  json body = base(rng, model, chat);
  int64_t most = std::max<int64_t>(16, model.max_model_len - 100);
  body["max_tokens"] = std::uniform_int_distribution<int64_t>(std::min<int64_t>(200, most),
                                                              std::min<int64_t>(400, most))(rng);
  body["temperature"] = 0.8;
  body["ignore_eos"] = true;
  return body;
}

std::string malformed_body(Rng& rng, bool chat) {
  static const std::vector<std::string> common = {
      "{",
      "not json at all",
      "[1, 2, 3]",
      "{\"max_tokens\": 4}",  // neither prompt nor messages
      "{\"max_tokens\": 1e999, \"prompt\": \"hi\", \"messages\": [{\"role\": \"user\", "
      "\"content\": \"hi\"}]}",
  };
  static const std::vector<std::string> completion = {
      "{\"prompt\": \"hi\", \"max_tokens\": -1}", "{\"prompt\": \"hi\", \"temperature\": \"hot\"}",
      "{\"prompt\": \"hi\", \"n\": 0}",           "{\"prompt\": \"hi\", \"top_p\": 7}",
      "{\"prompt\": \"\xff\xfe bad utf-8\"}",     "{\"prompt\": {\"text\": \"hi\"}}",
  };
  static const std::vector<std::string> chat_bodies = {
      "{\"messages\": \"hi\"}",
      "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": \"many\"}",
      "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"temperature\": -3}",
      "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"n\": -2}",
  };
  if (chance(rng, 0.4)) return pick(rng, common);
  return pick(rng, chat ? chat_bodies : completion);
}

json oversized_prompt_request(const ModelInfo& model, bool chat) {
  // Each " story" is at least one token; 4 × max_model_len of them is far
  // beyond the context whatever the tokenizer.
  std::string text;
  for (int64_t i = 0; i < 4 * std::max<int64_t>(model.max_model_len, 512); ++i) text += " story";
  json body = json::object();
  if (!model.id.empty()) body["model"] = model.id;
  if (chat) {
    body["messages"] = json::array({{{"role", "user"}, {"content", text}}});
  } else {
    body["prompt"] = text;
  }
  body["max_tokens"] = 4;
  return body;
}

std::string malformed_ws_message(Rng& rng, const std::string& id, bool* has_id) {
  const std::string quoted = json(id).dump();
  std::vector<std::pair<std::string, bool>> messages = {
      {"{", false},
      {"[1, 2]", false},
      {"{\"type\": \"completion\", \"prompt\": \"hi\"}", false},  // no id
      {"{\"type\": \"bogus\", \"id\": " + quoted + "}", true},
      {"{\"type\": \"completion\", \"id\": " + quoted +
           ", \"prompt\": \"hi\", \"temperature\": -1}",
       true},
      // Not parseable JSON (the number has no double), so no id can be read
      // from it: the error's id is null.
      {"{\"type\": \"completion\", \"id\": " + quoted +
           ", \"prompt\": \"hi\", \"max_tokens\": 1e999}",
       false},
      {"{\"type\": \"chat\", \"id\": " + quoted + ", \"messages\": 7}", true},
      {"{\"type\": \"completion\", \"id\": " + quoted + ", \"prompt\": \"hi\", \"resumable\": 3}",
       true},
  };
  const auto& m = pick(rng, messages);
  *has_id = m.second;
  return m.first;
}

}  // namespace pagoda::loadtest
