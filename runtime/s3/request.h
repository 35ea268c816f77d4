// The S3 requests the client sends, each made by the named constructor of its operation (as aws-c-s3's
// s3_request_messages.c makes them): the method, bucket, key, query and headers that are signed, and the
// body sent or the sink that receives one. Sender signs and sends them.
#pragma once

#include <cstdint>
#include <string>

#include "http/transfer.h"
#include "s3/object.h"
#include "s3/sigv4.h"

namespace tp::s3 {

struct Request {
  std::string method;
  std::string bucket;
  std::string key;  // empty for a request on the bucket
  QueryList query;
  HeaderList headers;
  std::string payload_sha256 = std::string(kEmptySha256);  // as signed
  http::BodySource body;
  std::uint64_t body_size = 0;
  http::BodySink sink;  // the caller sets it to receive a GET's body as it arrives

  // One page of the keys under `prefix`, after `continuation` (empty: the first page).
  static Request list_objects_v2(const std::string& bucket, const std::string& prefix,
                                 const std::string& delimiter, int page_size,
                                 const std::string& continuation);
  static Request head_object(const std::string& bucket, const std::string& key);
  // The listed version's HEAD (If-Match its ETag), with the checksum S3 keeps with it.
  static Request head_listed_object(const std::string& bucket, const ObjectInfo& object);
  // The object with the checksum S3 keeps with it; from byte `offset` on, and then only the listed version
  // (a cut transfer resumed).
  static Request get_object(const std::string& bucket, const ObjectInfo& object, std::uint64_t offset);
  // Bytes [begin, end] of the listed version.
  static Request get_range(const std::string& bucket, const ObjectInfo& object, std::uint64_t begin,
                           std::uint64_t end);
  static Request delete_object(const std::string& bucket, const std::string& key);

  // PutObject of `size` bytes read from `body`, with their CRC64NVME (raw): the bytes are not signed
  // (UNSIGNED-PAYLOAD, as s5cmd and AWS's SDKs over https send them): their CRC64NVME is, in a signed header,
  // and the server refuses bytes that do not match it (400 BadDigest) and keeps it with the object. A SHA-256
  // of every byte sent would cost more CPU than the CRC and the upload together (docs/s3.md, "Checksums").
  static Request put_object(const std::string& bucket, const std::string& key, const std::string& crc64nvme,
                            http::BodySource body, std::uint64_t size);
  // A full-object CRC64NVME, as AWS's SDKs ask for by default: the object's checksum is the same whatever
  // its part size, and downloads verify it like a single-part object's.
  static Request create_multipart_upload(const std::string& bucket, const std::string& key);
  // Part `number` of upload `upload_id`, sent as put_object sends a whole object.
  static Request upload_part(const std::string& bucket, const std::string& key, const std::string& upload_id,
                             int number, const std::string& crc64nvme, http::BodySource body,
                             std::uint64_t size);
  // `parts_xml`: xml::complete_multipart_upload_body; `crc64nvme`: the whole object's (raw).
  static Request complete_multipart_upload(const std::string& bucket, const std::string& key,
                                           const std::string& upload_id, const std::string& parts_xml,
                                           const std::string& crc64nvme);
  static Request abort_multipart_upload(const std::string& bucket, const std::string& key,
                                        const std::string& upload_id);

 private:
  Request(std::string method, std::string bucket, std::string key);
};

}  // namespace tp::s3
