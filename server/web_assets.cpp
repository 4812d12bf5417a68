#include "server/web_assets.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace pagoda {

namespace fs = std::filesystem;
namespace http = boost::beast::http;

std::string resolve_web_dir(const std::string& given) {
  if (!given.empty()) {
    if (!fs::is_regular_file(fs::path(given) / "index.html"))
      throw std::runtime_error(fmt::format("--web-dir {}: no index.html there", given));
    return fs::absolute(given).string();
  }
  std::vector<fs::path> candidates;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path dir = exe.parent_path();
    candidates = {dir / "web", dir.parent_path() / "web", dir.parent_path() / "share" / "pagoda" / "web"};
  }
  candidates.push_back(fs::path(PAGODA_SOURCE_DIR) / "web");
  for (const fs::path& c : candidates)
    if (fs::is_regular_file(c / "index.html", ec)) return c.lexically_normal().string();
  return {};
}

namespace {

const char* content_type_for(std::string_view ext) {
  if (ext == "html") return "text/html; charset=utf-8";
  if (ext == "js") return "text/javascript; charset=utf-8";
  if (ext == "css") return "text/css; charset=utf-8";
  if (ext == "svg") return "image/svg+xml";
  if (ext == "png") return "image/png";
  if (ext == "ico") return "image/x-icon";
  if (ext == "json") return "application/json";
  return nullptr;
}

// "/name.ext" with a safe name and a known extension → "name.ext".
std::optional<std::string> asset_name(std::string_view path) {
  if (path == "/") return "index.html";
  if (path.size() < 2 || path[0] != '/' || path.size() > 128) return std::nullopt;
  std::string_view name = path.substr(1);
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return std::nullopt;
  if (name.front() == '.' || name.find("..") != std::string_view::npos) return std::nullopt;
  size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || !content_type_for(name.substr(dot + 1))) return std::nullopt;
  return std::string(name);
}

}  // namespace

std::optional<RouteResult> route_frontend(http::verb method, std::string_view path, const ServerContext& ctx) {
  if (path == "/v1/ws" && ctx.streams) {
    RouteResult r = RouteResult::error(
        make_error(426, "/v1/ws is a WebSocket endpoint: send GET with 'Connection: Upgrade' and "
                        "'Upgrade: websocket' (docs/WEBSOCKET.md)"));
    r.headers.emplace_back("Upgrade", "websocket");
    return r;
  }
  if (ctx.web_dir.empty() || method != http::verb::get) return std::nullopt;
  std::optional<std::string> name = asset_name(path);
  if (!name) return std::nullopt;
  fs::path file = fs::path(ctx.web_dir) / *name;
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;  // not ours: the router's 404 (or another route)
  std::ostringstream body;
  body << in.rdbuf();
  RouteResult r;
  r.content_type = content_type_for(name->substr(name->rfind('.') + 1));
  r.body = body.str();
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

}  // namespace pagoda
