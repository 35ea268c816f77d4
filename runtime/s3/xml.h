// S3's XML bodies, read and written with pugixml.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "s3/object.h"

namespace tp::s3::xml {

struct ListPage {
  std::vector<ObjectInfo> objects;
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string next_continuation_token;
};

struct ErrorBody {
  std::string code;  // e.g. NoSuchKey, SlowDown; empty if the body is not an S3 error
  std::string message;
};

// Throws tp::Error(network) on a body that is not the expected XML (a proxy's HTML page, a cut body).
ListPage parse_list_objects_v2(const std::string& body);
std::string parse_initiate_multipart_upload(const std::string& body);  // the UploadId
// The ETag of the assembled object, from a CompleteMultipartUpload answer (S3 sends it in the body only).
std::string parse_complete_multipart_upload(const std::string& body);
ErrorBody parse_error(const std::string& body);
// A part as CompleteMultipartUpload names it: its number, ETag and the CRC64NVME it was sent with (base64;
// empty for none), which a server that was told the upload's checksum algorithm compares.
struct CompletedPart {
  int number = 0;
  std::string etag;
  std::string crc64nvme;
};
std::string complete_multipart_upload_body(const std::vector<CompletedPart>& parts);
std::string strip_quotes(std::string etag);

}  // namespace tp::s3::xml
