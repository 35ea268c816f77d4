#include "command/pip.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <regex>
#include <sstream>

#include "command/process.h"
#include "common/error.h"
#include "common/files.h"
#include "common/log.h"
#include "common/url.h"

namespace tp::command {
namespace {

namespace fs = std::filesystem;

std::string variable(const std::map<std::string, std::string>& environment, const std::string& name) {
  if (auto found = environment.find(name); found != environment.end()) return found->second;
  const char* value = std::getenv(name.c_str());
  return value == nullptr ? "" : value;
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

std::string first_match(const std::string& text, const std::regex& pattern) {
  std::smatch match;
  return std::regex_search(text, match, pattern) ? match[1].str() : "";
}

// The lines pip prints under "The conflict is caused by:", joined.
std::string conflict_causes(const std::string& output) {
  std::vector<std::string> causes;
  std::istringstream in(output);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (contains(line, "The conflict is caused by:")) {
      inside = true;
      continue;
    }
    if (!inside) continue;
    const auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos) break;
    causes.push_back(line.substr(start));
  }
  return fmt::format("{}", fmt::join(causes, "; "));
}

[[noreturn]] void refuse_torch(const std::string& name, const std::string& image_torch, const std::string& cause) {
  fail(ExitCode::requirements,
       "job.requirements {}: refused before installing anything: it would replace the image's torch {} ({}). "
       "trainpoint and the image's PyTorch share one LibTorch and NCCL, so the image's torch stays: remove the torch "
       "pin from {} (or pin torch=={}), pick versions of the packages that depend on torch that accept {}, or run an "
       "image built with the torch you need",
       name, image_torch, cause, name, image_torch, image_torch);
}

// pip failed: the message for its output, in trainpoint's classes.
[[noreturn]] void fail_install(const PipInstall& request, const std::string& output, int code,
                               const fs::path& log_file) {
  const std::string& name = request.requirements_name;
  const std::string log = fmt::format("pip's output: {}", log_file.string());
  if (!request.image_torch.empty() && std::regex_search(output, std::regex(R"(\(constraint\) torch==)"))) {
    refuse_torch(name, request.image_torch, conflict_causes(output));
  }
  if (contains(output, "No space left on device")) {
    fail(ExitCode::storage, "job.requirements {}: the disk is full while installing ({}): free space on the node's "
         "scratch", name, log);
  }
  if (contains(output, "SSLError") || contains(output, "CERTIFICATE_VERIFY_FAILED")) {
    fail(ExitCode::requirements, "job.requirements {}: the package index's certificate is not trusted: set PIP_CERT "
         "to its CA bundle (or PIP_TRUSTED_HOST) ({})", name, log);
  }
  if (contains(output, "401 Client Error") || contains(output, "403 Client Error") ||
      contains(output, "User for ")) {
    fail(ExitCode::requirements, "job.requirements {}: the package index refused access: check the credentials in "
         "PIP_INDEX_URL or pip.conf ({})", name, log);
  }
  static const char* const kUnreachable[] = {"NewConnectionError", "ConnectTimeoutError", "Connection refused",
                                             "Max retries exceeded", "Read timed out", "Temporary failure in name",
                                             "Name or service not known", "RemoteDisconnected", "ProxyError",
                                             "ConnectionResetError", "Server Error"};
  for (const char* marker : kUnreachable) {
    if (contains(output, marker)) {
      fail(ExitCode::network, "job.requirements {}: the package index did not answer ({}): a restart retries ({})",
           name, marker, log);
    }
  }
  const std::string missing = first_match(output, std::regex(R"(No matching distribution found for ([^\s]+))"));
  if (!missing.empty()) {
    fail(ExitCode::requirements, "job.requirements {}: no package '{}' on the package index (no such name, or no "
         "version that fits this Python and the other requirements): fix {} or the index (PIP_INDEX_URL) ({})",
         name, missing, name, log);
  }
  std::string broken = first_match(
      output, std::regex(R"((?:Failed building wheel for|Failed to build|Could not build wheels for|Running setup\.py install for) ([A-Za-z0-9._-]+))"));
  if (broken.empty() && contains(output, "metadata-generation-failed")) {
    std::string last;
    const std::regex collecting(R"(Collecting ([A-Za-z0-9._-]+))");
    for (std::sregex_iterator it(output.begin(), output.end(), collecting), end; it != end; ++it) last = (*it)[1];
    broken = last;
  }
  if (!broken.empty()) {
    fail(ExitCode::requirements, "job.requirements {}: package '{}' does not build here: its build failed (pip's "
         "last lines above; {}); pin a version with a wheel for this platform, or one that builds", name, broken, log);
  }
  fail(ExitCode::requirements, "job.requirements {}: pip failed with exit code {} (its last lines above; {})", name,
       code, log);
}

// "Successfully installed a-1.0 b-c-2.0" -> {"a 1.0", "b-c 2.0"}.
std::vector<std::string> installed_packages(const std::string& output) {
  std::vector<std::string> packages;
  std::smatch match;
  if (!std::regex_search(output, match, std::regex(R"(Successfully installed ([^\n]*))"))) return packages;
  for (const auto& word : words(match[1].str())) {
    const auto dash = word.rfind('-');
    packages.push_back(dash == std::string::npos ? word : word.substr(0, dash) + " " + word.substr(dash + 1));
  }
  return packages;
}

std::size_t discard(char*, std::size_t size, std::size_t count, void*) { return size * count; }

}  // namespace

std::string redact_urls(const std::string& text) {
  static const std::regex kUrl(R"([A-Za-z][A-Za-z0-9+.-]*://[^\s'"<>()]+)");
  std::string out;
  auto last = text.cbegin();
  for (std::sregex_iterator it(text.begin(), text.end(), kUrl), end; it != end; ++it) {
    out.append(last, text.cbegin() + it->position());
    out += redacted_url(it->str());
    last = text.cbegin() + it->position() + it->length();
  }
  out.append(last, text.cend());
  return out;
}

void check_torch_pins(const std::string& requirements_text, const std::string& name, const std::string& image_torch) {
  if (image_torch.empty()) return;
  static const std::regex kPin(R"(^\s*torch\s*(\[[^\]]*\])?\s*===?\s*([^\s;,#*]+)\s*([;#].*)?$)",
                               std::regex::icase);
  // "==1.13.1" also accepts the local versions 1.13.1+cu117 (PEP 440); "===" compares the text.
  const std::string image_public = image_torch.substr(0, image_torch.find('+'));
  std::istringstream in(requirements_text);
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    std::smatch match;
    if (!std::regex_match(line, match, kPin)) continue;
    const std::string version = match[2].str();
    const bool local = version.find('+') != std::string::npos;
    if (version == image_torch || (!local && version == image_public)) continue;
    refuse_torch(name, image_torch, fmt::format("{}:{} pins {}", name, number, line.substr(line.find_first_not_of(" \t"))));
  }
}

std::vector<std::string> pip_install(const PipInstall& request) {
  std::vector<std::string> arguments{"-m", "pip", "install", "--no-input", "--disable-pip-version-check",
                                     "--progress-bar", "off"};
  if (!request.image_torch.empty()) {
    // pip resolves everything before it installs anything: a requirement, direct or transitive, for
    // another torch fails the resolution, and nothing is installed.
    const fs::path constraints = request.work_dir / "trainpoint-constraints.txt";
    write_file_atomic(constraints, fmt::format("torch=={}\n", request.image_torch));
    arguments.insert(arguments.end(), {"--constraint", constraints.string()});
  }
  arguments.insert(arguments.end(), {"--requirement", request.requirements.string()});
  ProcessRequest process{request.python, arguments, {}};
  for (const auto& [name, value] : request.environment) process.environment[name] = value;
  process.environment["PIP_NO_INPUT"] = "1";
  process.environment["PYTHONUNBUFFERED"] = "1";
  const ProcessResult result = run_process(process);
  const std::string output = redact_urls(result.output);
  const fs::path log_file = request.work_dir / "trainpoint-pip.log";
  write_file_atomic(log_file, output);
  if (result.exit_code != 0) {
    for (const auto& line : last_lines(output, 12)) spdlog::warn("pip: {}", line);
    fail_install(request, output, result.exit_code, log_file);
  }
  return installed_packages(output);
}

std::string check_package_indexes(const std::map<std::string, std::string>& environment) {
  std::vector<std::string> indexes = words(variable(environment, "PIP_INDEX_URL"));
  for (const auto& extra : words(variable(environment, "PIP_EXTRA_INDEX_URL"))) indexes.push_back(extra);
  if (indexes.empty()) return "";
  const std::string certificates = variable(environment, "PIP_CERT");
  const std::vector<std::string> trusted = words(variable(environment, "PIP_TRUSTED_HOST"));
  std::vector<std::string> found;
  static const std::regex kHttp(R"(^https?://(?:[^@/]*@)?([^/:?#]+)(:[0-9]+)?)", std::regex::icase);
  for (const auto& index : indexes) {
    const std::string shown = redacted_url(index);
    std::smatch url;
    if (!std::regex_search(index, url, kHttp)) {
      found.push_back(fmt::format("{}: not over HTTP, left to pip", shown));
      continue;
    }
    const std::string host = url[1].str();
    const std::string host_port = host + url[2].str();
    const bool trust = std::find(trusted.begin(), trusted.end(), host) != trusted.end() ||
                       std::find(trusted.begin(), trusted.end(), host_port) != trusted.end();
    std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) fail(ExitCode::internal, "curl_easy_init failed");
    curl_easy_setopt(curl.get(), CURLOPT_URL, index.c_str());  // credentials in the URL are sent as pip sends them
    curl_easy_setopt(curl.get(), CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl.get(), CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, discard);
    if (!certificates.empty()) curl_easy_setopt(curl.get(), CURLOPT_CAINFO, certificates.c_str());
    if (trust) {
      curl_easy_setopt(curl.get(), CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(curl.get(), CURLOPT_SSL_VERIFYHOST, 0L);
    }
    const auto started = std::chrono::steady_clock::now();
    const CURLcode code = curl_easy_perform(curl.get());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (code != CURLE_OK) {
      if (code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE) {
        fail(ExitCode::requirements, "package index {}: {}: set PIP_CERT to its CA bundle (or PIP_TRUSTED_HOST)",
             shown, curl_easy_strerror(code));
      }
      fail(ExitCode::network, "package index {} does not answer: {}", shown, curl_easy_strerror(code));
    }
    long status = 0;
    curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &status);
    if (status == 401 || status == 403) {
      fail(ExitCode::requirements, "package index {} refused access (HTTP {}): check the credentials in the URL "
           "(PIP_INDEX_URL, PIP_EXTRA_INDEX_URL) or pip.conf", shown, status);
    }
    if (status >= 500) fail(ExitCode::network, "package index {} answers HTTP {}", shown, status);
    found.push_back(fmt::format("{} answers (HTTP {} in {:.2f}s)", shown, status, seconds));
  }
  return fmt::format("{}", fmt::join(found, "; "));
}

}  // namespace tp::command
