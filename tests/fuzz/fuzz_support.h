// Shared by the libFuzzer targets: invariant checks that abort (libFuzzer then saves the input as a
// crash), and the rule every parser of outside input follows: it returns, or throws tp::Error of its
// documented exit class. Any other exception escaping is a bug, and so a crash.
#pragma once

#include <spdlog/spdlog.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace tp::fuzz {

[[noreturn]] inline void violated(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz invariant violated: %s\n%s\n", what, detail.c_str());
  std::fflush(stderr);
  std::abort();
}

#define TP_FUZZ_CHECK(condition, detail) \
  do {                                   \
    if (!(condition)) ::tp::fuzz::violated(#condition, (detail)); \
  } while (0)

// Runs `parse`; returns true when it returned, false when it threw tp::Error of class `expected`.
// Aborts on an Error of another class or on any other exception.
template <typename Parse>
bool returns_or_fails_with(ExitCode expected, Parse&& parse) {
  try {
    parse();
    return true;
  } catch (const Error& error) {
    if (error.code() != expected) {
      violated("tp::Error of an unexpected exit class",
               std::string(exit_class_name(error.code())) + ": " + error.what());
    }
    return false;
  } catch (const std::exception& error) {
    violated("an exception other than tp::Error escaped", error.what());
  }
}

// Splits the input at NUL bytes (at most `max_parts` parts; the last one keeps any further NULs).
inline std::vector<std::string> split_input(const std::uint8_t* data, std::size_t size, std::size_t max_parts) {
  std::vector<std::string> parts;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (parts.size() + 1 < max_parts) {
    const auto nul = rest.find('\0');
    if (nul == std::string_view::npos) break;
    parts.emplace_back(rest.substr(0, nul));
    rest.remove_prefix(nul + 1);
  }
  parts.emplace_back(rest);
  return parts;
}

// Logging off: the parsers warn about what they skip, which would flood the fuzzer's output.
inline void quiet_logs() { spdlog::set_level(spdlog::level::off); }

}  // namespace tp::fuzz
