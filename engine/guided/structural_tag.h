// Structural tags: vLLM's `structural_tag` structured output (response_format
// {"type": "structural_tag", "structures": [...], "triggers": [...]}, or the
// same object as JSON text in structured_outputs.structural_tag), with the
// semantics of xgrammar's Grammar.from_structural_tag(tags, triggers):
//
//   The output is free text until it reaches one of the trigger strings;
//   from there it must continue with the rest of the `begin` of a structure
//   whose begin starts with that trigger, then a JSON value valid under that
//   structure's schema, then its `end`; after the end, free text again
//   (any number of structures). The output may end anywhere in free text
//   (an unfinished trigger prefix included), never inside a structure.
//
// Example: triggers ["<function="], structures [{begin "<function=get_weather>",
// schema {...}, end "</function>"}, {begin "<function=get_time>", ...}]:
// "I'll check.<function=get_weather>{\"city\": \"Paris\"}</function> Done."
//
// Free text is any bytes that contain no trigger. When several triggers
// end at one byte (one is a suffix of the other), the longest fires. The
// triggers must be non-empty and none a prefix of another (xgrammar's rule;
// an exact repeat is dropped); every trigger must begin some structure and
// every begin must start with a trigger. A missing or null schema means any
// JSON value (json_schema_to_regex of {}). Schemas compile as guided_json's
// do (json_schema_regex.h: the same keywords, whitespace pattern and
// additionalProperties option).
//
// The automaton is one byte DFA (a regular language): an Aho-Corasick
// automaton over the triggers scans the free text (its states: the longest
// suffix of the text that is a prefix of a trigger); the state where a
// trigger completes continues into the alternation, over that trigger's
// structures, of (rest of begin)(schema regex)(end), whose end returns to
// the scanner's root. NfaBuilder (regex_dfa.h) assembles that NFA and the
// subset construction determinizes it, so masks, precomputation and the
// guide cache work as for any DFA guide (guide.h).
#pragma once
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/guided/regex_dfa.h"

namespace pagoda::guided {

// An invalid structural tag; what() names the field ("structures[1].begin
// ...", "triggers[0] ...").
class StructuralTagError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct StructuralTagItem {
  std::string begin;
  std::string schema;  // JSON schema text; "" = any JSON value
  std::string end;
};

struct StructuralTag {
  std::vector<StructuralTagItem> structures;
  std::vector<std::string> triggers;  // deduplicated, in the order given
};

// Reads and checks vLLM's object: {"type": "structural_tag" (optional),
// "structures": [{"begin", "schema", "end"}, ...], "triggers": [...]}. Other
// keys are errors naming them (xgrammar's newer {"type": "structural_tag",
// "format": {...}} form included: not supported). Throws StructuralTagError.
StructuralTag parse_structural_tag(const nlohmann::json& value);
// The same from JSON text (bad JSON: StructuralTagError).
StructuralTag parse_structural_tag(std::string_view json_text);

// The canonical JSON text of `tag` ({"structures": [...], "triggers": [...]};
// the guide cache's key).
std::string structural_tag_json(const StructuralTag& tag);

// The DFA of the outputs `tag` allows. Schemas compile with
// json_schema_to_regex(schema, whitespace_pattern,
// disable_additional_properties). Throws StructuralTagError: naming the
// structure whose schema is invalid, or a tag whose automaton passes
// kMaxDfaStates (the states of all the structures' schemas add up: e.g.
// ~15 schemas of 2,000 states).
ByteDfa structural_tag_dfa(const StructuralTag& tag, std::string_view whitespace_pattern,
                           bool disable_additional_properties = false);

}  // namespace pagoda::guided
