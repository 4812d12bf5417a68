// Checks of command-line values in the manner of Python's argparse (what
// vLLM's CLIs use), for CLI11 commands: `pagoda serve`, `pagoda generate`
// and pagoda-bench. Header-only, so loadtest/ shares it without linking the
// server library.
//
// argparse converts every occurrence of an option with its `type` and stops
// at the first that does not convert ("argument --port: invalid int value:
// 'abc'", exit 2), even when a later occurrence replaces it. CLI11 with
// MultiOptionPolicy::TakeLast (a repeated option keeps its last value, as
// argparse) converts only the value it keeps, so `--port abc --port 8126`
// served and `--max-tokens 5 --max-tokens abc` said "Could not convert:
// --max-tokens = 5,abc". CLI11 runs an option's validators on every
// occurrence, so a validator that converts is argparse's check.
#pragma once
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>

namespace pagoda::cli {

inline constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

namespace detail {

inline std::string check_int(std::string& text, int64_t lo, int64_t hi, const std::string& why) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (begin != end && *begin == '+') ++begin;
  int64_t v = 0;
  const auto [at, ec] = std::from_chars(begin, end, v);
  const bool whole = at == end && ec != std::errc::invalid_argument;
  if (!whole || begin == end) return fmt::format("invalid int value: '{}'", text);
  if (ec != std::errc::result_out_of_range && v >= lo && v <= hi) {
    text = fmt::format("{}", v);
    return "";
  }
  const std::string suffix = why.empty() ? "" : fmt::format(" ({})", why);
  if (lo == kInt64Min && hi == kInt64Max)
    return fmt::format("{} is beyond the range of a 64-bit integer{}", text, suffix);
  if (hi == kInt64Max) return fmt::format("must be >= {}, got {}{}", lo, text, suffix);
  if (lo == kInt64Min) return fmt::format("must be <= {}, got {}{}", hi, text, suffix);
  return fmt::format("must be in [{}, {}], got {}{}", lo, hi, text, suffix);
}

// "" and the value in *v, or argparse's message.
inline std::string parse_float(const std::string& text, double* v) {
  char* end = nullptr;
  *v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    return fmt::format("invalid float value: '{}'", text);
  return "";
}

}  // namespace detail

// An integer option's value in [lo, hi], checked on the text as given
// (CLI11 2.1 alone reads an out-of-range number as INT64_MAX, "-1" as
// UINT64_MAX for an unsigned option, "010" as octal and "0x10" as hex).
// Messages (CLI11 puts the flag first: "--port: ..."): "invalid int value:
// 'abc'" (argparse's), "must be in [0, 65535], got 70000" (">= lo" alone
// when hi is kInt64Max), then " (why)" when given. Where it may modify the
// text (CLI11's check() makes a validator read-only), it rewrites it in
// decimal ("+2", "010" become "2", "10", as Python's int() reads them), so
// CLI11 converts exactly what was checked; check_every_occurrence's own
// check does that last for every integer option.
inline CLI::Validator int_in(int64_t lo, int64_t hi, std::string why = "") {
  return CLI::Validator(
      [lo, hi, why](std::string& text) { return detail::check_int(text, lo, hi, why); },
      hi == kInt64Max ? fmt::format("INT >= {}", lo) : fmt::format("INT in [{}, {}]", lo, hi));
}

// A floating-point option's value in [lo, hi]: "invalid float value:
// 'abc'" (argparse's), "must be in [0, 3600], got -1" (NaN is in no range).
inline CLI::Validator float_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) {
        double v = 0;
        std::string why = detail::parse_float(text, &v);
        if (why.empty() && !(v >= lo && v <= hi))
          why = fmt::format("must be in [{}, {}], got {}", lo, hi, text);
        return why;
      },
      fmt::format("FLOAT in [{}, {}]", lo, hi));
}

// Gives every option of `app` (not its subcommands) that takes numbers the
// argparse check of each occurrence: by CLI11's type name, INT any 64-bit
// integer, UINT one >= 0, FLOAT any float (NaN included, as argparse; the
// option's own range checks, if any, refuse it). Call it after the options
// are added; the range checks an option already has run first. Options
// that take text (TEXT) and flags need none.
inline void check_every_occurrence(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_items_expected_max() == 0) continue;  // a flag
    const std::string type = opt->get_type_name();
    const std::string_view base = std::string_view(type).substr(0, type.find(':'));
    // Last, after the option's own checks (AsSizeValue's "1GiB" becomes a
    // number first); no description, so the help shows the type alone.
    // Added by check() (appended), then made free to rewrite the text.
    const char* kName = "argparse-type";
    if (base == "INT" || base == "UINT") {
      const int64_t lo = base == "UINT" ? 0 : kInt64Min;
      opt->check(
          CLI::Validator(
              [lo](std::string& text) { return detail::check_int(text, lo, kInt64Max, ""); }, ""),
          kName);
    } else if (base == "FLOAT") {
      opt->check(CLI::Validator(
                     [](std::string& text) {
                       double v = 0;
                       return detail::parse_float(text, &v);
                     },
                     ""),
                 kName);
    } else {
      continue;
    }
    opt->get_validator(kName)->non_modifying(false);
  }
}

}  // namespace pagoda::cli
