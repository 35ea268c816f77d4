// AWS Signature Version 4 for S3, computed with OpenSSL. libcurl 7.88's CURLOPT_AWS_SIGV4 is not used: it
// signs `?lifecycle` without the `=` and does not sort query parameters, so it fails AWS's published S3
// examples (docs/s3.md, "Signing").
#pragma once

#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tp::s3 {

using HeaderList = std::vector<std::pair<std::string, std::string>>;
using QueryList = std::vector<std::pair<std::string, std::string>>;

inline constexpr std::string_view kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty unless temporary credentials
  std::string source;         // where they came from, for the log: never the secret itself
  bool anonymous() const { return access_key_id.empty(); }
};

// A request as S3 sees it: raw (unencoded) path and query; `headers` are the ones sent besides Host
// and the x-amz-date/x-amz-content-sha256/x-amz-security-token headers that signing adds.
struct SignableRequest {
  std::string method;
  std::string host;  // the Host header: the port only when it is not the scheme's default
  std::string path;  // starts with '/', unencoded (an object key may hold any byte)
  QueryList query;
  HeaderList headers;
  std::string payload_sha256 = std::string(kEmptySha256);  // hex digest, or UNSIGNED-PAYLOAD
};

struct SignedRequest {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;  // hex
  HeaderList headers;     // every header to send, Authorization included
};

// The query string as sent and as signed: names and values encoded, sorted, `name=value` joined by '&'.
std::string canonical_query(const QueryList& query);
// "20130524T000000Z" for a UTC time.
std::string amz_date(std::time_t time);

SignedRequest sign(const SignableRequest& request, const Credentials& credentials, std::string_view region,
                   std::time_t now);

}  // namespace tp::s3
