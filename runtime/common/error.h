// Errors carry an exit class so that `main` maps every failure to a documented exit code.
// Codes 1-127 are permanent (retrying cannot help); 128-255 are retryable, so a PyTorchJob with
// `restartPolicy: ExitCode` restarts only what can succeed on retry. See docs/exit-codes.md.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tp {

enum class ExitCode : int {
  ok = 0,
  internal = 1,     // a bug in trainpoint: report it
  usage = 2,        // bad command-line arguments or environment
  spec = 3,         // the training spec is invalid
  source = 4,       // repository, ref, credentials or host key: fix the job's git settings
  data = 5,         // the dataset is missing, empty or malformed
  model = 6,        // the model cannot be built or loaded
  training = 7,     // training failed (for example the loss became NaN)
  output = 8,       // the output location cannot be written (permissions, bad path)
  requirements = 9,  // command mode: job.requirements cannot be installed (no such package, no build, torch)
  program = 10,      // command mode: the program failed (its own exit code 1-127 is in the message)
  interrupted = 143,  // SIGTERM/SIGINT: a checkpoint was saved, restart resumes
  network = 200,    // a transient network failure (git or S3) outlasted its retries
  storage = 201,    // local disk full or a storage service failing
  peer_lost = 202,  // another rank died or stalled
  program_retryable = 203,  // command mode: the program exited 128-255 or a signal (SIGKILL: out of memory) ended it
};

// Short name of an exit class, used in the final error line.
std::string_view exit_class_name(ExitCode code);
bool is_retryable(ExitCode code);

// A failure and, when it has one, its cause: the exception that was being handled when it was thrown
// (rethrow_as). what() is the chain as one line, "what failed: why underneath: deeper cause", joined when the
// error is built. The cause is a member rather than std::throw_with_nested's mix-in so that every
// `catch (const Error&)` reaches it without a dynamic_cast and what() needs no lazily built text.
class Error : public std::runtime_error {
 public:
  Error(ExitCode code, std::string message) : Error(code, std::move(message), nullptr) {}
  // `cause` may be null: an error of its own.
  Error(ExitCode code, std::string message, std::exception_ptr cause);
  ExitCode code() const { return code_; }
  // This error's own words, without its cause's.
  std::string_view message() const { return std::string_view(what(), message_size_); }
  // The exception underneath (null for none); std::rethrow_exception in a try block inspects it.
  const std::exception_ptr& cause() const { return cause_; }

 private:
  ExitCode code_;
  std::size_t message_size_;  // what() starts with the message
  std::exception_ptr cause_;
};

template <typename... Args>
[[noreturn]] void fail(ExitCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

// Inside a catch block: throws an Error of class `code` that says what failed, with the exception being
// handled as its cause. Pass the caught tp::Error's code() to keep its class.
template <typename... Args>
[[noreturn]] void rethrow_as(ExitCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...), std::current_exception());
}

}  // namespace tp
