// Guided decoding fields of a generation request (vLLM's structured
// outputs, vllm/entrypoints/openai/protocol.py and sampling_params.py
// StructuredOutputsParams): guided_json (a schema object or its JSON text),
// guided_regex, guided_choice (a list of strings), guided_grammar,
// structural_tag, guided_whitespace_pattern, structured_outputs {json, regex,
// choice, grammar, json_object, whitespace_pattern, disable_any_whitespace,
// disable_additional_properties, disable_fallback, structural_tag}, and
// response_format {type: json_object} / {type: json_schema, json_schema:
// {name, schema, strict, description}} / {type: structural_tag, structures,
// triggers}. A structural tag (engine/guided/structural_tag.h) is the JSON
// text of {structures: [{begin, schema, end}], triggers} in structural_tag /
// structured_outputs.structural_tag (as vLLM; the object is accepted too),
// or those fields of response_format. At most one constraint per request
// (400 naming both otherwise). The constraint is compiled here
// (engine/guided/guide.h, cached across requests) so an invalid regex,
// schema, choice list, grammar (guided_grammar / structured_outputs.grammar:
// EBNF/GBNF, engine/guided/ebnf_grammar.h) or structural tag is a 400
// naming the field and the problem before anything runs.
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

#include "engine/sample/sampling_params.h"
#include "server/serving_model.h"

namespace pagoda::request_model {
class RequestFields;
}

namespace pagoda::openai_fields {

// Fills sp.guided_spec and sp.guide (both null without a constraint).
// Throws RequestFieldError (400) via fail().
void parse_guided(const request_model::RequestFields& fields, const ServingModel& model,
                  SamplingParams& sp);

// A JSON schema's "properties" order is the order the generated object's
// keys take (vLLM's backends, xgrammar and outlines, keep the schema's
// order), but nlohmann::json, which parses request bodies, sorts an
// object's keys. So where a request was parsed from `text` into `body`
// (HTTP bodies, WebSocket messages, `pagoda generate`'s JSON lines and
// --sampling-params), this replaces each schema object at guided_json,
// structured_outputs.json and response_format.json_schema.schema by its
// JSON text with the keys in the order `text` sent them (the fields take a
// schema's text as well as the object). The text is parsed a second time
// (as ordered_json) only when one of them holds an object; `text` must be
// the JSON that `body` was parsed from.
void keep_schema_key_order(nlohmann::json& body, std::string_view text);
// The same for a body that kept its key order (offline requests): each
// schema object there becomes its JSON text, so that it keeps that order
// once the body is read into a nlohmann::json.
void keep_schema_key_order(nlohmann::ordered_json& body);

}  // namespace pagoda::openai_fields
