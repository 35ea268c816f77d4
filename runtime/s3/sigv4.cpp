#include "s3/sigv4.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "common/time.h"
#include "common/url.h"
#include "s3/checksums.h"

namespace tp::s3 {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Header values are signed trimmed, with runs of spaces collapsed to one.
std::string canonical_header_value(std::string_view value) {
  std::string out;
  bool pending_space = false;
  for (char c : value) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

}  // namespace

std::string canonical_query(const QueryList& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [name, value] : query)
    encoded.emplace_back(percent_encode(name, false), percent_encode(value, false));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out += '&';
    out += name + '=' + value;
  }
  return out;
}

std::string amz_date(std::time_t time) { return format_utc(time, "%Y%m%dT%H%M%SZ"); }

SignedRequest sign(const SignableRequest& request, const Credentials& credentials, std::string_view region,
                   std::time_t now) {
  const std::string timestamp = amz_date(now);
  const std::string date = timestamp.substr(0, 8);

  SignedRequest signed_request;
  signed_request.headers = request.headers;
  signed_request.headers.emplace_back("x-amz-date", timestamp);
  signed_request.headers.emplace_back("x-amz-content-sha256", request.payload_sha256);
  if (!credentials.session_token.empty()) {
    signed_request.headers.emplace_back("x-amz-security-token", credentials.session_token);
  }

  // Canonical headers: lower-case names, sorted; repeated names joined with ','.
  std::vector<std::pair<std::string, std::string>> canonical;
  canonical.emplace_back("host", request.host);
  for (const auto& [name, value] : signed_request.headers) {
    canonical.emplace_back(lower(name), canonical_header_value(value));
  }
  std::stable_sort(canonical.begin(), canonical.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string canonical_headers;
  std::string signed_headers;
  for (std::size_t i = 0; i < canonical.size(); ++i) {
    if (i > 0 && canonical[i].first == canonical[i - 1].first) {
      canonical_headers.back() = ',';  // replaces the previous line's '\n'
      canonical_headers += canonical[i].second + '\n';
      continue;
    }
    canonical_headers += canonical[i].first + ':' + canonical[i].second + '\n';
    if (!signed_headers.empty()) signed_headers += ';';
    signed_headers += canonical[i].first;
  }

  signed_request.canonical_request =
      fmt::format("{}\n{}\n{}\n{}\n{}\n{}", request.method, percent_encode(request.path, true),
                  canonical_query(request.query), canonical_headers, signed_headers, request.payload_sha256);
  const std::string scope = fmt::format("{}/{}/s3/aws4_request", date, region);
  signed_request.string_to_sign = fmt::format("AWS4-HMAC-SHA256\n{}\n{}\n{}", timestamp, scope,
                                              sha256_hex(signed_request.canonical_request));

  const std::string date_key = hmac(HashAlgorithm::sha256, "AWS4" + credentials.secret_access_key, date);
  const std::string region_key = hmac(HashAlgorithm::sha256, date_key, region);
  const std::string service_key = hmac(HashAlgorithm::sha256, region_key, "s3");
  const std::string signing_key = hmac(HashAlgorithm::sha256, service_key, "aws4_request");
  signed_request.signature = hex(hmac(HashAlgorithm::sha256, signing_key, signed_request.string_to_sign));
  signed_request.headers.emplace_back(
      "Authorization",
      fmt::format("AWS4-HMAC-SHA256 Credential={}/{},SignedHeaders={},Signature={}",
                  credentials.access_key_id, scope, signed_headers, signed_request.signature));
  return signed_request;
}

}  // namespace tp::s3
