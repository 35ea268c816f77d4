// Git remote URLs (the spec's repository, submodules' URLs from .gitmodules) on arbitrary bytes, and the
// redaction used for every log line and message that shows one. Two modes, by the first byte:
//  - raw: the bytes are the URL. parse_remote_url returns or throws tp::Error(source); the password it
//    finds survives neither in its `url` (which is logged and stored) nor in redacted_url().
//  - built: the bytes give the parts of SCHEME://USER:PASSWORD@HOST/PATH, with a password that holds a
//    marker. Whatever the parts, the marker survives neither parse_remote_url's `url`, nor
//    redacted_url(), nor a resolved submodule URL's redaction, nor any error message.
#include <cstdint>
#include <string>

#include "common/url.h"
#include "fuzz_support.h"
#include "git/remote_url.h"

using namespace tp;

namespace {

constexpr char kMarker[] = "pw7Qz9SECRET";

bool holds(const std::string& text, const std::string& part) { return !part.empty() && text.find(part) != std::string::npos; }

// The authority of SCHEME://AUTHORITY/PATH (where a password would be); the path may hold anything.
std::string authority_of(const std::string& url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return url.substr(0, url.find('/'));
  const std::string rest = url.substr(scheme_end + 3);
  return rest.substr(0, rest.find('/'));
}

void raw(const std::string& url) {
  git::RemoteUrl remote;
  if (fuzz::returns_or_fails_with(ExitCode::source, [&] { remote = git::parse_remote_url(url); })) {
    if (!remote.password.empty() && remote.password != "***") {  // "***" is what redaction writes
      const std::string userinfo = ":" + remote.password + "@";
      TP_FUZZ_CHECK(!holds(authority_of(remote.url), userinfo), url + " -> " + remote.url);
      TP_FUZZ_CHECK(!holds(authority_of(redacted_url(url)), userinfo), url + " -> " + redacted_url(url));
    }
  } else {
    redacted_url(url);
  }
  std::string resolved;
  if (fuzz::returns_or_fails_with(ExitCode::source,
                                  [&] { resolved = git::resolve_submodule_url("https://host/group/repo.git", url); })) {
    TP_FUZZ_CHECK(url.rfind("./", 0) == 0 || url.rfind("../", 0) == 0 || resolved == url, url);
  }
}

void built(const std::string& bytes) {
  const auto parts = fuzz::split_input(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), 5);
  auto part = [&](std::size_t i) { return i < parts.size() ? parts[i] : std::string(); };
  static const char* const schemes[] = {"https", "http", "ssh", "git", "git+ssh", "ftp", "file"};
  const std::string scheme = schemes[(bytes.empty() ? 0 : static_cast<unsigned char>(bytes[0])) % 7];
  // A user name and host hold no '@', '/' or ':' (those would end them); the password holds no '/'
  // (that would start the path: the rest is then no password, RFC 3986).
  auto without = [](std::string text, const std::string& characters) {
    std::string out;
    for (char c : text) {
      if (characters.find(c) == std::string::npos) out += c;
    }
    return out;
  };
  const std::string user = without(part(1), "@/:");
  const std::string password = without(part(2), "/") + kMarker;
  const std::string host = without(part(3), "@/");
  const std::string path = part(4);
  if (holds(user + host + path, kMarker) || holds(path, "pw7Qz9")) return;  // the marker must be the password's
  const std::string url = scheme + "://" + user + ":" + password + "@" + host + "/" + path;

  TP_FUZZ_CHECK(!holds(redacted_url(url), kMarker), url + " -> " + redacted_url(url));
  try {
    const git::RemoteUrl remote = git::parse_remote_url(url);
    TP_FUZZ_CHECK(!holds(remote.url, kMarker), url + " -> url " + remote.url);
    TP_FUZZ_CHECK(!holds(remote.host, kMarker) && !holds(remote.user, kMarker), url + " -> host " + remote.host);
    const std::string submodule = git::resolve_submodule_url(url, "../other.git");
    TP_FUZZ_CHECK(!holds(redacted_url(submodule), kMarker), submodule);
  } catch (const Error& error) {
    TP_FUZZ_CHECK(error.code() == ExitCode::source, error.what());
    TP_FUZZ_CHECK(!holds(error.what(), kMarker), std::string("the message shows the password: ") + error.what());
  } catch (const std::exception& error) {
    fuzz::violated("an exception other than tp::Error escaped", error.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    raw(rest);
  } else {
    built(rest);
  }
  return 0;
}
