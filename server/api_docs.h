// The API's description: GET /openapi.json serves server/openapi.json (an
// OpenAPI 3.0 document written by hand, embedded into the binary at build
// time, so an installed binary needs no source tree), and GET /docs a small
// self-contained HTML page listing its routes and request fields (no
// scripts or network fetches).
#pragma once
#include <string>
#include <string_view>

namespace pagoda {

// The embedded OpenAPI document (valid JSON).
std::string_view openapi_json();

// The /docs page, rendered from openapi_json().
std::string docs_html();

}  // namespace pagoda
