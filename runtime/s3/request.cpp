#include "s3/request.h"

#include <fmt/format.h>

#include "common/digest.h"
#include "s3/checksums.h"

namespace tp::s3 {
namespace {

std::string if_match(const ObjectInfo& object) {
  return '"' + object.etag + '"';
}

}  // namespace

Request::Request(std::string method, std::string bucket, std::string key)
    : method(std::move(method)), bucket(std::move(bucket)), key(std::move(key)) {}

Request Request::list_objects_v2(const std::string& bucket, const std::string& prefix,
                                 const std::string& delimiter, int page_size,
                                 const std::string& continuation) {
  Request request("GET", bucket, "");
  request.query = {{"list-type", "2"}, {"max-keys", std::to_string(page_size)}};
  if (!prefix.empty()) request.query.emplace_back("prefix", prefix);
  if (!delimiter.empty()) request.query.emplace_back("delimiter", delimiter);
  if (!continuation.empty()) request.query.emplace_back("continuation-token", continuation);
  return request;
}

Request Request::head_object(const std::string& bucket, const std::string& key) {
  return Request("HEAD", bucket, key);
}

Request Request::head_listed_object(const std::string& bucket, const ObjectInfo& object) {
  Request request("HEAD", bucket, object.key);
  request.headers.emplace_back("x-amz-checksum-mode", "ENABLED");
  request.headers.emplace_back("If-Match", if_match(object));
  return request;
}

Request Request::get_object(const std::string& bucket, const ObjectInfo& object, std::uint64_t offset) {
  Request request("GET", bucket, object.key);
  request.headers.emplace_back("x-amz-checksum-mode", "ENABLED");
  if (offset > 0) {
    request.headers.emplace_back("Range", fmt::format("bytes={}-", offset));
    request.headers.emplace_back("If-Match", if_match(object));
  }
  return request;
}

Request Request::get_range(const std::string& bucket, const ObjectInfo& object, std::uint64_t begin,
                           std::uint64_t end) {
  Request request("GET", bucket, object.key);
  request.headers.emplace_back("Range", fmt::format("bytes={}-{}", begin, end));
  request.headers.emplace_back("If-Match", if_match(object));
  return request;
}

Request Request::delete_object(const std::string& bucket, const std::string& key) {
  return Request("DELETE", bucket, key);
}

Request Request::put_object(const std::string& bucket, const std::string& key, const std::string& crc64nvme,
                            http::BodySource body, std::uint64_t size) {
  Request request("PUT", bucket, key);
  request.payload_sha256 = std::string(kUnsignedPayload);
  request.headers.emplace_back("x-amz-checksum-crc64nvme", base64(crc64nvme));
  request.body = std::move(body);
  request.body_size = size;
  return request;
}

Request Request::create_multipart_upload(const std::string& bucket, const std::string& key) {
  Request request("POST", bucket, key);
  request.query = {{"uploads", ""}};
  request.headers.emplace_back("x-amz-checksum-algorithm", "CRC64NVME");
  request.headers.emplace_back("x-amz-checksum-type", "FULL_OBJECT");
  return request;
}

Request Request::upload_part(const std::string& bucket, const std::string& key, const std::string& upload_id,
                             int number, const std::string& crc64nvme, http::BodySource body,
                             std::uint64_t size) {
  Request request = put_object(bucket, key, crc64nvme, std::move(body), size);
  request.query = {{"partNumber", std::to_string(number)}, {"uploadId", upload_id}};
  return request;
}

Request Request::complete_multipart_upload(const std::string& bucket, const std::string& key,
                                           const std::string& upload_id, const std::string& parts_xml,
                                           const std::string& crc64nvme) {
  Request request("POST", bucket, key);
  request.query = {{"uploadId", upload_id}};
  request.payload_sha256 = sha256_hex(parts_xml);
  request.headers.emplace_back("Content-Type", "application/xml");
  request.headers.emplace_back("x-amz-checksum-crc64nvme", base64(crc64nvme));
  request.headers.emplace_back("x-amz-checksum-type", "FULL_OBJECT");
  request.body = http::text_body(parts_xml);
  request.body_size = parts_xml.size();
  return request;
}

Request Request::abort_multipart_upload(const std::string& bucket, const std::string& key,
                                        const std::string& upload_id) {
  Request request("DELETE", bucket, key);
  request.query = {{"uploadId", upload_id}};
  return request;
}

}  // namespace tp::s3
