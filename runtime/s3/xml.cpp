#include "s3/xml.h"

#include <cctype>
#include <cstdint>
#include <sstream>

#include <pugixml.hpp>

#include "common/error.h"

namespace tp::s3 {

bool etag_is_md5(const std::string& etag) {
  if (etag.size() != 32) return false;
  for (unsigned char c : etag) {
    if (!std::isxdigit(c)) return false;
  }
  return true;
}

namespace xml {
namespace {

pugi::xml_document parse(const std::string& body, const char* what) {
  pugi::xml_document document;
  const pugi::xml_parse_result result = document.load_buffer(body.data(), body.size());
  if (!result)
    fail(ExitCode::network, "S3 sent a {} that is not XML ({}): {:.200}", what, result.description(), body);
  return document;
}

// An object's <Size>: decimal digits that fit 64 bits (absent: 0). Anything else is a garbled answer.
std::uint64_t parse_size(const char* text, const std::string& key) {
  const std::string size = text;
  std::uint64_t value = 0;
  for (const char c : size) {
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (c < '0' || c > '9' || value > (UINT64_MAX - digit) / 10) {
      fail(ExitCode::network, "S3 sent a ListObjectsV2 answer with an invalid Size '{:.40}' for key '{:.200}'", size,
           key);
    }
    value = value * 10 + digit;
  }
  return value;
}

}  // namespace

std::string strip_quotes(std::string etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return etag;
}

ListPage parse_list_objects_v2(const std::string& body) {
  const auto document = parse(body, "ListObjectsV2 answer");
  const pugi::xml_node root = document.child("ListBucketResult");
  if (!root)
    fail(ExitCode::network, "S3 sent a ListObjectsV2 answer without ListBucketResult: {:.200}", body);
  ListPage page;
  for (const pugi::xml_node contents : root.children("Contents")) {
    ObjectInfo object;
    object.key = contents.child_value("Key");
    object.size = parse_size(contents.child_value("Size"), object.key);
    object.etag = strip_quotes(contents.child_value("ETag"));
    page.objects.push_back(std::move(object));
  }
  for (const pugi::xml_node common : root.children("CommonPrefixes")) {
    page.common_prefixes.emplace_back(common.child_value("Prefix"));
  }
  page.truncated = std::string(root.child_value("IsTruncated")) == "true";
  page.next_continuation_token = root.child_value("NextContinuationToken");
  return page;
}

std::string parse_initiate_multipart_upload(const std::string& body) {
  const auto document = parse(body, "CreateMultipartUpload answer");
  const std::string upload_id = document.child("InitiateMultipartUploadResult").child_value("UploadId");
  if (upload_id.empty()) fail(ExitCode::network, "S3 sent no UploadId: {:.200}", body);
  return upload_id;
}

std::string parse_complete_multipart_upload(const std::string& body) {
  const auto document = parse(body, "CompleteMultipartUpload answer");
  return strip_quotes(document.child("CompleteMultipartUploadResult").child_value("ETag"));
}

ErrorBody parse_error(const std::string& body) {
  pugi::xml_document document;
  if (!document.load_buffer(body.data(), body.size())) return {};
  const pugi::xml_node error = document.child("Error");
  return {error.child_value("Code"), error.child_value("Message")};
}

std::string complete_multipart_upload_body(const std::vector<CompletedPart>& parts) {
  pugi::xml_document document;
  pugi::xml_node root = document.append_child("CompleteMultipartUpload");
  root.append_attribute("xmlns") = "http://s3.amazonaws.com/doc/2006-03-01/";
  for (const CompletedPart& completed : parts) {
    pugi::xml_node part = root.append_child("Part");
    part.append_child("PartNumber").text().set(completed.number);
    part.append_child("ETag").text().set(('"' + completed.etag + '"').c_str());
    if (!completed.crc64nvme.empty()) part.append_child("ChecksumCRC64NVME").text().set(completed.crc64nvme.c_str());
  }
  std::ostringstream out;
  document.save(out, "", pugi::format_raw);
  return out.str();
}

}  // namespace xml
}  // namespace tp::s3
