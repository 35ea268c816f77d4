// The spec loader on arbitrary bytes: the TOML document, then up to three --set overrides after NUL
// bytes. Invariants: loading returns or throws tp::Error(spec) whose message starts with where the
// problem is (the file name or the --set); a spec that loads is described (`trainpoint check`) as TOML
// that loads again to the same values.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "spec/settings.h"
#include "spec/spec.h"

using namespace tp;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parts = fuzz::split_input(data, size, 4);
  const std::string& document = parts[0];
  const std::vector<std::string> overrides(parts.begin() + 1, parts.end());

  spec::LoadedSpec loaded;
  try {
    loaded = spec::load_string(document, overrides, "train.toml");
  } catch (const Error& error) {
    const std::string message = error.what();
    TP_FUZZ_CHECK(error.code() == ExitCode::spec, message);
    // "--set KEY=VALUE: ..." for one override, "--set: ..." for a check of settings given with --set.
    TP_FUZZ_CHECK(message.rfind("train.toml", 0) == 0 || message.rfind("--set", 0) == 0, message);
    return 0;
  } catch (const std::exception& error) {
    fuzz::violated("an exception other than tp::Error escaped the spec loader", error.what());
  }

  const std::string description = spec::describe(loaded);
  spec::LoadedSpec again;
  try {
    again = spec::load_string(description, {}, "described.toml");
  } catch (const std::exception& error) {
    fuzz::violated("the description of a loaded spec does not load", std::string(error.what()) + "\n" + description);
  }
  const bool command_mode = !loaded.spec.job.command.empty();
  for (const auto& setting : spec::settings()) {
    if (command_mode && !spec::used_in_command_mode(setting)) continue;  // not described, so not read back
    TP_FUZZ_CHECK(setting.read(loaded.spec) == setting.read(again.spec),
                  setting.key + " changed through describe:\n" + description);
  }
  return 0;
}
