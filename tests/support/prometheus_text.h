// A strict parser of the Prometheus text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/ and the Go
// reference parser, prometheus/common expfmt/text_parse.go), for tests.
// Throws std::runtime_error naming the line on anything the format does not
// allow or that contradicts the family's type:
//   - metric names [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*
//     (not starting "__"), label values "..." with only \\ \" \n escapes,
//     no duplicate label names, values as Go's ParseFloat (incl. NaN, ±Inf),
//     optional integer timestamp;
//   - "# HELP" / "# TYPE" at most once per family, TYPE before its samples,
//     types counter | gauge | histogram | summary | untyped;
//   - a family's samples contiguous; no duplicate series;
//   - counter: sample name == family name, value >= 0;
//     histogram: only <name>_bucket (with le), _sum, _count; per label set
//     le strictly increasing, cumulative counts non-decreasing, a "+Inf"
//     bucket equal to _count.
#pragma once
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace pagoda::testing_prom {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Family {
  std::string name;
  std::string type = "untyped";
  std::string help;
  bool typed = false;
  std::vector<Sample> samples;
};

struct Exposition {
  std::map<std::string, Family> families;
  // The first sample `name` whose labels include `match`; throws if none.
  double value(const std::string& name, const std::map<std::string, std::string>& match = {}) const {
    for (const auto& [fname, f] : families)
      for (const Sample& s : f.samples) {
        if (s.name != name) continue;
        bool ok = true;
        for (const auto& [k, v] : match) {
          auto it = s.labels.find(k);
          if (it == s.labels.end() || it->second != v) ok = false;
        }
        if (ok) return s.value;
      }
    throw std::runtime_error("no sample " + name);
  }
};

namespace detail {

inline bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
inline bool name_char(char c) { return name_start(c) || std::isdigit(static_cast<unsigned char>(c)); }

inline void fail(size_t line_no, const std::string& line, const std::string& why) {
  throw std::runtime_error("metrics line " + std::to_string(line_no) + ": " + why + ": '" + line + "'");
}

inline double parse_value(const std::string& v, size_t n, const std::string& line) {
  if (v == "NaN") return std::nan("");
  if (v == "+Inf" || v == "Inf") return INFINITY;
  if (v == "-Inf") return -INFINITY;
  if (v.empty()) fail(n, line, "missing value");
  for (char c : v)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      fail(n, line, "bad value '" + v + "'");
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (end != v.c_str() + v.size()) fail(n, line, "bad value '" + v + "'");
  return d;
}

// The family a sample belongs to, given the declared types.
inline std::string family_of(const std::string& sample, const std::map<std::string, Family>& fams) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    std::string s = suffix;
    if (sample.size() > s.size() && sample.compare(sample.size() - s.size(), s.size(), s) == 0) {
      std::string base = sample.substr(0, sample.size() - s.size());
      auto it = fams.find(base);
      if (it != fams.end() && (it->second.type == "histogram" || it->second.type == "summary")) return base;
    }
  }
  // "<counter>_total" under "# TYPE <counter> counter" (OpenMetrics naming
  // in a 0.0.4 exposition): attributed to that counter, whose name check
  // then rejects it.
  const std::string total = "_total";
  if (sample.size() > total.size() && sample.compare(sample.size() - total.size(), total.size(), total) == 0) {
    auto it = fams.find(sample.substr(0, sample.size() - total.size()));
    if (it != fams.end() && it->second.type == "counter") return it->first;
  }
  return sample;
}

}  // namespace detail

inline Exposition parse_prometheus_text(const std::string& text) {
  using namespace detail;
  Exposition ex;
  auto& fams = ex.families;
  std::set<std::string> closed;  // families whose sample block has ended
  std::string current;           // family of the previous sample
  std::set<std::string> series;
  std::istringstream in(text);
  std::string line;
  size_t n = 0;
  if (!text.empty() && text.back() != '\n') throw std::runtime_error("metrics text does not end with a newline");
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream ls(line.substr(1));
      std::string kw, name;
      ls >> kw;
      if (kw != "HELP" && kw != "TYPE") continue;  // a plain comment
      if (line.compare(0, 2 + kw.size() + 1, "# " + kw + " ") != 0) fail(n, line, "malformed " + kw + " line");
      ls >> name;
      if (name.empty() || !name_start(name[0])) fail(n, line, "bad metric name");
      for (char c : name)
        if (!name_char(c)) fail(n, line, "bad metric name");
      Family& f = fams[name];
      f.name = name;
      if (!f.samples.empty()) fail(n, line, kw + " after the family's samples");
      std::string rest;
      std::getline(ls, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      if (kw == "TYPE") {
        static std::set<std::string> types{"counter", "gauge", "histogram", "summary", "untyped"};
        if (!types.count(rest)) fail(n, line, "unknown type");
        if (f.typed) fail(n, line, "second TYPE");
        f.typed = true;
        f.type = rest;
      } else {
        if (!f.help.empty()) fail(n, line, "second HELP");
        f.help = rest.empty() ? " " : rest;
      }
      continue;
    }
    // A sample.
    size_t i = 0;
    Sample s;
    if (!name_start(line[0])) fail(n, line, "bad metric name");
    while (i < line.size() && name_char(line[i])) ++i;
    s.name = line.substr(0, i);
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (true) {
        if (i < line.size() && line[i] == '}') {
          ++i;
          break;
        }
        size_t start = i;
        if (i >= line.size() || !(std::isalpha(static_cast<unsigned char>(line[i])) || line[i] == '_'))
          fail(n, line, "bad label name");
        while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_')) ++i;
        std::string lname = line.substr(start, i - start);
        if (lname.rfind("__", 0) == 0) fail(n, line, "reserved label name");
        if (i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') fail(n, line, "expected =\"");
        i += 2;
        std::string val;
        while (true) {
          if (i >= line.size()) fail(n, line, "unterminated label value");
          char c = line[i++];
          if (c == '"') break;
          if (c == '\\') {
            if (i >= line.size()) fail(n, line, "dangling escape");
            char e = line[i++];
            if (e == '\\') val += '\\';
            else if (e == '"') val += '"';
            else if (e == 'n') val += '\n';
            else fail(n, line, "bad escape");
          } else {
            val += c;
          }
        }
        if (!s.labels.emplace(lname, val).second) fail(n, line, "duplicate label " + lname);
        if (i < line.size() && line[i] == ',') {
          ++i;
          continue;
        }
        if (i < line.size() && line[i] == '}') {
          ++i;
          break;
        }
        fail(n, line, "expected , or }");
      }
    }
    if (i >= line.size() || line[i] != ' ') fail(n, line, "expected a space before the value");
    std::istringstream vs(line.substr(i + 1));
    std::string value, ts, extra;
    vs >> value >> ts >> extra;
    if (!extra.empty()) fail(n, line, "trailing text");
    s.value = parse_value(value, n, line);
    if (!ts.empty())
      for (char c : ts)
        if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '-')) fail(n, line, "bad timestamp");

    std::string fam = family_of(s.name, fams);
    if (fam != current) {
      if (closed.count(fam)) fail(n, line, "samples of family " + fam + " are not contiguous");
      if (!current.empty()) closed.insert(current);
      current = fam;
    }
    Family& f = fams[fam];
    f.name = fam;
    std::string key = s.name;
    for (const auto& [k, v] : s.labels) key += "\x1f" + k + "=" + v;
    if (!series.insert(key).second) fail(n, line, "duplicate series");
    if (f.type == "counter") {
      if (s.name != fam) fail(n, line, "counter sample name differs from its family");
      if (!(s.value >= 0)) fail(n, line, "negative counter");
    }
    if (f.type == "histogram") {
      if (s.name == fam) fail(n, line, "a histogram has only _bucket, _sum and _count samples");
      if (s.name == fam + "_bucket" && !s.labels.count("le")) fail(n, line, "bucket without le");
    }
    f.samples.push_back(std::move(s));
  }
  // Histogram consistency, per label set (le excluded).
  for (const auto& [name, f] : fams) {
    if (f.type != "histogram") continue;
    std::map<std::string, std::vector<std::pair<double, double>>> buckets;
    std::map<std::string, double> counts;
    for (const Sample& s : f.samples) {
      std::string key;
      for (const auto& [k, v] : s.labels)
        if (k != "le") key += k + "=" + v + ",";
      if (s.name == name + "_bucket") {
        buckets[key].push_back({parse_value(s.labels.at("le"), 0, s.labels.at("le")), s.value});
      } else if (s.name == name + "_count") {
        counts[key] = s.value;
      }
    }
    for (const auto& [key, b] : buckets) {
      for (size_t k = 1; k < b.size(); ++k) {
        if (!(b[k].first > b[k - 1].first)) throw std::runtime_error(name + ": le not increasing");
        if (b[k].second < b[k - 1].second) throw std::runtime_error(name + ": bucket counts decrease");
      }
      if (b.empty() || !std::isinf(b.back().first)) throw std::runtime_error(name + ": no +Inf bucket");
      if (!counts.count(key) || counts.at(key) != b.back().second)
        throw std::runtime_error(name + ": +Inf bucket differs from _count");
    }
  }
  return ex;
}

}  // namespace pagoda::testing_prom
