#include "common/error.h"

namespace tp {
namespace {

// The message of this error followed by its cause's whole chain (a tp::Error's what() already holds its own).
std::string with_cause(const std::string& message, const std::exception_ptr& cause) {
  if (!cause) return message;
  try {
    std::rethrow_exception(cause);
  } catch (const std::exception& underneath) {
    return message + ": " + underneath.what();
  } catch (...) {
    return message + ": an exception that is not a std::exception";
  }
}

}  // namespace

Error::Error(ExitCode code, std::string message, std::exception_ptr cause)
    : std::runtime_error(with_cause(message, cause)),
      code_(code),
      message_size_(message.size()),
      cause_(std::move(cause)) {}

std::string_view exit_class_name(ExitCode code) {
  switch (code) {
    case ExitCode::ok: return "ok";
    case ExitCode::internal: return "internal error";
    case ExitCode::usage: return "usage error";
    case ExitCode::spec: return "spec error";
    case ExitCode::source: return "source error";
    case ExitCode::data: return "data error";
    case ExitCode::model: return "model error";
    case ExitCode::training: return "training error";
    case ExitCode::output: return "output error";
    case ExitCode::requirements: return "requirements error";
    case ExitCode::program: return "program error";
    case ExitCode::interrupted: return "interrupted";
    case ExitCode::network: return "network error";
    case ExitCode::storage: return "storage error";
    case ExitCode::peer_lost: return "peer lost";
    case ExitCode::program_retryable: return "program stopped";
  }
  return "unknown";
}

bool is_retryable(ExitCode code) { return static_cast<int>(code) >= 128; }

}  // namespace tp
