// The declaration of every spec setting: key, type, default, bounds, choices and documentation.
// Internal to the spec module; the loader, `check` and docs/spec.md all read this one table.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "spec/spec.h"

namespace tp::spec {

using Value = std::variant<bool, std::int64_t, double, std::string, std::vector<std::int64_t>, std::vector<std::string>,
                           std::map<std::string, std::string>>;

enum class Kind { boolean, integer, number, string, choice, integer_list, string_list, string_table };

struct Setting {
  std::string key;  // "section.name"
  Kind kind;
  std::optional<Value> default_value;  // empty: no default (required, or optional per `optional`)
  bool optional = false;               // may stay unset (an empty string or list)
  bool allow_auto = false;             // integer that also accepts "auto", stored as 0
  std::optional<double> min;           // for numbers, integers and list elements
  std::optional<double> max;
  bool min_exclusive = false;
  std::vector<std::string> choices;
  // Changing it makes another run: checkpoints written under the old value are not resumed
  // (docs/distributed.md, "Restarts"). Settings of speed, logging and placement leave the run as it is.
  bool changes_run = false;
  // For a table: checks the name of one entry (an environment variable, a label key); throws a spec error.
  std::function<void(const std::string& key, const std::string& name, const std::string& at)> check_entry;
  std::string doc;
  std::function<void(Spec&, const Value&)> assign;
  std::function<Value(const Spec&)> read;

  std::string section() const { return key.substr(0, key.find('.')); }
  std::string name() const { return key.substr(key.find('.') + 1); }
  // A choice between "true", "false" and others (such as "auto") also takes the TOML booleans.
  bool takes_booleans() const {
    return kind == Kind::choice && std::find(choices.begin(), choices.end(), "true") != choices.end();
  }
};

const std::vector<Setting>& settings();

// Whether command mode (job.command set) reads `setting`; describe shows only those in command mode.
bool used_in_command_mode(const Setting& setting);
const Setting* find_setting(const std::string& key);
std::string kind_name(const Setting& setting);
// A value as it would be written in TOML.
std::string to_toml(const Value& value);

}  // namespace tp::spec
