// Every parser of S3's XML answers on arbitrary bytes, as a server or a proxy in between could send them.
// Invariants: each returns or throws tp::Error(network) (a garbled answer is retried); parse_error never
// throws; a ListObjectsV2 page's keys either map to a path under the destination or are rejected with
// tp::Error(data), as staging does; a CompleteMultipartUpload body built from the listed ETags parses.
#include <pugixml.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_support.h"
#include "s3/paths.h"
#include "s3/xml.h"

using namespace tp;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);

  s3::xml::ListPage page;
  const bool listed = fuzz::returns_or_fails_with(ExitCode::network, [&] { page = s3::xml::parse_list_objects_v2(body); });
  if (listed) {
    std::vector<s3::xml::CompletedPart> parts;
    for (const auto& object : page.objects) {
      std::filesystem::path relative;
      if (fuzz::returns_or_fails_with(ExitCode::data, [&] { relative = s3::local_path_for_key(object.key, ""); })) {
        TP_FUZZ_CHECK(relative.is_relative() && !relative.empty(), object.key);
        for (const auto& segment : relative) {
          TP_FUZZ_CHECK(segment != ".." && segment != "." && !segment.empty(), object.key);
        }
      }
      parts.push_back({static_cast<int>(parts.size()) + 1, object.etag, ""});
    }
    // ETags go back to S3 in CompleteMultipartUpload: whatever they hold, the body must be XML that
    // carries them unchanged.
    const std::string complete = s3::xml::complete_multipart_upload_body(parts);
    pugi::xml_document document;
    TP_FUZZ_CHECK(document.load_buffer(complete.data(), complete.size()), complete);
    std::size_t index = 0;
    for (const auto part : document.child("CompleteMultipartUpload").children("Part")) {
      TP_FUZZ_CHECK(index < parts.size(), complete);
      TP_FUZZ_CHECK(s3::xml::strip_quotes(part.child_value("ETag")) == parts[index].etag ||
                        parts[index].etag.find('\0') != std::string::npos,
                    complete);
      ++index;
    }
    TP_FUZZ_CHECK(index == parts.size(), complete);
  }
  fuzz::returns_or_fails_with(ExitCode::network, [&] { s3::xml::parse_initiate_multipart_upload(body); });
  fuzz::returns_or_fails_with(ExitCode::network, [&] { s3::xml::parse_complete_multipart_upload(body); });
  try {
    s3::xml::parse_error(body);
  } catch (const std::exception& error) {
    fuzz::violated("parse_error threw", error.what());
  }
  return 0;
}
