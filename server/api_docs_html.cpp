#include <nlohmann/json.hpp>

#include "engine/core/html_escape.h"
#include "server/api_docs.h"

namespace pagoda {

using nlohmann::json;

namespace {

std::string type_of(const json& schema) {
  if (schema.contains("type")) return schema["type"].get<std::string>();
  if (schema.contains("oneOf")) {
    std::string t;
    for (const json& alt : schema["oneOf"]) {
      if (!t.empty()) t += " | ";
      t += alt.value("type", std::string("any"));
      if (alt.contains("items")) t += " of " + type_of(alt["items"]);
    }
    return t;
  }
  return "any";
}

}  // namespace

std::string docs_html() {
  json spec = json::parse(openapi_json());
  std::string h =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Pagoda API</title>"
      "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}code{background:#eee}"
      "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}</style>"
      "</head><body>\n<h1>" + html_escape(spec["info"]["title"].get<std::string>()) + " API</h1>\n<p>" +
      html_escape(spec["info"]["description"].get<std::string>()) +
      "</p>\n<p>Machine-readable: <a href=\"/openapi.json\">/openapi.json</a> (OpenAPI 3).</p>\n";
  for (const auto& [path, ops] : spec["paths"].items()) {
    for (const auto& [method, op] : ops.items()) {
      std::string upper;
      for (char c : method) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      h += "<h2><code>" + upper + " " + html_escape(path) + "</code></h2>\n<p>" +
           html_escape(op.value("summary", std::string())) + "</p>\n";
      if (op.contains("requestBody")) {
        const json& schema = op["requestBody"]["content"]["application/json"]["schema"];
        h += "<table><tr><th>field</th><th>type</th><th>description</th></tr>\n";
        for (const auto& [name, p] : schema["properties"].items())
          h += "<tr><td><code>" + html_escape(name) + "</code></td><td>" + html_escape(type_of(p)) + "</td><td>" +
               html_escape(p.value("description", std::string())) + "</td></tr>\n";
        h += "</table>\n";
      }
      h += "<p>200: " + html_escape(op["responses"]["200"].value("description", std::string())) + "</p>\n";
    }
  }
  return h + "</body></html>\n";
}

}  // namespace pagoda
