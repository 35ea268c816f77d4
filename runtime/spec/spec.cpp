#include "spec/spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <string_view>
#include <toml++/toml.h>
#include <tuple>
#include <type_traits>
#include <variant>

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

// Names other tools give to trainpoint's settings (PyTorch, Hugging Face, Lightning, fastai), by setting name.
const std::map<std::string, std::string>& common_names() {
  static const std::map<std::string, std::string> names{
      {"learning_rate", "lr"}, {"base_lr", "lr"}, {"max_lr", "lr"},
      {"num_epochs", "epochs"}, {"n_epochs", "epochs"}, {"max_epochs", "epochs"}, {"num_train_epochs", "epochs"},
      {"bs", "batch_size"}, {"batch", "batch_size"}, {"per_device_train_batch_size", "batch_size"},
      {"train_batch_size", "batch_size"},
      {"wd", "weight_decay"}, {"optim", "optimizer"}, {"opt", "optimizer"},
      {"scheduler", "schedule"}, {"lr_scheduler", "schedule"}, {"lr_scheduler_type", "schedule"},
      {"lr_schedule", "schedule"}, {"warmup_ratio", "warmup"}, {"pct_start", "warmup"},
      {"gradient_accumulation_steps", "accumulate"}, {"accumulate_grad_batches", "accumulate"},
      {"grad_accum", "accumulate"}, {"max_grad_norm", "clip_norm"}, {"gradient_clip_val", "clip_norm"},
      {"grad_clip", "clip_norm"}, {"clip_grad_norm", "clip_norm"}, {"mixed_precision", "precision"},
      {"amp", "precision"}, {"fp16", "precision"}, {"bf16", "precision"},
      {"num_workers", "workers"}, {"dataloader_num_workers", "workers"},
      {"nproc", "nproc_per_node"}, {"nprocs", "nproc_per_node"}, {"gpus", "nproc_per_node"},
      {"architecture", "arch"}, {"model", "arch"}, {"backbone", "arch"}, {"pretrained", "weights"},
      {"checkpoint", "weights"}, {"img_size", "image_size"}, {"size", "image_size"}, {"resolution", "image_size"},
      {"data_dir", "source"}, {"path", "source"}, {"train_dir", "source"}, {"dataset", "source"},
      {"train", "source"}, {"valid_dir", "valid_source"}, {"val_dir", "valid_source"},
      {"validation", "valid_source"}, {"valid_pct", "valid"}, {"val_split", "valid"},
      {"validation_split", "valid"}, {"label", "target"}, {"label_column", "target"}, {"y", "target"},
      {"output_dir", "output"}, {"out_dir", "output"}, {"save_dir", "output"}, {"random_seed", "seed"},
      {"cmd", "command"}, {"script", "command"}, {"save_every", "every_epochs"}, {"resume_from", "resume"},
      {"save_total_limit", "keep"},
  };
  return names;
}

// The settings named `name` (in any section), the one in `section` first.
std::vector<const Setting*> settings_named(const std::string& name, const std::string& section) {
  std::vector<const Setting*> found;
  for (const auto& setting : settings()) {
    if (setting.name() != name) continue;
    if (setting.section() == section) {
      found.insert(found.begin(), &setting);
    } else {
      found.push_back(&setting);
    }
  }
  return found;
}

std::string suggestion_for(const std::string& unknown_key) {
  // A known name in the wrong section or without one ("epochs" for train.epochs), or another tool's name
  // for a setting ("learning_rate" for train.lr).
  const auto dot = unknown_key.find('.');
  const std::string section = dot == std::string::npos ? "" : unknown_key.substr(0, dot);
  std::string name = dot == std::string::npos ? unknown_key : unknown_key.substr(dot + 1);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  std::replace(name.begin(), name.end(), '-', '_');
  if (const auto common = common_names().find(name); common != common_names().end()) name = common->second;
  const std::vector<const Setting*> named = settings_named(name, section);
  if (!named.empty() && (named.front()->section() == section || named.size() == 1)) {
    return fmt::format(" (did you mean '{}'?)", named.front()->key);
  }
  if (!named.empty()) {
    std::vector<std::string> keys;
    for (const Setting* setting : named) keys.push_back("'" + setting->key + "'");
    return fmt::format(" (did you mean {}?)", fmt::join(keys, " or "));
  }
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
std::string type_of(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date or time";
  }
}

// The checks of one setting's value, and their messages naming where it was written (`at`).
[[noreturn]] void wrong_type(const Setting& setting, const std::string& at, std::string_view got) {
  fail(ExitCode::spec, "{}: {}: expected {}, got {}", at, setting.key, kind_name(setting), got);
}

void check_range(const Setting& setting, const std::string& at, double value) {
  const bool below = setting.min && (setting.min_exclusive ? value <= *setting.min : value < *setting.min);
  const bool over = setting.max && value > *setting.max;
  if (below || over || std::isnan(value)) {
    fail(ExitCode::spec, "{}: {}: {} is out of range: must be {} {} and <= {}", at, setting.key, value,
         setting.min_exclusive ? ">" : ">=", setting.min.value_or(0), setting.max.value_or(0));
  }
}

// Whether `value` is `choice`, or fills a choice with a placeholder ("f1:<class>": "f1:" and any name).
bool chooses(const std::string& choice, const std::string& value) {
  const std::size_t placeholder = choice.find('<');
  if (placeholder == std::string::npos) return value == choice;
  return value.size() > placeholder && value.compare(0, placeholder, choice, 0, placeholder) == 0;
}

// A setting without choices takes any string.
void check_choice(const Setting& setting, const std::string& at, const std::string& value) {
  if (setting.choices.empty() ||
      std::any_of(setting.choices.begin(), setting.choices.end(), [&](const auto& c) { return chooses(c, value); })) {
    return;
  }
  fail(ExitCode::spec, "{}: {}: '{}' is not one of: {}", at, setting.key, value, fmt::join(setting.choices, ", "));
}

// Kind::integer_list or Kind::string_list: each element checked as a value of its own would be.
Value convert_list(const Setting& setting, const toml::node& node, const std::string& at) {
  const auto* array = node.as_array();
  if (array == nullptr) wrong_type(setting, at, type_of(node));
  std::vector<std::int64_t> integers;
  std::vector<std::string> strings;
  for (const auto& element : *array) {
    if (setting.kind == Kind::integer_list && element.is_integer()) {
      integers.push_back(*element.value<std::int64_t>());
      check_range(setting, at, static_cast<double>(integers.back()));
    } else if (setting.kind == Kind::string_list && element.is_string()) {
      strings.push_back(*element.value<std::string>());
      check_choice(setting, at, strings.back());
    } else {
      wrong_type(setting, at, "an array holding " + type_of(element));
    }
  }
  if (setting.kind == Kind::integer_list) return integers;
  return strings;
}

// Kind::string_table: environment variables, whose values may be written as integers.
Value convert_table(const Setting& setting, const toml::node& node, const std::string& at) {
  const auto* table = node.as_table();
  if (table == nullptr) wrong_type(setting, at, type_of(node));
  std::map<std::string, std::string> values;
  for (const auto& [name_key, element] : *table) {
    const std::string name(name_key.str());
    // A file's entries are located by their own line; a --set table by the --set.
    const std::string entry_at = element.source().path ? where(*element.source().path, element.source()) : at;
    if (setting.check_entry) setting.check_entry(setting.key, name, entry_at);
    if (element.is_string()) {
      values[name] = *element.value<std::string>();
    } else if (element.is_integer()) {
      values[name] = std::to_string(*element.value<std::int64_t>());
    } else {
      fail(ExitCode::spec, "{}: {}.{}: expected a string, got {}", entry_at, setting.key, name, type_of(element));
    }
  }
  return values;
}

Value convert(const Setting& setting, const toml::node& node, const std::string& at) {
  switch (setting.kind) {
    case Kind::boolean:
      if (!node.is_boolean()) break;
      return *node.value<bool>();
    case Kind::integer: {
      if (setting.allow_auto && node.is_string() && *node.value<std::string>() == "auto") return std::int64_t{0};
      if (!node.is_integer()) break;
      const auto value = *node.value<std::int64_t>();
      check_range(setting, at, static_cast<double>(value));
      return value;
    }
    case Kind::number: {
      if (!node.is_number()) break;
      const double value = *node.value<double>();
      check_range(setting, at, value);
      return value;
    }
    case Kind::string:
      if (!node.is_string()) break;
      return *node.value<std::string>();
    case Kind::choice: {
      if (setting.takes_booleans() && node.is_boolean()) return std::string(*node.value<bool>() ? "true" : "false");
      if (!node.is_string()) break;
      const auto value = *node.value<std::string>();
      check_choice(setting, at, value);
      return value;
    }
    case Kind::integer_list:
    case Kind::string_list: return convert_list(setting, node, at);
    case Kind::string_table: return convert_table(setting, node, at);
  }
  wrong_type(setting, at, type_of(node));
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
  if (const auto* table = std::get_if<std::map<std::string, std::string>>(&value)) return !table->empty();
  return true;
}

// The most errors one message lists.
constexpr std::size_t kErrorsShown = 20;

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

  // `document_name` names the document in messages and origins; `only_section`, when given, is the one
  // section it may hold (the platform defaults hold [k8s] alone).
  void apply_document(std::string_view document, const std::string& document_name,
                      const std::string& only_section = "") {
    document_name_ = document_name;
    toml::table root;
    try {
      root = toml::parse(document, document_name_);
    } catch (const toml::parse_error& error) {
      rethrow_as(ExitCode::spec, "{}: invalid TOML", where(document_name_, error.source()));
    }
    // Every key is checked: the errors of a file are reported together, not one per run, in the file's order
    // (a table lists its keys sorted).
    std::vector<std::pair<toml::source_position, std::string>> found;
    const auto collect_at = [&](const toml::source_region& region, auto&& check) {
      const std::size_t before = errors_.size();
      collect(check);
      if (errors_.size() > before) {
        found.emplace_back(region.begin, std::move(errors_.back()));
        errors_.pop_back();
      }
    };
    // Named references, not structured bindings: C++17 lambdas cannot capture those (clang refuses).
    for (const auto& section_entry : root) {
      const toml::key& section_key = section_entry.first;
      const toml::node& section_node = section_entry.second;
      if (found.size() > kErrorsShown) break;  // enough to read; a generated file may hold millions
      const std::string section(section_key.str());
      const auto* table = section_node.as_table();
      if (table == nullptr) {
        const std::string at = where(document_name_, section_key.source());
        collect_at(section_key.source(), [&] {
          if (known_section(section)) {
            fail(ExitCode::spec, "{}: {}: expected a table ([{}]), got {}", at, section, section,
                 section_node.is_array() ? "an array" : "a value");
          }
          unknown_key(at, section);
        });
        continue;
      }
      if (!only_section.empty() && section != only_section) {
        collect_at(section_key.source(), [&] {
          fail(ExitCode::spec, "{}: [{}]: {} holds only [{}] settings; [{}] belongs in the training spec",
               where(document_name_, section_key.source()), section, document_name_, only_section, section);
        });
        continue;
      }
      apply_table(section, *table, collect_at);
      if (table->empty() && !known_section(section)) {
        collect_at(section_key.source(), [&] { unknown_key(where(document_name_, section_key.source()), section); });
      }
    }
    std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
      return std::tie(a.first.line, a.first.column) < std::tie(b.first.line, b.first.column);
    });
    for (auto& error : found) errors_.push_back(std::move(error.second));
  }

  // A metric that `data.task`'s runs report: mae and mse are regression's, the accuracies classification's.
  void check_metric_of_task(const std::string& key, const std::string& metric, const Spec& spec, const Origins& origin) {
    const bool regression = spec.data.task == Task::regression;
    const bool regression_metric = metric == "mae" || metric == "mse";
    const bool classification_metric = metric == "accuracy" || metric == "error_rate" ||
                                       metric == "top_k_accuracy" || metric.compare(0, 2, "f1") == 0;
    if ((regression && classification_metric) || (!regression && regression_metric)) {
      errors_.push_back(fmt::format("{}: {}: a {} run does not report {} (data.task, {}): use {}", origin.at(key), key,
                                    name(spec.data.task), metric, origin.at("data.task"),
                                    regression ? "valid_loss, mae or mse" : "valid_loss, accuracy, error_rate or f1"));
    }
  }

  // The entries of the table `prefix` names ([train], or [train.early_stop] inside it).
  template <typename CollectAt>
  void apply_table(const std::string& prefix, const toml::table& table, const CollectAt& collect_at) {
    for (const auto& entry : table) {
      const toml::key& name_key = entry.first;
      const toml::node& node = entry.second;
      const std::string key = prefix + "." + std::string(name_key.str());
      if (node.is_table() && holds_settings(key)) {
        apply_table(key, *node.as_table(), collect_at);
        continue;
      }
      collect_at(name_key.source(), [&] {
        const std::string at = where(document_name_, name_key.source());
        const Setting* setting = find_setting(key);
        if (setting == nullptr) unknown_key(at, key);
        set(*setting, convert(*setting, node, where(document_name_, node.source())), at);
      });
    }
  }
  // Whether `key` is a table of settings inside a section (train.early_stop).
  static bool holds_settings(const std::string& key) {
    return std::any_of(settings().begin(), settings().end(),
                       [&](const Setting& s) { return s.key.compare(0, key.size() + 1, key + ".") == 0; });
  }

  // Runs `check`; a spec error it throws is kept, to be reported with the others.
  template <typename Check>
  void collect(Check&& check) {
    try {
      check();
    } catch (const Error& error) {
      if (error.code() != ExitCode::spec) throw;
      errors_.emplace_back(error.what());
    }
  }

  // Throws the errors collected so far as one tp::Error (spec), one per line, the first one first.
  void throw_collected() const {
    if (errors_.empty()) return;
    const std::vector<std::string> shown(errors_.begin(), errors_.begin() + std::min(errors_.size(), kErrorsShown));
    fail(ExitCode::spec, "{}{}", fmt::join(shown, "\n"),
         errors_.size() > kErrorsShown ? fmt::format("\n(the first {} errors; there are more)", kErrorsShown) : "");
  }

  void apply_override(const std::string& assignment) {
    const auto equals = assignment.find('=');
    const std::string at = fmt::format("--set {}", assignment);
    if (equals == std::string::npos || equals == 0) {
      fail(ExitCode::spec, "{}: expected KEY=VALUE, for example --set train.lr=0.01", at);
    }
    const std::string key = assignment.substr(0, equals);
    const std::string text = assignment.substr(equals + 1);
    if (const Setting* table = table_holding(key)) {
      // job.env.NAME=value: one entry of a table, taken as it is (a string).
      const std::string name = key.substr(table->key.size() + 1);
      if (table->check_entry) table->check_entry(table->key, name, at);
      // The value is not shown: an environment entry may hold a secret.
      if (!valid_utf8(text)) fail(ExitCode::spec, "--set {}=...: {}: the value is not valid UTF-8", key, key);
      auto entries = std::get<std::map<std::string, std::string>>(table->read(loaded_.spec));
      entries[name] = text;
      set(*table, entries, "--set");
      return;
    }
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

  const Spec& spec() const { return loaded_.spec; }

  LoadedSpec finish() {
    // Settings that could not be read leave defaults behind: checks of how settings go together would
    // report mistakes that are not there.
    throw_collected();
    const Spec& spec = loaded_.spec;
    // In command mode the user's program reads its own data and builds its own model.
    const bool command_mode = !spec.job.command.empty();
    for (const auto& setting : settings()) {
      if (command_mode && (setting.section() == "data" || setting.section() == "model")) continue;
      if (!setting.default_value && !setting.optional && !is_set(setting.read(spec))) {
        errors_.push_back(fmt::format("{}: missing required key '{}': {}", source_name_, setting.key, setting.doc));
      }
    }
    check_combinations(spec, command_mode);
    throw_collected();
    return std::move(loaded_);
  }

  // How settings go together; each mistake is collected.
  void check_combinations(const Spec& spec, bool command_mode) {
    const auto& origin = loaded_.origins;
    for (const char* key : {"job.requirements", "job.env"}) {
      const auto set_at = origin.find(key);  // an optional setting has no origin until it is set
      if (!command_mode && set_at != origin.end() && set_at->second != "default") {
        errors_.push_back(fmt::format("{}: {} is for command mode: set job.command to the program it is for",
                                      set_at->second, key));
      }
    }
    if (!spec.job.requirements.empty() && (std::filesystem::path(spec.job.requirements).is_absolute() ||
                                           spec.job.requirements.find("..") != std::string::npos)) {
      errors_.push_back(fmt::format("{}: job.requirements: '{}' must be a path inside the repository, such as "
                                    "\"requirements.txt\"", origin.at("job.requirements"), spec.job.requirements));
    }
    if (!command_mode && spec.model.arch.empty() && spec.model.torchscript.empty()) {
      errors_.push_back(fmt::format(
          "{}: [model] needs 'model.arch' (a built-in architecture) or 'model.torchscript'", source_name_));
    }
    if (!command_mode && !spec.model.arch.empty() && !spec.model.torchscript.empty()) {
      errors_.push_back(fmt::format("{}: model.torchscript conflicts with model.arch ({}): set only one of them",
                                    origin.at("model.torchscript"), origin.at("model.arch")));
    }
    if (!spec.data.valid_source.empty() && origin.at("data.valid") != "default") {
      errors_.push_back(fmt::format("{}: data.valid conflicts with data.valid_source ({}): set only one of them",
                                    origin.at("data.valid"), origin.at("data.valid_source")));
    }
    if (spec.data.channels == 2) {
      errors_.push_back(
          fmt::format("{}: data.channels: 2 is not one of: 1 (grayscale), 3 (RGB)", origin.at("data.channels")));
    }
    if (spec.train.nesterov && (spec.train.optimizer != Optimizer::sgd || spec.train.momentum == 0)) {
      errors_.push_back(fmt::format(
          "{}: train.nesterov = true needs train.optimizer = \"sgd\" ({}: \"{}\") and train.momentum > 0 ({}: {})",
          origin.at("train.nesterov"), origin.at("train.optimizer"), name(spec.train.optimizer), origin.at("train.momentum"),
          spec.train.momentum));
    }
    if (spec.train.freeze_epochs > spec.train.epochs) {
      errors_.push_back(fmt::format("{}: train.freeze_epochs ({}) is more than train.epochs ({}: {})",
                                    origin.at("train.freeze_epochs"), spec.train.freeze_epochs,
                                    origin.at("train.epochs"), spec.train.epochs));
    }
    if (!command_mode && spec.train.early_stop.patience > 0) {
      check_metric_of_task("train.early_stop.monitor", spec.train.early_stop.monitor, spec, origin);
    }
    if (!command_mode && spec.train.reduce_lr_on_plateau.patience > 0) {
      check_metric_of_task("train.reduce_lr_on_plateau.monitor", spec.train.reduce_lr_on_plateau.monitor, spec,
                           origin);
    }
    if (!command_mode && spec.checkpoint.keep_best != "none") {
      check_metric_of_task("checkpoint.keep_best", spec.checkpoint.keep_best, spec, origin);
    }
    if (!reads_images(spec.data.format) && spec.model.arch == "small_cnn") {
      errors_.push_back(
          fmt::format("{}: model.arch 'small_cnn' needs images, but data.format is 'table_csv' ({}): use 'mlp'",
                      origin.at("model.arch"), origin.at("data.format")));
    }
  }

 private:
  // The table setting that `key` names an entry of (job.env.NAME), if any.
  static const Setting* table_holding(const std::string& key) {
    for (const auto& setting : settings()) {
      if (setting.kind == Kind::string_table && key.size() > setting.key.size() + 1 &&
          key.compare(0, setting.key.size() + 1, setting.key + ".") == 0) {
        return &setting;
      }
    }
    return nullptr;
  }
  static bool known_section(const std::string& section) {
    return std::any_of(settings().begin(), settings().end(), [&](const Setting& s) { return s.section() == section; });
  }
  void set(const Setting& setting, const Value& value, const std::string& origin) {
    setting.assign(loaded_.spec, value);
    loaded_.origins[setting.key] = origin;
  }

  std::string source_name_;    // the spec's file
  std::string document_name_;  // the document being applied: the platform defaults or the spec
  LoadedSpec loaded_;
  std::vector<std::string> errors_;  // spec errors found so far, reported together
};

LoadedSpec load(std::string_view document, const std::vector<std::string>& overrides, const std::string& source_name,
                const std::optional<PlatformDefaults>& platform) {
  Loader loader(source_name);
  if (platform) loader.apply_document(platform->document, platform->source_name, "k8s");
  loader.apply_document(document, source_name);
  for (const auto& assignment : overrides) loader.collect([&] { loader.apply_override(assignment); });
  return loader.finish();
}

}  // namespace

// What command mode reads: the job, where the data comes from, the processes, the preflight's rendezvous
// wait and render-job's settings. The rest (the seed and /metrics too) belongs to trainpoint's own training.
bool used_in_command_mode(const Setting& setting) {
  static const char* const kKeys[] = {"data.source", "data.endpoint", "data.credentials", "dist.nproc_per_node",
                                      "dist.timeout_s"};
  const bool training_only = setting.key == "job.seed" || setting.key == "job.metrics_port";
  return (setting.section() == "job" && !training_only) || setting.section() == "k8s" || setting.section() == "notify" ||
         std::find(std::begin(kKeys), std::end(kKeys), setting.key) != std::end(kKeys);
}

Spec defaults() { return Loader("defaults").spec(); }

LoadedSpec load_string(std::string_view document, const std::vector<std::string>& overrides,
                       const std::string& source_name, const std::optional<PlatformDefaults>& platform) {
  return load(document, overrides, source_name, platform);
}

LoadedSpec load_file(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                     const std::string& source_name, const std::optional<PlatformDefaults>& platform) {
  if (std::filesystem::is_directory(file)) fail(ExitCode::spec, "{}: is a directory, not a TOML spec", source_name);
  if (!std::filesystem::exists(file)) fail(ExitCode::spec, "{}: spec file not found", source_name);
  std::string document;
  try {
    document = read_file(file, ExitCode::spec);
  } catch (const Error&) {
    rethrow_as(ExitCode::spec, "{}", source_name);
  }
  return load(document, overrides, source_name, platform);
}

std::string describe(const LoadedSpec& loaded) {
  const bool command_mode = !loaded.spec.job.command.empty();
  std::string out;
  if (command_mode) {
    out += "# command mode: the settings your program's run uses; [train], [model], [checkpoint] and the other "
           "[data] and [dist] settings are not used\n";
  }
  std::string section;
  for (const auto& setting : settings()) {
    if (command_mode && !used_in_command_mode(setting)) continue;
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

std::vector<RunSetting> run_settings(const Spec& spec) {
  std::vector<RunSetting> values;
  for (const auto& setting : settings()) {
    if (!setting.changes_run) continue;
    if (setting.key == "data.valid" && !spec.data.valid_source.empty()) continue;  // ignored then
    // Off, its settings do nothing (and a run from before they existed resumes).
    if (setting.key.rfind("train.reduce_lr_on_plateau.", 0) == 0 && spec.train.reduce_lr_on_plateau.patience == 0) {
      continue;
    }
    const Value value = setting.read(spec);
    RunSetting run_setting{setting.key, to_toml(value), {}};
    run_setting.value = run_setting.toml;  // a list or table, unless what it holds is simpler
    std::visit(
        [&](const auto& held) {
          using Held = std::decay_t<decltype(held)>;
          if constexpr (std::is_same_v<Held, bool> || std::is_same_v<Held, std::int64_t> ||
                        std::is_same_v<Held, double> || std::is_same_v<Held, std::string>) {
            run_setting.value = held;
          }
        },
        value);
    values.push_back(std::move(run_setting));
  }
  return values;
}

std::string markdown_reference() {
  std::string out =
      "# Training spec reference\n\n"
      "<!-- Generated by `trainpoint spec-reference` from runtime/spec/settings.cpp; a test keeps it in step. -->\n\n"
      "A spec is a TOML file in your repository. Values resolve in this order: built-in defaults, then, for "
      "render-job and submit, the platform's [k8s] defaults (the file TRAINPOINT_PLATFORM_DEFAULTS names, else "
      "/etc/trainpoint/platform.toml), then the file, then `--set key=value` on the command line (or "
      "`TRAINPOINT_SET`). Unknown keys are errors, and "
      "every error of a file is reported at once. `trainpoint check FILE` prints the resolved spec and where each value came from. "
      "Settings marked *(run)* change what a run computes: a restart resumes only checkpoints written with the "
      "same values, and `train.epochs` may be raised to continue a run (docs/distributed.md, \"Restarts\").\n";
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
    out += fmt::format("| `{}` | {} | {} | {} | {}{} |\n", setting.key, kind_name(setting), fallback, allowed,
                       setting.changes_run ? "*(run)* " : "", setting.doc);
  }
  return out;
}

}  // namespace tp::spec
