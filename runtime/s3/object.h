// An object as a listing or HEAD reports it.
#pragma once

#include <cstdint>
#include <string>

namespace tp::s3 {

struct ObjectInfo {
  std::string key;
  std::uint64_t size = 0;
  std::string etag;  // without quotes; "<md5>" for single-part uploads, "<hash>-<parts>" for multipart
};

// An ETag that is the object's MD5 (a single-part upload without SSE-KMS): 32 hex digits.
bool etag_is_md5(const std::string& etag);

}  // namespace tp::s3
