#include "s3/multipart_upload.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "s3/file_ranges.h"

namespace tp::s3 {
namespace {

namespace fs = std::filesystem;

// What S3 stored of a PUT: its ETag, and the CRC64NVME (raw) of the bytes sent.
struct Stored {
  std::string etag;
  std::string crc64nvme;
};

// The PutObject or UploadPart request `make` builds for bytes [begin, begin + size) of `source`, from their
// CRC64NVME and a body that reads them; `etag_needed` for a part, which CompleteMultipartUpload names by it.
using MakePut = std::function<Request(const std::string& crc64nvme, http::BodySource body)>;
Stored put_range(const Channel& channel, const std::string& what, const fs::path& source, std::uint64_t begin,
                 std::uint64_t size, bool etag_needed, const MakePut& make) {
  FileDescriptor fd(open_for_reading(source));
  Digest crc(Digest::Algorithm::crc64nvme);
  hash_file_range(source, fd.get(), begin, size, {&crc});
  Stored stored;
  stored.crc64nvme = crc.finish();
  channel.retrying(what, [&]() -> std::optional<std::string> {
    const http::Response response =
        channel.send(make(stored.crc64nvme, file_range_reader(fd.get(), begin, size)));
    if (auto cause = channel.sender().check(response, what, {200})) return cause;
    stored.etag = xml::strip_quotes(response.header("etag"));
    if (etag_needed && stored.etag.empty()) return std::string("no ETag in the answer");
    const std::string& kept = response.header("x-amz-checksum-crc64nvme");
    if (!kept.empty() && kept != base64(stored.crc64nvme)) {
      return fmt::format("stored checksum {} is not the CRC64NVME {} of the bytes sent", kept,
                         base64(stored.crc64nvme));
    }
    return std::nullopt;
  });
  return stored;
}

}  // namespace

std::string put_object(const Channel& channel, const std::string& bucket, const UploadItem& item,
                       std::uint64_t size) {
  const std::string what = channel.sender().describe("PUT", bucket, item.key);
  return put_range(channel, what, item.source, 0, size, false,
                   [&](const std::string& crc64nvme, http::BodySource body) {
                     return Request::put_object(bucket, item.key, crc64nvme, std::move(body), size);
                   })
      .etag;
}

MultipartUpload::MultipartUpload(const UploadItem& item, std::uint64_t size, std::uint64_t part_size)
    : item_(item), size_(size), part_size_(std::max(part_size, (size + 9999) / 10000)) {
  for (std::uint64_t begin = 0; begin < size_; begin += part_size_)
    parts_.push_back({static_cast<int>(begin / part_size_) + 1, "", ""});
  part_crcs_.resize(parts_.size());
}

std::uint64_t MultipartUpload::part_size(std::size_t index) const {
  return std::min(part_size_, size_ - index * part_size_);
}

void MultipartUpload::create(const Channel& channel, const std::string& bucket) {
  const std::string what = channel.sender().describe("CreateMultipartUpload", bucket, item_.key);
  channel.retrying(what, [&]() -> std::optional<std::string> {
    const http::Response response = channel.send(Request::create_multipart_upload(bucket, item_.key));
    if (auto cause = channel.sender().check(response, what, {200})) return cause;
    upload_id_ = xml::parse_initiate_multipart_upload(response.body);
    return std::nullopt;
  });
}

void MultipartUpload::put_part(const Channel& channel, const std::string& bucket, std::size_t index) {
  xml::CompletedPart& part = parts_[index];
  const std::string what =
      fmt::format("{} part {}", channel.sender().describe("UploadPart", bucket, item_.key), part.number);
  const std::uint64_t size = part_size(index);
  Stored sent = put_range(channel, what, item_.source, index * part_size_, size, true,
                          [&](const std::string& crc64nvme, http::BodySource body) {
                            return Request::upload_part(bucket, item_.key, upload_id_, part.number, crc64nvme,
                                                        std::move(body), size);
                          });
  part.etag = std::move(sent.etag);
  part.crc64nvme = base64(sent.crc64nvme);
  part_crcs_[index] = {std::move(sent.crc64nvme), size};
}

ObjectInfo MultipartUpload::complete(const Channel& channel, const std::string& bucket) {
  const std::string what = channel.sender().describe("CompleteMultipartUpload", bucket, item_.key);
  const std::string parts_xml = xml::complete_multipart_upload_body(parts_);
  const std::string whole_crc = concatenate_crcs(Digest::Algorithm::crc64nvme, part_crcs_);
  std::string etag;
  channel.retrying(what, [&]() -> std::optional<std::string> {
    const http::Response response =
        channel.send(Request::complete_multipart_upload(bucket, item_.key, upload_id_, parts_xml, whole_crc));
    if (auto cause = channel.sender().check(response, what, {200})) return cause;
    // S3 may answer 200 and report a failure in the body.
    const xml::ErrorBody error = xml::parse_error(response.body);
    if (!error.code.empty()) return fmt::format("HTTP 200 with error {}: {}", error.code, error.message);
    etag = xml::parse_complete_multipart_upload(response.body);
    return std::nullopt;
  });
  return ObjectInfo{item_.key, size_, etag};
}

void MultipartUpload::abort(const Channel& channel, const std::string& bucket) {
  const http::Response response =
      channel.send(Request::abort_multipart_upload(bucket, item_.key, upload_id_));
  if (response.transport != http::Transport::ok || response.status >= 300)
    spdlog::warn("s3: could not abort the multipart upload of s3://{}/{}", bucket, item_.key);
}

}  // namespace tp::s3
