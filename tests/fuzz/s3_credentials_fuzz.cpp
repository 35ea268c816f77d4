// The S3 credential files on arbitrary bytes, through the real resolver (resolve_connection) with the
// environment pointing at one file. The first byte picks the file's role: a credentials file named by
// the spec (shell `export` lines or JSON, as the Vault agent renders them), the Vault agent's
// minio-<tenant> file, or AWS shared credentials and config files (INI). Invariants: resolving returns or
// throws tp::Error(usage); the endpoint is scheme://host without a trailing '/'; a returned key pair is
// complete; the credentials' source, which is logged, names the file and nothing read from it.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_support.h"
#include "s3/credentials.h"

using namespace tp;
namespace fs = std::filesystem;

namespace {

fs::path scratch;

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  scratch = fs::temp_directory_path() / ("tp-fuzz-credentials-" + std::to_string(::getpid()));
  fs::create_directories(scratch / "vault");
  for (const char* name : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                           "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL",
                           "S3_ENDPOINT_URL", "MINIO_URL", "TRAINPOINT_S3_TENANT", "AWS_CA_BUNDLE"}) {
    ::unsetenv(name);
  }
  ::setenv("TRAINPOINT_VAULT_SECRETS_DIR", (scratch / "vault").c_str(), 1);
  ::setenv("HOME", scratch.c_str(), 1);
  std::atexit([] {
    std::error_code error;
    fs::remove_all(scratch, error);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int role = data[0] % 3;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const fs::path named = scratch / "credentials";
  const fs::path vault = scratch / "vault" / "minio-standard";
  std::error_code error;
  fs::remove(vault, error);
  ::unsetenv("TRAINPOINT_S3_CREDENTIALS");
  ::unsetenv("AWS_SHARED_CREDENTIALS_FILE");
  ::unsetenv("AWS_CONFIG_FILE");
  if (role == 0) {
    write(named, text);
    ::setenv("TRAINPOINT_S3_CREDENTIALS", named.c_str(), 1);
  } else if (role == 1) {
    write(vault, text);
  } else {
    write(named, text);
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", named.c_str(), 1);
    ::setenv("AWS_CONFIG_FILE", named.c_str(), 1);
  }

  s3::Connection connection;
  if (!fuzz::returns_or_fails_with(ExitCode::usage, [&] { connection = s3::resolve_connection({}); })) return 0;
  const std::string& endpoint = connection.endpoint;
  const auto scheme = endpoint.find("://");
  TP_FUZZ_CHECK(scheme != std::string::npos && scheme > 0, endpoint);
  TP_FUZZ_CHECK(endpoint.back() != '/', endpoint);
  TP_FUZZ_CHECK(!connection.region.empty(), text);
  const auto& credentials = connection.credentials;
  if (!credentials.anonymous()) {
    TP_FUZZ_CHECK(!credentials.secret_access_key.empty(), text);
    // The source names the file, nothing read from it.
    const std::string expected = role == 0   ? "file " + named.string()
                                 : role == 1 ? "file " + vault.string()
                                             : "AWS shared file " + named.string() + " [default]";
    TP_FUZZ_CHECK(credentials.source == expected, "the logged source is " + credentials.source);
  }
  return 0;
}
