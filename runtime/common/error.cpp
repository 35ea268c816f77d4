#include "common/error.h"

namespace tp {

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
