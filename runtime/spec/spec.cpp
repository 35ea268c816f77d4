#include "spec/spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <toml++/toml.h>

#include "common/error.h"
#include "common/files.h"
#include "spec/settings.h"

namespace tp::spec {
namespace {

std::string where(const std::string& source_name, const toml::source_region& region) {
  return fmt::format("{}:{}:{}", source_name, region.begin.line, region.begin.column);
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> previous(b.size() + 1), current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string suggestion_for(const std::string& unknown_key) {
  const Setting* nearest = nullptr;
  std::size_t best = std::string::npos;
  for (const auto& setting : settings()) {
    const std::size_t distance = edit_distance(unknown_key, setting.key);
    if (distance < best) {
      best = distance;
      nearest = &setting;
    }
  }
  if (nearest == nullptr || best > std::max<std::size_t>(3, unknown_key.size() / 3)) return "";
  return fmt::format(" (did you mean '{}'?)", nearest->key);
}

[[noreturn]] void unknown_key(const std::string& at, const std::string& key) {
  fail(ExitCode::spec, "{}: unknown key '{}'{}", at, key, suggestion_for(key));
}

// Converts one TOML node to the setting's type and checks its bounds. `at` locates it in messages.
Value convert(const Setting& setting, const toml::node& node, const std::string& at) {
  auto type_error = [&](std::string_view got) -> Value {
    fail(ExitCode::spec, "{}: {}: expected {}, got {}", at, setting.key, kind_name(setting), got);
  };
  auto type_of = [](const toml::node& n) -> std::string {
    switch (n.type()) {
      case toml::node_type::string: return "a string";
      case toml::node_type::integer: return "an integer";
      case toml::node_type::floating_point: return "a number";
      case toml::node_type::boolean: return "a boolean";
      case toml::node_type::array: return "an array";
      case toml::node_type::table: return "a table";
      default: return "a date or time";
    }
  };
  auto check_range = [&](double value) {
    const bool below = setting.min && (setting.min_exclusive ? value <= *setting.min : value < *setting.min);
    const bool over = setting.max && value > *setting.max;
    if (below || over || std::isnan(value)) {
      fail(ExitCode::spec, "{}: {}: {} is out of range: must be {} {} and <= {}", at, setting.key, value,
           setting.min_exclusive ? ">" : ">=", setting.min.value_or(0), setting.max.value_or(0));
    }
  };

  switch (setting.kind) {
    case Kind::boolean:
      if (!node.is_boolean()) return type_error(type_of(node));
      return *node.value<bool>();
    case Kind::integer: {
      if (setting.allow_auto && node.is_string() && *node.value<std::string>() == "auto") return std::int64_t{0};
      if (!node.is_integer()) return type_error(type_of(node));
      const auto value = *node.value<std::int64_t>();
      check_range(static_cast<double>(value));
      return value;
    }
    case Kind::number: {
      if (!node.is_number()) return type_error(type_of(node));
      const double value = *node.value<double>();
      check_range(value);
      return value;
    }
    case Kind::string:
      if (!node.is_string()) return type_error(type_of(node));
      return *node.value<std::string>();
    case Kind::choice: {
      if (setting.takes_booleans() && node.is_boolean()) return std::string(*node.value<bool>() ? "true" : "false");
      if (!node.is_string()) return type_error(type_of(node));
      const auto value = *node.value<std::string>();
      if (std::find(setting.choices.begin(), setting.choices.end(), value) == setting.choices.end()) {
        fail(ExitCode::spec, "{}: {}: '{}' is not one of: {}", at, setting.key, value, fmt::join(setting.choices, ", "));
      }
      return value;
    }
    case Kind::integer_list: {
      const auto* array = node.as_array();
      if (array == nullptr) return type_error(type_of(node));
      std::vector<std::int64_t> values;
      for (const auto& element : *array) {
        if (!element.is_integer()) return type_error("an array holding " + type_of(element));
        values.push_back(*element.value<std::int64_t>());
        check_range(static_cast<double>(values.back()));
      }
      return values;
    }
    case Kind::string_list: {
      const auto* array = node.as_array();
      if (array == nullptr) return type_error(type_of(node));
      std::vector<std::string> values;
      for (const auto& element : *array) {
        if (!element.is_string()) return type_error("an array holding " + type_of(element));
        values.push_back(*element.value<std::string>());
        if (!setting.choices.empty() &&
            std::find(setting.choices.begin(), setting.choices.end(), values.back()) == setting.choices.end()) {
          fail(ExitCode::spec, "{}: {}: '{}' is not one of: {}", at, setting.key, values.back(),
               fmt::join(setting.choices, ", "));
        }
      }
      return values;
    }
  }
  return type_error(type_of(node));
}

// Well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF), as TOML requires.
bool valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const std::size_t length = byte < 0x80 ? 1 : byte >= 0xC2 && byte <= 0xDF ? 2 : byte >= 0xE0 && byte <= 0xEF ? 3
                               : byte >= 0xF0 && byte <= 0xF4 ? 4 : 0;
    if (length == 0 || i + length > text.size()) return false;
    std::uint32_t code_point = length == 1 ? byte : byte & (0x7F >> length);
    for (std::size_t j = 1; j < length; ++j) {
      const auto next = static_cast<unsigned char>(text[i + j]);
      if ((next & 0xC0) != 0x80) return false;
      code_point = (code_point << 6) | (next & 0x3F);
    }
    const std::uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code_point < smallest[length] || code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF)) {
      return false;
    }
    i += length;
  }
  return true;
}

bool is_set(const Value& value) {
  if (const auto* text = std::get_if<std::string>(&value)) return !text->empty();
  return true;
}

class Loader {
 public:
  explicit Loader(std::string source_name) : source_name_(std::move(source_name)) {
    for (const auto& setting : settings()) {
      if (setting.default_value) {
        setting.assign(loaded_.spec, *setting.default_value);
        loaded_.origins[setting.key] = "default";
      } else {
        setting.assign(loaded_.spec, setting.kind == Kind::integer_list ? Value(std::vector<std::int64_t>{})
                                     : setting.kind == Kind::string_list ? Value(std::vector<std::string>{})
                                                                         : Value(std::string()));
      }
    }
    loaded_.source_name = source_name_;
  }

  void apply_document(std::string_view document) {
    toml::table root;
    try {
      root = toml::parse(document, source_name_);
    } catch (const toml::parse_error& error) {
      fail(ExitCode::spec, "{}: invalid TOML: {}", where(source_name_, error.source()), error.description());
    }
    for (const auto& [section_key, section_node] : root) {
      const std::string section(section_key.str());
      const auto* table = section_node.as_table();
      if (table == nullptr) {
        const std::string at = where(source_name_, section_key.source());
        if (known_section(section)) {
          fail(ExitCode::spec, "{}: {}: expected a table ([{}]), got {}", at, section, section,
               section_node.is_array() ? "an array" : "a value");
        }
        unknown_key(at, section);
      }
      for (const auto& [name_key, node] : *table) {
        const std::string key = section + "." + std::string(name_key.str());
        const std::string at = where(source_name_, name_key.source());
        const Setting* setting = find_setting(key);
        if (setting == nullptr) unknown_key(at, key);
        set(*setting, convert(*setting, node, where(source_name_, node.source())), at);
      }
      if (table->empty() && !known_section(section)) {
        unknown_key(where(source_name_, section_key.source()), section);
      }
    }
  }

  void apply_override(const std::string& assignment) {
    const auto equals = assignment.find('=');
    const std::string at = fmt::format("--set {}", assignment);
    if (equals == std::string::npos || equals == 0) {
      fail(ExitCode::spec, "{}: expected KEY=VALUE, for example --set train.lr=0.01", at);
    }
    const std::string key = assignment.substr(0, equals);
    const std::string text = assignment.substr(equals + 1);
    const Setting* setting = find_setting(key);
    if (setting == nullptr) unknown_key(at, key);
    // The value is read as a TOML value; a bare word for a string setting is taken as the string.
    toml::table parsed;
    try {
      parsed = toml::parse("value = " + text);
    } catch (const toml::parse_error&) {
      if (setting->kind != Kind::string && setting->kind != Kind::choice && !setting->allow_auto) {
        fail(ExitCode::spec, "{}: {}: '{}' is not a valid {}", at, key, text, kind_name(*setting));
      }
      // Like a TOML file, a bare word must be UTF-8 (the description would otherwise not load).
      if (!valid_utf8(text)) fail(ExitCode::spec, "{}: {}: the value is not valid UTF-8", at, key);
      parsed.insert_or_assign("value", text);
    }
    set(*setting, convert(*setting, *parsed.get("value"), at), "--set");
  }

  LoadedSpec finish() {
    const Spec& spec = loaded_.spec;
    // In command mode the user's program reads its own data and builds its own model.
    const bool command_mode = !spec.job.command.empty();
    for (const auto& setting : settings()) {
      if (command_mode && (setting.section() == "data" || setting.section() == "model")) continue;
      if (!setting.default_value && !setting.optional && !is_set(setting.read(spec))) {
        fail(ExitCode::spec, "{}: missing required key '{}': {}", source_name_, setting.key, setting.doc);
      }
    }
    if (!command_mode && spec.model.arch.empty() == spec.model.torchscript.empty()) {
      if (spec.model.arch.empty()) {
        fail(ExitCode::spec, "{}: [model] needs 'model.arch' (a built-in architecture) or 'model.torchscript'",
             source_name_);
      }
      fail(ExitCode::spec, "{}: model.torchscript conflicts with model.arch ({}): set only one of them",
           loaded_.origins.at("model.torchscript"), loaded_.origins.at("model.arch"));
    }
    if (!spec.data.valid_source.empty() && loaded_.origins.at("data.valid") != "default") {
      fail(ExitCode::spec, "{}: data.valid conflicts with data.valid_source ({}): set only one of them",
           loaded_.origins.at("data.valid"), loaded_.origins.at("data.valid_source"));
    }
    if (spec.data.channels == 2) {
      fail(ExitCode::spec, "{}: data.channels: 2 is not one of: 1 (grayscale), 3 (RGB)", loaded_.origins.at("data.channels"));
    }
    if (spec.train.nesterov && (spec.train.optimizer != "sgd" || spec.train.momentum == 0)) {
      fail(ExitCode::spec,
           "{}: train.nesterov = true needs train.optimizer = \"sgd\" ({}: \"{}\") and train.momentum > 0 ({}: {})",
           loaded_.origins.at("train.nesterov"), loaded_.origins.at("train.optimizer"), spec.train.optimizer,
           loaded_.origins.at("train.momentum"), spec.train.momentum);
    }
    if (spec.train.freeze_epochs > spec.train.epochs) {
      fail(ExitCode::spec, "{}: train.freeze_epochs ({}) is more than train.epochs ({}: {})",
           loaded_.origins.at("train.freeze_epochs"), spec.train.freeze_epochs, loaded_.origins.at("train.epochs"),
           spec.train.epochs);
    }
    if (spec.data.format == "table_csv" && spec.model.arch == "small_cnn") {
      fail(ExitCode::spec, "{}: model.arch 'small_cnn' needs images, but data.format is 'table_csv' ({}): use 'mlp'",
           loaded_.origins.at("model.arch"), loaded_.origins.at("data.format"));
    }
    return std::move(loaded_);
  }

 private:
  static bool known_section(const std::string& section) {
    return std::any_of(settings().begin(), settings().end(), [&](const Setting& s) { return s.section() == section; });
  }
  void set(const Setting& setting, const Value& value, const std::string& origin) {
    setting.assign(loaded_.spec, value);
    loaded_.origins[setting.key] = origin;
  }

  std::string source_name_;
  LoadedSpec loaded_;
};

LoadedSpec load(std::string_view document, const std::vector<std::string>& overrides, const std::string& source_name) {
  Loader loader(source_name);
  loader.apply_document(document);
  for (const auto& assignment : overrides) loader.apply_override(assignment);
  return loader.finish();
}

}  // namespace

LoadedSpec load_string(std::string_view document, const std::vector<std::string>& overrides,
                       const std::string& source_name) {
  return load(document, overrides, source_name);
}

LoadedSpec load_file(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                     const std::string& source_name) {
  if (std::filesystem::is_directory(file)) fail(ExitCode::spec, "{}: is a directory, not a TOML spec", source_name);
  if (!std::filesystem::exists(file)) fail(ExitCode::spec, "{}: spec file not found", source_name);
  std::string document;
  try {
    document = read_file(file, ExitCode::spec);
  } catch (const Error& error) {
    fail(ExitCode::spec, "{}: {}", source_name, error.what());
  }
  return load(document, overrides, source_name);
}

std::string describe(const LoadedSpec& loaded) {
  std::string out;
  std::string section;
  for (const auto& setting : settings()) {
    if (setting.section() != section) {
      section = setting.section();
      out += fmt::format("{}[{}]\n", out.empty() ? "" : "\n", section);
    }
    const Value value = setting.read(loaded.spec);
    std::string text = to_toml(value);
    if (setting.allow_auto && std::get<std::int64_t>(value) == 0) text = "\"auto\"";
    if (!is_set(value)) {
      out += fmt::format("# {} is unset\n", setting.name());
      continue;
    }
    // Written out, it would conflict with valid_source when the description is loaded again.
    if (setting.key == "data.valid" && !loaded.spec.data.valid_source.empty()) {
      out += fmt::format("# {} is ignored: data.valid_source is set\n", setting.name());
      continue;
    }
    const std::string line = fmt::format("{} = {}", setting.name(), text);
    out += fmt::format("{:<40} # {}\n", line, loaded.origins.count(setting.key) ? loaded.origins.at(setting.key) : "unset");
  }
  return out;
}

std::string markdown_reference() {
  std::string out =
      "# Training spec reference\n\n"
      "<!-- Generated by `trainpoint spec-reference` from runtime/spec/settings.cpp; a test keeps it in step. -->\n\n"
      "A spec is a TOML file in your repository. Values resolve in this order: built-in defaults, then the file, "
      "then `--set key=value` on the command line (or `TRAINPOINT_SET`). Unknown keys are errors. "
      "`trainpoint check --spec FILE` prints the resolved spec and where each value came from.\n";
  std::string section;
  for (const auto& setting : settings()) {
    if (setting.section() != section) {
      section = setting.section();
      out += fmt::format("\n## [{}]\n\n| key | type | default | allowed | description |\n|---|---|---|---|---|\n", section);
    }
    std::string fallback = setting.default_value ? "`" + to_toml(*setting.default_value) + "`"
                           : setting.optional    ? "unset"
                                                 : "**required**";
    if (setting.allow_auto && setting.default_value && std::get<std::int64_t>(*setting.default_value) == 0) {
      fallback = "`\"auto\"`";
    }
    std::string allowed;
    if (!setting.choices.empty()) {
      std::vector<std::string> quoted;
      for (const auto& choice : setting.choices) quoted.push_back("`" + choice + "`");
      allowed = fmt::format("{}", fmt::join(quoted, ", "));
    } else if (setting.min || setting.max) {
      allowed = fmt::format("{} {}{} .. {}", setting.kind == Kind::integer_list ? "each" : "",
                            setting.min_exclusive ? "> " : "", setting.min.value_or(0), setting.max.value_or(0));
      if (setting.allow_auto) allowed += ", or `\"auto\"`";
    }
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", setting.key, kind_name(setting), fallback, allowed, setting.doc);
  }
  return out;
}

}  // namespace tp::spec
