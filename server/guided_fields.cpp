#include "server/guided_fields.h"

#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/guided/guide.h"
#include "engine/guided/structural_tag.h"
#include "server/openai_fields.h"
#include "server/request_model.h"

namespace pagoda::openai_fields {
namespace {

using guided::GuideKind;
using guided::GuideSpec;
using nlohmann::json;
using nlohmann::ordered_json;

// Where a request carries a JSON schema object (keep_schema_key_order).
const std::vector<std::vector<const char*>>& schema_paths() {
  static const std::vector<std::vector<const char*>> kPaths = {
      {"guided_json"},
      {"structured_outputs", "json"},
      {"response_format", "json_schema", "schema"}};
  return kPaths;
}

// The value at `path` in `root` (nested objects), or nullptr.
template <typename Json>
Json* at_path(Json& root, const std::vector<const char*>& path) {
  Json* v = &root;
  for (const char* key : path) {
    if (!v->is_object()) return nullptr;
    auto it = v->find(key);
    if (it == v->end()) return nullptr;
    v = &*it;
  }
  return v;
}

struct Candidate {
  std::string param;  // the field that asked for it, for messages
  GuideSpec spec;
};

std::string schema_text(const json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() || v.is_boolean()) return v.dump();
  fail(fmt::format("'{}' must be a JSON schema (an object or its JSON text)", param), param);
}

std::string choice_text(const json& v, const std::string& param) {
  if (!v.is_array() || v.empty())
    fail(fmt::format("'{}' must be a non-empty list of strings", param), param);
  for (const auto& c : v)
    if (!c.is_string()) fail(fmt::format("'{}' must be a list of strings", param), param);
  return v.dump();
}

std::string string_field(const json& v, const std::string& param) {
  if (!v.is_string()) fail(fmt::format("'{}' must be a string", param), param);
  return v.get<std::string>();
}

// A structural tag as vLLM takes it (the JSON text of {structures,
// triggers}; the object itself is accepted too), checked and made canonical
// (engine/guided/structural_tag.h).
std::string structural_tag_text(const json& v, const std::string& param) {
  json obj;
  if (v.is_string()) {
    obj = json::parse(v.get_ref<const std::string&>(), nullptr, false);
    if (obj.is_discarded())
      fail(fmt::format("invalid {}: the structural tag is not valid JSON", param), param);
  } else if (v.is_object()) {
    obj = v;
  } else {
    fail(fmt::format("'{}' must be a structural tag (its JSON text or an object)", param), param);
  }
  try {
    return guided::structural_tag_json(guided::parse_structural_tag(obj));
  } catch (const guided::StructuralTagError& e) {
    fail(fmt::format("invalid {}: {}", param, e.what()), param);
  }
}

void from_structured_outputs(const json& so, std::vector<Candidate>& out,
                             std::optional<std::string>& ws, bool& no_ws, bool& no_additional) {
  if (!so.is_object()) fail("'structured_outputs' must be an object", "structured_outputs");
  static const char* kKeys[] = {"json",
                                "regex",
                                "choice",
                                "grammar",
                                "json_object",
                                "whitespace_pattern",
                                "disable_any_whitespace",
                                "disable_additional_properties",
                                "disable_fallback",
                                "structural_tag"};
  for (auto it = so.begin(); it != so.end(); ++it) {
    bool known = false;
    for (const char* k : kKeys) known = known || it.key() == k;
    if (!known)
      fail(fmt::format("structured_outputs has no field '{}'", it.key()), "structured_outputs");
  }
  auto present = [&](const char* k) { return so.contains(k) && !so[k].is_null(); };
  const std::string p = "structured_outputs";
  if (present("json"))
    out.push_back({p + ".json", {GuideKind::kJson, schema_text(so["json"], p + ".json")}});
  if (present("regex"))
    out.push_back({p + ".regex", {GuideKind::kRegex, string_field(so["regex"], p + ".regex")}});
  if (present("choice"))
    out.push_back({p + ".choice", {GuideKind::kChoice, choice_text(so["choice"], p + ".choice")}});
  if (present("grammar"))
    out.push_back(
        {p + ".grammar", {GuideKind::kGrammar, string_field(so["grammar"], p + ".grammar")}});
  if (present("structural_tag"))
    out.push_back({p + ".structural_tag",
                   {GuideKind::kStructuralTag,
                    structural_tag_text(so["structural_tag"], p + ".structural_tag")}});
  if (present("json_object")) {
    if (!so["json_object"].is_boolean())
      fail("structured_outputs.json_object must be a boolean", p);
    if (so["json_object"].get<bool>())
      out.push_back({p + ".json_object", {GuideKind::kJsonObject, ""}});
  }
  if (present("whitespace_pattern"))
    ws = string_field(so["whitespace_pattern"], p + ".whitespace_pattern");
  for (const char* k :
       {"disable_any_whitespace", "disable_additional_properties", "disable_fallback"})
    if (present(k) && !so[k].is_boolean())
      fail(fmt::format("structured_outputs.{} must be a boolean", k), p);
  if (present("disable_any_whitespace")) no_ws = so["disable_any_whitespace"].get<bool>();
  if (present("disable_additional_properties"))
    no_additional = so["disable_additional_properties"].get<bool>();
  // disable_fallback: there is one backend and it never falls back.
}

void from_response_format(const json& rf, std::vector<Candidate>& out) {
  if (!rf.is_object()) fail("'response_format' must be an object", "response_format");
  const json* type = get(rf, "type");
  if (!type || !type->is_string())
    fail(
        "response_format.type is required ('text', 'json_object', 'json_schema' or "
        "'structural_tag')",
        "response_format");
  const std::string t = type->get<std::string>();
  if (t == "text") return;
  if (t == "json_object") {
    out.push_back({"response_format", {GuideKind::kJsonObject, ""}});
    return;
  }
  if (t == "json_schema") {
    const json* js = get(rf, "json_schema");
    if (!js || !js->is_object())
      fail(
          "response_format.json_schema is required for type 'json_schema' (an object with "
          "'schema')",
          "response_format");
    for (auto it = js->begin(); it != js->end(); ++it) {
      const std::string& k = it.key();
      if (k != "name" && k != "schema" && k != "strict" && k != "description")
        fail(fmt::format("response_format.json_schema has no field '{}'", k), "response_format");
    }
    const json* schema = get(*js, "schema");
    // No schema: a 400. vLLM's JsonSchemaResponseFormat has `schema`
    // optional, but what it does with None is no constraint to copy: older
    // versions dropped the constraint silently (GuidedDecodingParams.
    // from_optional(json=None) is None), the V1 engine fails the request
    // ("No valid structured output parameter found").
    if (!schema || schema->is_null())
      fail(
          "response_format.json_schema.schema is required for type 'json_schema' (the JSON "
          "schema the output must follow; for any JSON object use type 'json_object')",
          "response_format.json_schema.schema");
    out.push_back({"response_format", {GuideKind::kJson, schema_text(*schema, "response_format")}});
    return;
  }
  if (t == "structural_tag") {
    // vLLM's StructuralTagResponseFormat {structures, triggers}; its newer
    // {format} form (xgrammar's StructuralTag) is not supported.
    if (get(rf, "format"))
      fail(
          "response_format.format (xgrammar's structural tag format) is not supported; give "
          "'structures' and 'triggers'",
          "response_format");
    json tag = json::object();
    for (const char* k : {"structures", "triggers"})
      if (const json* v = get(rf, k)) tag[k] = *v;
    out.push_back({"response_format",
                   {GuideKind::kStructuralTag, structural_tag_text(tag, "response_format")}});
    return;
  }
  fail(fmt::format("response_format type must be 'text', 'json_object', 'json_schema' or "
                   "'structural_tag', got '{}'",
                   t),
       "response_format");
}

}  // namespace

void keep_schema_key_order(json& body, std::string_view text) {
  bool any = false;
  for (const auto& path : schema_paths()) {
    const json* v = at_path(body, path);
    any = any || (v && v->is_object());
  }
  if (!any) return;
  const ordered_json sent = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (sent.is_discarded()) return;
  for (const auto& path : schema_paths()) {
    json* v = at_path(body, path);
    const ordered_json* o = at_path(sent, path);
    if (v && v->is_object() && o && o->is_object())
      *v = o->dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  }
}

void keep_schema_key_order(ordered_json& body) {
  for (const auto& path : schema_paths())
    if (ordered_json* o = at_path(body, path); o && o->is_object())
      *o = o->dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

void parse_guided(const request_model::RequestFields& f, const ServingModel& model,
                  SamplingParams& sp) {
  std::vector<Candidate> cands;
  std::optional<std::string> ws;  // absent: the default pattern; "": no whitespace
  bool no_ws = false, no_additional = false;
  if (const json* v = f.value("guided_json"))
    cands.push_back({"guided_json", {GuideKind::kJson, schema_text(*v, "guided_json")}});
  if (const json* v = f.value("guided_regex"))
    cands.push_back({"guided_regex", {GuideKind::kRegex, string_field(*v, "guided_regex")}});
  if (const json* v = f.value("guided_choice"))
    cands.push_back({"guided_choice", {GuideKind::kChoice, choice_text(*v, "guided_choice")}});
  if (const json* v = f.value("guided_grammar"))
    cands.push_back({"guided_grammar", {GuideKind::kGrammar, string_field(*v, "guided_grammar")}});
  if (const json* v = f.value("structural_tag"))
    cands.push_back(
        {"structural_tag", {GuideKind::kStructuralTag, structural_tag_text(*v, "structural_tag")}});
  if (const json* v = f.value("guided_whitespace_pattern"))
    ws = string_field(*v, "guided_whitespace_pattern");
  if (const json* v = f.value("structured_outputs"))
    from_structured_outputs(*v, cands, ws, no_ws, no_additional);
  if (f.declares("response_format"))
    if (const json* v = f.value("response_format")) from_response_format(*v, cands);
  if (cands.empty()) return;
  if (cands.size() > 1)
    fail(fmt::format("only one kind of guided decoding may be given per request, got '{}' and '{}'",
                     cands[0].param, cands[1].param),
         cands[1].param);
  Candidate c = std::move(cands[0]);
  if (no_ws) {
    if (ws && !ws->empty())
      fail("structured_outputs.disable_any_whitespace cannot be combined with a whitespace pattern",
           "structured_outputs");
    ws = "";
  }
  if (ws) c.spec.whitespace_pattern = std::move(*ws);
  c.spec.disable_additional_properties = no_additional;
  if (!model.tokenizer) fail("guided decoding needs the model's tokenizer", c.param);
  try {
    sp.guide = guided::compile_guide(c.spec, guided::TokenVocab::of(model.tokenizer));
  } catch (const std::invalid_argument& e) {
    fail(fmt::format("invalid {}: {}", c.param, e.what()), c.param);
  }
  sp.guided_spec = std::make_shared<const GuideSpec>(std::move(c.spec));
}

}  // namespace pagoda::openai_fields
