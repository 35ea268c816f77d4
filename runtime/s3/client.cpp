#include "s3/client.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "common/files.h"
#include "common/tasks.h"
#include "common/url.h"
#include "s3/checksums.h"
#include "s3/xml.h"

namespace tp::s3 {
namespace {

namespace fs = std::filesystem;

// Bytes [begin, begin + size) of an open file as a request body.
http::BodySource file_range_reader(int fd, std::uint64_t begin, std::uint64_t size) {
  return [fd, begin, size](char* buffer, std::size_t capacity,
                           std::uint64_t offset) -> std::optional<std::size_t> {
    if (offset >= size) return 0;
    ssize_t got = 0;
    do {
      got = ::pread(fd, buffer, std::min<std::uint64_t>(capacity, size - offset),
                    static_cast<off_t>(begin + offset));
    } while (got < 0 && errno == EINTR);
    if (got <= 0) return std::nullopt;  // an error, or the file shrank since it was hashed
    return static_cast<std::size_t>(got);
  };
}

constexpr std::size_t kHashChunk = 1 << 20;

// A file descriptor closed on scope exit.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Writes what a download receives into its file, gathering contiguous pieces into one pwrite of up to
// kWriteChunk bytes instead of one per libcurl buffer (16-128 KiB). A file's writes hold its inode lock, and
// the ranges of a large object write one file at once: on two cores, 8 ranges spent a sixth of the client's
// CPU spinning on that lock with small writes (perf, docs/benchmarks.md).
class GatheringWriter {
 public:
  // bytes_expected: what the download will write at most (a small object gathers its size, no more).
  GatheringWriter(int fd, std::uint64_t bytes_expected) : fd_(fd) {
    pending_.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(bytes_expected, kWriteChunk)));
  }
  // Writes [data, data + size) at offset, now or together with the next contiguous pieces. false once a
  // write has failed (error() has its errno).
  bool write(const char* data, std::size_t size, std::uint64_t offset) {
    if (!pending_.empty() && offset != pending_offset_ + pending_.size() && !flush()) return false;
    if (pending_.empty()) pending_offset_ = offset;
    pending_.insert(pending_.end(), data, data + size);
    return pending_.size() < kWriteChunk || flush();
  }
  bool flush() {
    for (std::size_t done = 0; done < pending_.size();) {
      const ssize_t wrote = ::pwrite(fd_, pending_.data() + done, pending_.size() - done,
                                     static_cast<off_t>(pending_offset_ + done));
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote < 0) {
        error_ = errno;
        pending_.clear();
        return false;
      }
      done += static_cast<std::size_t>(wrote);
    }
    pending_.clear();
    return error_ == 0;
  }
  int error() const { return error_; }

 private:
  static constexpr std::size_t kWriteChunk = 1 << 20;
  int fd_;
  std::vector<char> pending_;
  std::uint64_t pending_offset_ = 0;
  int error_ = 0;
};

int open_for_writing(const fs::path& path) {
  std::error_code error;
  fs::create_directories(path.parent_path(), error);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(write_failure_class(errno), "cannot create {}: {}", path.string(), std::strerror(errno));
  return fd;
}

// Hashes [begin, begin + size) of a file with each digest, reading kHashChunk bytes at a time.
void hash_file_range(const fs::path& path, int fd, std::uint64_t begin, std::uint64_t size,
                     std::initializer_list<Digest*> digests) {
  std::vector<char> buffer(kHashChunk);
  std::uint64_t done = 0;
  while (done < size) {
    const ssize_t got = ::pread(fd, buffer.data(), std::min<std::uint64_t>(buffer.size(), size - done),
                                static_cast<off_t>(begin + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      fail(ExitCode::output, "cannot read {}: {}", path.string(),
           got < 0 ? std::strerror(errno) : "short file");
    for (Digest* digest : digests) digest->update(buffer.data(), static_cast<std::size_t>(got));
    done += static_cast<std::uint64_t>(got);
  }
}

// The x-amz-checksum-* header S3 sent, if any, cheapest first.
std::optional<StoredChecksum> sent_checksum(const http::Response& response) {
  for (const ChecksumHeader& candidate : kChecksumHeaders) {
    const std::string& value = response.header(candidate.header);
    // A composite checksum of a multipart object ("<base64>-<parts>") is not a whole-object checksum.
    if (!value.empty() && value.find('-') == std::string::npos) return StoredChecksum{candidate.algorithm, value};
  }
  return std::nullopt;
}

std::string host_of(const std::string& endpoint) {
  const auto start = endpoint.find("://") + 3;
  const auto end = endpoint.find('/', start);
  std::string host = endpoint.substr(start, end == std::string::npos ? std::string::npos : end - start);
  // The Host header (and the signature) omit the scheme's default port.
  const bool https = endpoint.rfind("https://", 0) == 0;
  const std::string default_port = https ? ":443" : ":80";
  if (host.size() > default_port.size() &&
      host.compare(host.size() - default_port.size(), default_port.size(), default_port) == 0) {
    host.resize(host.size() - default_port.size());
  }
  return host;
}

// What to check for the refusals whose cause is on this side. MinIO refuses temporary credentials that expired
// as an unknown access key (InvalidAccessKeyId) where AWS says ExpiredToken.
std::string refusal_hint(const std::string& code, bool temporary_credentials) {
  if (code == "SignatureDoesNotMatch") return "; check the secret access key that goes with this access key";
  if (code == "InvalidAccessKeyId")
    return temporary_credentials ? "; the server knows no such access key: temporary credentials (these have a "
                                   "session token) are refused so once they expire: get new ones"
                                 : "; the server knows no such access key";
  if (code == "RequestTimeTooSkewed")
    return "; this machine's clock differs from the server's by more than 15 minutes: fix the clock (NTP)";
  if (code == "ExpiredToken") return "; the session token has expired: get new temporary credentials";
  if (code == "AccessDenied") return "; the credentials' policy does not allow this on this bucket";
  return "";
}

}  // namespace

// Borrows a connection from the client's idle set and returns it when done, so connections are reused
// across listings, downloads and uploads.
class Client::HandleLease {
 public:
  explicit HandleLease(Client& client) : client_(client) {
    std::lock_guard<std::mutex> lock(client_.idle_handles_mutex_);
    if (!client_.idle_handles_.empty()) {
      handle_ = std::move(client_.idle_handles_.back());
      client_.idle_handles_.pop_back();
    }
    if (!handle_) handle_ = std::make_unique<http::Handle>(client_.settings_.http);
  }
  ~HandleLease() {
    std::lock_guard<std::mutex> lock(client_.idle_handles_mutex_);
    client_.idle_handles_.push_back(std::move(handle_));
  }
  http::Handle& get() { return *handle_; }

 private:
  Client& client_;
  std::unique_ptr<http::Handle> handle_;
};

Client::Client(Connection connection, TransferSettings settings)
    : connection_(std::move(connection)), settings_(std::move(settings)) {
  settings_.parallelism = std::max(1, settings_.parallelism);
  settings_.part_size = std::max<std::uint64_t>(settings_.part_size, 5ull << 20);  // S3's minimum part
  if (settings_.http.ca_bundle.empty()) settings_.http.ca_bundle = connection_.ca_bundle;
  // Once per process and connection: a run makes a client for its checks, its data and its outputs.
  const std::string described =
      fmt::format("s3: endpoint {} (from {}, {}-style, region {}), credentials from {}", connection_.endpoint,
                  connection_.endpoint_source, connection_.path_style ? "path" : "virtual-hosted",
                  connection_.region, connection_.credentials.source);
  static std::mutex mutex;
  static std::set<std::string> logged;
  const std::lock_guard<std::mutex> lock(mutex);
  if (logged.insert(described).second) spdlog::info("{}", described);
}

Client::~Client() = default;

Client::Target Client::locate(const std::string& bucket, const std::string& key,
                              const QueryList& query) const {
  Target target;
  const std::string scheme = connection_.endpoint.substr(0, connection_.endpoint.find("://") + 3);
  const std::string endpoint_host = host_of(connection_.endpoint);
  // A bucket name with dots cannot be a virtual host under a wildcard certificate: use path-style for it.
  if (connection_.path_style || bucket.find('.') != std::string::npos) {
    target.host = endpoint_host;
    target.path = "/" + bucket + (key.empty() ? "/" : "/" + key);
  } else {
    target.host = bucket + "." + endpoint_host;
    target.path = "/" + key;
  }
  const std::string query_string = canonical_query(query);
  target.url =
      scheme + target.host + percent_encode(target.path, true) + (query_string.empty() ? "" : "?" + query_string);
  return target;
}

std::string Client::describe(const std::string& method, const std::string& bucket,
                             const std::string& key) const {
  return fmt::format("{} s3://{}/{} at {}", method, bucket, key, connection_.endpoint);
}

http::Response Client::send(http::Handle& handle, const Call& call) {
  const Target target = locate(call.bucket, call.key, call.query);
  http::Request request;
  request.method = call.method;
  request.url = target.url;
  request.body = call.body;
  request.body_size = call.body_size;
  request.sink = call.sink;
  if (connection_.credentials.anonymous()) {
    request.headers = call.headers;
  } else {
    SignableRequest signable;
    signable.method = call.method;
    signable.host = target.host;
    signable.path = target.path;
    signable.query = call.query;
    signable.headers = call.headers;
    signable.payload_sha256 = call.payload_sha256;
    request.headers = sign(signable, connection_.credentials, connection_.region, std::time(nullptr)).headers;
  }
  return handle.perform(request, &cancel_);
}

std::optional<std::string> Client::check(const http::Response& response, const std::string& what,
                                         std::initializer_list<long> expected) const {
  switch (response.transport) {
    case http::Transport::ok:
      break;
    case http::Transport::untrusted:
      fail(ExitCode::usage, "{}: TLS verification failed ({}); give the endpoint's CA with AWS_CA_BUNDLE",
           what, response.transport_error);
    case http::Transport::bad_url:
      fail(ExitCode::usage, "{}: bad endpoint URL ({})", what, response.transport_error);
    case http::Transport::cancelled:
      fail(ExitCode::network, "{}: cancelled after another transfer failed", what);
    case http::Transport::source_failed:
      fail(ExitCode::output, "{}: cannot read the file to upload ({})", what, response.transport_error);
    case http::Transport::transient:
    case http::Transport::sink_refused:
      return response.transport_error;
  }
  if (std::find(expected.begin(), expected.end(), response.status) != expected.end()) return std::nullopt;
  const xml::ErrorBody error = xml::parse_error(response.body);
  const std::string cause =
      fmt::format("HTTP {}{}{}", response.status, error.code.empty() ? "" : " " + error.code,
                  error.message.empty() ? "" : ": " + error.message);
  // S3 may name a transient failure in the error body of another status (400 RequestTimeout), and a body
  // that arrived other than it was sent (its checksum or signed SHA-256 differs: AWS's BadDigest, MinIO's
  // XAmzContent*Mismatch) is sent again.
  static const std::set<std::string> kRetriedCodes = {
      "SlowDown", "RequestTimeout", "InternalError", "BadDigest", "XAmzContentChecksumMismatch",
      "XAmzContentSHA256Mismatch"};
  if (http::transient_status(response.status) || kRetriedCodes.count(error.code) != 0) return cause;
  if (response.status == 401 || response.status == 403) {
    fail(ExitCode::usage, "{}: {} (credentials from {}{})", what, cause, connection_.credentials.source,
         refusal_hint(error.code, !connection_.credentials.session_token.empty()));
  }
  if (response.status == 412)
    fail(ExitCode::network, "{}: the object changed on the server while it was read ({})", what, cause);
  fail(ExitCode::data, "{}: {}", what, cause);
}

void Client::retrying(const std::string& what, const std::function<std::optional<std::string>()>& attempt) {
  retry(settings_.retry, [&]() -> std::optional<std::string> {
    if (cancel_.load()) fail(ExitCode::network, "{}: cancelled after another transfer failed", what);
    const std::optional<std::string> cause = attempt();
    if (!cause) return std::nullopt;
    return fmt::format("{}: {}", what, *cause);
  });
}

void Client::run_parallel(std::size_t count, const std::function<void(http::Handle&, std::size_t)>& task) {
  cancel_ = false;
  try {
    run_on_threads(count, settings_.parallelism, [&](TaskQueue& queue) {
      HandleLease lease(*this);
      queue.drain([&](std::size_t index) {
        try {
          task(lease.get(), index);
        } catch (...) {
          cancel_ = true;  // transfers under way stop retrying
          throw;
        }
      });
    });
  } catch (...) {
    cancel_ = false;
    throw;
  }
  cancel_ = false;
}

Listing Client::list(const std::string& bucket, const std::string& prefix, const std::string& delimiter) {
  HandleLease lease(*this);
  Listing listing;
  std::string continuation;
  std::set<std::string> tokens_seen;  // a server that hands out a token again would loop forever
  const std::string what = describe("ListObjectsV2", bucket, prefix);
  do {
    Call call;
    call.method = "GET";
    call.bucket = bucket;
    call.query = {{"list-type", "2"}, {"max-keys", std::to_string(settings_.list_page_size)}};
    if (!prefix.empty()) call.query.emplace_back("prefix", prefix);
    if (!delimiter.empty()) call.query.emplace_back("delimiter", delimiter);
    if (!continuation.empty()) call.query.emplace_back("continuation-token", continuation);
    xml::ListPage page;
    retrying(what, [&]() -> std::optional<std::string> {
      const http::Response response = send(lease.get(), call);
      if (auto cause = check(response, what, {200})) return cause;
      // A cut or garbled page is a transport fault: ask again.
      try {
        page = xml::parse_list_objects_v2(response.body);
      } catch (const Error& error) {
        return std::string(error.what());
      }
      return std::nullopt;
    });
    for (auto& object : page.objects) listing.objects.push_back(std::move(object));
    for (auto& common : page.common_prefixes) listing.common_prefixes.push_back(std::move(common));
    if (page.truncated && page.next_continuation_token.empty()) {
      fail(ExitCode::network, "{}: listing is truncated but has no continuation token", what);
    }
    continuation = page.truncated ? page.next_continuation_token : "";
    if (!continuation.empty() && !tokens_seen.insert(continuation).second) {
      fail(ExitCode::network, "{}: the server repeated continuation token '{:.100}' after {} objects", what,
           continuation, listing.objects.size());
    }
  } while (!continuation.empty());
  std::sort(listing.objects.begin(), listing.objects.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return listing;
}

std::optional<ObjectInfo> Client::head(const std::string& bucket, const std::string& key) {
  HandleLease lease(*this);
  const std::string what = describe("HEAD", bucket, key);
  std::optional<ObjectInfo> object;
  retrying(what, [&]() -> std::optional<std::string> {
    Call call;
    call.method = "HEAD";
    call.bucket = bucket;
    call.key = key;
    const http::Response response = send(lease.get(), call);
    if (response.transport == http::Transport::ok && response.status == 404) {
      object.reset();
      return std::nullopt;
    }
    if (auto cause = check(response, what, {200})) return cause;
    object = ObjectInfo{key, std::stoull("0" + response.header("content-length")),
                        xml::strip_quotes(response.header("etag"))};
    return std::nullopt;
  });
  return object;
}

std::optional<StoredChecksum> Client::combinable_checksum(http::Handle& handle, const std::string& bucket,
                                                          const ObjectInfo& object) {
  const std::string what = describe("HEAD", bucket, object.key);
  std::optional<StoredChecksum> checksum;
  retrying(what, [&]() -> std::optional<std::string> {
    Call call;
    call.method = "HEAD";
    call.bucket = bucket;
    call.key = object.key;
    call.headers.emplace_back("x-amz-checksum-mode", "ENABLED");
    call.headers.emplace_back("If-Match", '"' + object.etag + '"');
    const http::Response response = send(handle, call);
    if (response.transport == http::Transport::ok && (response.status == 404 || response.status == 412)) {
      fail(ExitCode::network, "{}: the object changed or was deleted after it was listed (HTTP {})", what,
           response.status);
    }
    if (auto cause = check(response, what, {200})) return cause;
    checksum = sent_checksum(response);
    if (checksum && checksum->algorithm != Digest::Algorithm::crc64nvme &&
        checksum->algorithm != Digest::Algorithm::crc32c) {
      checksum.reset();
    }
    return std::nullopt;
  });
  return checksum;
}

void Client::remove(const std::string& bucket, const std::string& key) {
  HandleLease lease(*this);
  const std::string what = describe("DELETE", bucket, key);
  retrying(what, [&]() -> std::optional<std::string> {
    Call call;
    call.method = "DELETE";
    call.bucket = bucket;
    call.key = key;
    return check(send(lease.get(), call), what, {200, 204});
  });
}

void Client::download(const std::string& bucket, const std::vector<DownloadItem>& items,
                      const std::function<void(const DownloadItem&)>& on_done) {
  // Small objects are one task each; large ones are split into ranges that download in parallel into one
  // temporary file, which is verified and renamed once all its ranges are in.
  struct LargeObject {
    const DownloadItem* item;
    fs::path temporary;
    std::unique_ptr<FileDescriptor> fd;
    // With a CRC the object's HEAD names, each range's CRC is taken as it streams in and the ranges' CRCs
    // are combined at the end. Without one, the MD5 of a single-part ETag is computed over ranges in order
    // as they land, by one thread at a time, so it overlaps the download instead of re-reading the file.
    std::optional<StoredChecksum> checksum;
    std::vector<CrcPiece> range_crcs;
    std::mutex hash_mutex;
    std::uint64_t range_size = 0;
    std::vector<char> range_done;
    std::size_t next_range_to_hash = 0;
    bool hashing = false;
    Digest md5{Digest::Algorithm::md5};
  };
  struct Task {
    const DownloadItem* whole = nullptr;
    LargeObject* large = nullptr;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;  // inclusive
    std::size_t range_index = 0;
  };
  std::vector<std::unique_ptr<LargeObject>> large_objects;
  std::vector<Task> tasks;
  for (const DownloadItem& item : items) {
    if (item.object.size <= settings_.parallel_download_threshold) {
      tasks.push_back({&item, nullptr, 0, 0, 0});
      continue;
    }
    auto large = std::make_unique<LargeObject>();
    large->item = &item;
    large->temporary = temporary_sibling(item.target);
    large_objects.push_back(std::move(large));
  }
  if (!large_objects.empty()) {
    HandleLease lease(*this);
    for (auto& large : large_objects) {
      const ObjectInfo& object = large->item->object;
      large->checksum = combinable_checksum(lease.get(), bucket, object);
      // With a CRC, one range per connection: fewer, longer GETs were faster against a loaded MinIO than
      // many short ones (docs/benchmarks.md). An MD5 is taken in order as ranges land, so there ranges
      // stay part-size and land one after another while the rest download.
      const auto connections = static_cast<std::uint64_t>(settings_.parallelism);
      large->range_size = large->checksum
                              ? std::max(settings_.part_size, (object.size + connections - 1) / connections)
                              : settings_.part_size;
      for (std::uint64_t begin = 0; begin < object.size; begin += large->range_size) {
        tasks.push_back({nullptr, large.get(), begin, std::min(object.size, begin + large->range_size) - 1,
                         large->range_done.size()});
        large->range_done.push_back(0);
      }
      large->range_crcs.resize(large->range_done.size());
    }
  }

  std::mutex done_mutex;
  auto report = [&](const DownloadItem& item) {
    if (!on_done) return;
    std::lock_guard<std::mutex> lock(done_mutex);
    on_done(item);
  };
  std::mutex open_mutex;
  try {
    run_parallel(tasks.size(), [&](http::Handle& handle, std::size_t index) {
      const Task& task = tasks[index];
      if (task.whole != nullptr) {
        download_whole(handle, bucket, *task.whole);
        report(*task.whole);
        return;
      }
      LargeObject& large = *task.large;
      {
        std::lock_guard<std::mutex> lock(open_mutex);
        if (!large.fd) large.fd = std::make_unique<FileDescriptor>(open_for_writing(large.temporary));
      }
      std::optional<Digest> range_crc;
      if (large.checksum) range_crc.emplace(large.checksum->algorithm);
      download_range(handle, bucket, large.item->object, large.fd->get(), task.begin, task.end,
                     range_crc ? &*range_crc : nullptr);
      const DownloadItem& item = *large.item;
      const bool verify_md5 = !large.checksum && etag_is_md5(item.object.etag);
      std::unique_lock<std::mutex> hash_lock(large.hash_mutex);
      if (range_crc) large.range_crcs[task.range_index] = {range_crc->finish(), task.end + 1 - task.begin};
      large.range_done[task.range_index] = 1;
      if (large.hashing) return;  // the thread that is hashing will take this range too
      large.hashing = true;
      while (large.next_range_to_hash < large.range_done.size() &&
             large.range_done[large.next_range_to_hash]) {
        const std::uint64_t begin = large.next_range_to_hash * large.range_size;
        hash_lock.unlock();
        if (verify_md5) {
          hash_file_range(large.temporary, large.fd->get(), begin,
                          std::min(large.range_size, item.object.size - begin), {&large.md5});
        }
        hash_lock.lock();
        ++large.next_range_to_hash;
      }
      large.hashing = false;
      if (large.next_range_to_hash != large.range_done.size()) return;
      hash_lock.unlock();
      // Every range is in and hashed: verify the whole file, then put it in place.
      struct stat status {};
      if (::fstat(large.fd->get(), &status) != 0 ||
          static_cast<std::uint64_t>(status.st_size) != item.object.size) {
        fail(ExitCode::network, "{}: downloaded file has the wrong size",
             describe("GET", bucket, item.object.key));
      }
      std::optional<std::string> mismatch;
      if (large.checksum) {
        const std::string combined = concatenate_crcs(large.checksum->algorithm, large.range_crcs);
        if (base64(combined) != large.checksum->value) {
          mismatch = fmt::format("checksum {} of the downloaded ranges does not match x-amz-checksum {}",
                                 base64(combined), large.checksum->value);
        }
      } else if (verify_md5) {
        const std::string actual = hex(large.md5.finish());
        if (actual != item.object.etag)
          mismatch = fmt::format("MD5 {} of the downloaded ranges does not match ETag {}", actual, item.object.etag);
      }
      if (mismatch) {
        // A range was corrupted in transit and no range can be checked alone: fetch the object again in
        // one piece, with its own retries and check.
        spdlog::warn("s3: {}: {}; fetching it whole", describe("GET", bucket, item.object.key), *mismatch);
        large.fd.reset();
        std::error_code ignored;
        fs::remove(large.temporary, ignored);
        download_whole(handle, bucket, item);
        report(item);
        return;
      }
      large.fd.reset();
      if (::rename(large.temporary.c_str(), item.target.c_str()) != 0) {
        fail(write_failure_class(errno), "cannot rename {} to {}: {}", large.temporary.string(),
             item.target.string(), std::strerror(errno));
      }
      report(item);
    });
  } catch (...) {
    for (const auto& large : large_objects) {
      std::error_code ignored;
      fs::remove(large->temporary, ignored);  // renamed ones are no longer there
    }
    throw;
  }
}

void Client::download_whole(http::Handle& handle, const std::string& bucket, const DownloadItem& item) {
  const ObjectInfo& object = item.object;
  const std::string what = describe("GET", bucket, object.key);
  const fs::path temporary = temporary_sibling(item.target);
  FileDescriptor fd(open_for_writing(temporary));
  GatheringWriter writer(fd.get(), object.size);
  struct Progress {
    std::uint64_t written = 0;
    Digest md5{Digest::Algorithm::md5};
    std::optional<Digest> checksum;
    std::string expected_checksum;
  } progress;

  try {
    retrying(what, [&]() -> std::optional<std::string> {
      Call call;
      call.method = "GET";
      call.bucket = bucket;
      call.key = object.key;
      call.headers.emplace_back("x-amz-checksum-mode", "ENABLED");
      if (progress.written > 0) {
        // Resume where the cut transfer stopped, and only if the object is still the one listed.
        call.headers.emplace_back("Range", fmt::format("bytes={}-", progress.written));
        call.headers.emplace_back("If-Match", '"' + object.etag + '"');
      }
      call.sink = [&](const http::Response& response, const char* data, std::size_t size) {
        if (response.status == 200 && progress.written > 0 && response.sink_bytes == 0) {
          progress = Progress{};  // the server sent the whole object again: start over
        }
        if (progress.written == 0 && response.sink_bytes == 0) {
          if (auto checksum = sent_checksum(response)) {
            progress.checksum.emplace(checksum->algorithm);
            progress.expected_checksum = checksum->value;
          }
        }
        if (!writer.write(data, size, progress.written)) return false;
        if (progress.checksum) {
          progress.checksum->update(data, size);
        } else {
          progress.md5.update(data, size);
        }
        progress.written += size;
        return true;
      };
      const http::Response response = send(handle, call);
      if (!writer.flush()) {
        fail(write_failure_class(writer.error()), "{}: cannot write {}: {}", what, temporary.string(),
             std::strerror(writer.error()));
      }
      if (response.transport == http::Transport::ok && response.status == 404) {
        // Listed a moment ago: deleted since. A restarted job lists again, so this is worth a retry.
        fail(ExitCode::network, "{}: the object was deleted after it was listed (HTTP 404)", what);
      }
      if (auto cause = check(response, what, {200, 206})) return cause;
      if (progress.written != object.size) {
        const std::string cause =
            fmt::format("body cut short: {} of {} bytes", progress.written, object.size);
        if (progress.written > object.size) progress = Progress{};
        return cause;
      }
      // The server's checksum when the object has one; else the MD5 of a single-part ETag.
      std::optional<std::string> mismatch;
      if (!progress.checksum && etag_is_md5(object.etag)) {
        const std::string actual = hex(progress.md5.finish());
        if (actual != object.etag)
          mismatch = fmt::format("MD5 {} does not match ETag {}", actual, object.etag);
      }
      if (!mismatch && progress.checksum) {
        const std::string actual = base64(progress.checksum->finish());
        if (actual != progress.expected_checksum) {
          mismatch =
              fmt::format("checksum {} does not match x-amz-checksum {}", actual, progress.expected_checksum);
        }
      }
      if (mismatch) {
        progress = Progress{};  // corrupted in transit: fetch it all again
        return mismatch;
      }
      return std::nullopt;
    });
    if (::rename(temporary.c_str(), item.target.c_str()) != 0) {
      fail(write_failure_class(errno), "cannot rename {} to {}: {}", temporary.string(), item.target.string(),
           std::strerror(errno));
    }
  } catch (...) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw;
  }
}

void Client::download_range(http::Handle& handle, const std::string& bucket, const ObjectInfo& object, int fd,
                            std::uint64_t begin, std::uint64_t end, Digest* checksum) {
  const std::string what = fmt::format("{} bytes {}-{}", describe("GET", bucket, object.key), begin, end);
  std::uint64_t position = begin;
  GatheringWriter writer(fd, end + 1 - begin);
  retrying(what, [&]() -> std::optional<std::string> {
    Call call;
    call.method = "GET";
    call.bucket = bucket;
    call.key = object.key;
    call.headers.emplace_back("Range", fmt::format("bytes={}-{}", position, end));
    call.headers.emplace_back("If-Match", '"' + object.etag + '"');
    bool whole_object_sent = false;
    call.sink = [&](const http::Response& response, const char* data, std::size_t size) {
      if (response.status != 206) {
        whole_object_sent = true;
        return false;
      }
      if (!writer.write(data, size, position)) return false;
      if (checksum) checksum->update(data, size);
      position += size;
      return true;
    };
    const http::Response response = send(handle, call);
    if (!writer.flush()) {
      fail(write_failure_class(writer.error()), "{}: cannot write: {}", what, std::strerror(writer.error()));
    }
    if (whole_object_sent) fail(ExitCode::network, "{}: the server ignored the Range header", what);
    if (response.transport == http::Transport::ok && response.status == 404) {
      // Listed a moment ago: deleted since. A restarted job lists again, so this is worth a retry.
      fail(ExitCode::network, "{}: the object was deleted after it was listed (HTTP 404)", what);
    }
    if (auto cause = check(response, what, {206})) return cause;
    if (position != end + 1) return fmt::format("body cut short at byte {}", position);
    return std::nullopt;
  });
}

std::vector<ObjectInfo> Client::upload(const std::string& bucket, const std::vector<UploadItem>& items,
                                       const SentCallback& on_sent) {
  struct Multipart {
    const UploadItem* item;
    std::uint64_t size;
    std::string upload_id;
    std::vector<xml::CompletedPart> parts;
    std::vector<CrcPiece> part_crcs;  // each part's CRC64NVME
  };
  struct Task {
    const UploadItem* single = nullptr;
    Multipart* multipart = nullptr;
    int part_number = 0;
    std::uint64_t begin = 0;
    std::uint64_t size = 0;
  };
  std::vector<ObjectInfo> stored(items.size());
  std::vector<std::unique_ptr<Multipart>> multiparts;
  std::vector<Task> tasks;
  std::vector<std::size_t> single_result_index;
  for (std::size_t i = 0; i < items.size(); ++i) {
    std::error_code error;
    const std::uint64_t size = fs::file_size(items[i].source, error);
    if (error) fail(ExitCode::output, "cannot read {}: {}", items[i].source.string(), error.message());
    if (size <= settings_.multipart_upload_threshold) {
      tasks.push_back({&items[i], nullptr, 0, 0, size});
      continue;
    }
    auto multipart = std::make_unique<Multipart>(Multipart{&items[i], size, {}, {}, {}});
    const std::uint64_t part_size =
        std::max(settings_.part_size, (size + 9999) / 10000);  // S3 allows at most 10,000 parts
    for (std::uint64_t begin = 0; begin < size; begin += part_size) {
      const int number = static_cast<int>(begin / part_size) + 1;
      tasks.push_back({nullptr, multipart.get(), number, begin, std::min(part_size, size - begin)});
      multipart->parts.push_back({number, "", ""});
    }
    multipart->part_crcs.resize(multipart->parts.size());
    multiparts.push_back(std::move(multipart));
  }

  HandleLease lease(*this);
  for (auto& multipart : multiparts) {
    const std::string what = describe("CreateMultipartUpload", bucket, multipart->item->key);
    retrying(what, [&]() -> std::optional<std::string> {
      Call call;
      call.method = "POST";
      call.bucket = bucket;
      call.key = multipart->item->key;
      call.query = {{"uploads", ""}};
      // A full-object CRC64NVME, as AWS's SDKs send by default: the object's checksum is the same whatever
      // its part size, and downloads verify it like a single-part object's.
      call.headers.emplace_back("x-amz-checksum-algorithm", "CRC64NVME");
      call.headers.emplace_back("x-amz-checksum-type", "FULL_OBJECT");
      const http::Response response = send(lease.get(), call);
      if (auto cause = check(response, what, {200})) return cause;
      multipart->upload_id = xml::parse_initiate_multipart_upload(response.body);
      return std::nullopt;
    });
  }
  auto abort_all = [&] {
    for (auto& multipart : multiparts) {
      Call call;
      call.method = "DELETE";
      call.bucket = bucket;
      call.key = multipart->item->key;
      call.query = {{"uploadId", multipart->upload_id}};
      const http::Response response =
          send(lease.get(), call);  // best effort: S3's lifecycle rules clean up the rest
      if (response.transport != http::Transport::ok || response.status >= 300) {
        spdlog::warn("s3: could not abort the multipart upload of s3://{}/{}", bucket, multipart->item->key);
      }
    }
  };

  std::mutex sent_mutex;
  auto report = [&](std::uint64_t bytes, bool object_complete) {
    if (!on_sent) return;
    std::lock_guard<std::mutex> lock(sent_mutex);
    on_sent(bytes, object_complete);
  };
  try {
    run_parallel(tasks.size(), [&](http::Handle& handle, std::size_t index) {
      const Task& task = tasks[index];
      if (task.single != nullptr) {
        const UploadItem& item = *task.single;
        stored[static_cast<std::size_t>(&item - items.data())] = ObjectInfo{
            item.key, task.size, put(handle, bucket, item.key, item.source, 0, task.size, std::nullopt).etag};
        report(task.size, true);
        return;
      }
      Multipart& multipart = *task.multipart;
      const auto part = static_cast<std::size_t>(task.part_number - 1);
      Stored sent = put(handle, bucket, multipart.item->key, multipart.item->source, task.begin, task.size,
                        UploadPart{multipart.upload_id, task.part_number});
      multipart.parts[part].etag = std::move(sent.etag);
      multipart.parts[part].crc64nvme = base64(sent.crc64nvme);
      multipart.part_crcs[part] = {std::move(sent.crc64nvme), task.size};
      report(task.size, false);
    });
    for (auto& multipart : multiparts) {
      const std::string what = describe("CompleteMultipartUpload", bucket, multipart->item->key);
      const std::string body = xml::complete_multipart_upload_body(multipart->parts);
      const std::string whole_crc = concatenate_crcs(Digest::Algorithm::crc64nvme, multipart->part_crcs);
      std::string etag;
      retrying(what, [&]() -> std::optional<std::string> {
        Call call;
        call.method = "POST";
        call.bucket = bucket;
        call.key = multipart->item->key;
        call.query = {{"uploadId", multipart->upload_id}};
        call.payload_sha256 = sha256_hex(body);
        call.headers.emplace_back("Content-Type", "application/xml");
        call.headers.emplace_back("x-amz-checksum-crc64nvme", base64(whole_crc));
        call.headers.emplace_back("x-amz-checksum-type", "FULL_OBJECT");
        call.body = http::text_body(body);
        call.body_size = body.size();
        const http::Response response = send(lease.get(), call);
        if (auto cause = check(response, what, {200})) return cause;
        // S3 may answer 200 and report a failure in the body.
        const xml::ErrorBody error = xml::parse_error(response.body);
        if (!error.code.empty()) return fmt::format("HTTP 200 with error {}: {}", error.code, error.message);
        etag = xml::parse_complete_multipart_upload(response.body);
        return std::nullopt;
      });
      stored[static_cast<std::size_t>(multipart->item - items.data())] =
          ObjectInfo{multipart->item->key, multipart->size, etag};
      report(0, true);
    }
  } catch (...) {
    abort_all();
    throw;
  }
  return stored;
}

Client::Stored Client::put(http::Handle& handle, const std::string& bucket, const std::string& key,
                        const fs::path& source, std::uint64_t begin, std::uint64_t size,
                        const std::optional<UploadPart>& part) {
  const std::string what = part ? fmt::format("{} part {}", describe("UploadPart", bucket, key), part->number)
                                : describe("PUT", bucket, key);
  FileDescriptor fd(::open(source.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail(ExitCode::output, "cannot read {}: {}", source.string(), std::strerror(errno));
  // The bytes are not signed (UNSIGNED-PAYLOAD, as s5cmd and AWS's SDKs over https send them): their
  // CRC64NVME is, in a signed header, and the server refuses bytes that do not match it. A SHA-256 of every
  // byte sent would cost more CPU than the CRC and the upload together (docs/s3.md, "Checksums").
  Digest crc(Digest::Algorithm::crc64nvme);
  hash_file_range(source, fd.get(), begin, size, {&crc});
  Stored stored;
  stored.crc64nvme = crc.finish();
  retrying(what, [&]() -> std::optional<std::string> {
    Call call;
    call.method = "PUT";
    call.bucket = bucket;
    call.key = key;
    if (part) call.query = {{"partNumber", std::to_string(part->number)}, {"uploadId", part->upload_id}};
    call.payload_sha256 = std::string(kUnsignedPayload);
    // The server checks the bytes against it (400 BadDigest) and keeps it with the object.
    call.headers.emplace_back("x-amz-checksum-crc64nvme", base64(stored.crc64nvme));
    call.body = file_range_reader(fd.get(), begin, size);
    call.body_size = size;
    const http::Response response = send(handle, call);
    if (auto cause = check(response, what, {200})) return cause;
    stored.etag = xml::strip_quotes(response.header("etag"));
    // CompleteMultipartUpload names every part by its ETag.
    if (part && stored.etag.empty()) return std::string("no ETag in the answer");
    const std::string& kept = response.header("x-amz-checksum-crc64nvme");
    if (!kept.empty() && kept != base64(stored.crc64nvme)) {
      return fmt::format("stored checksum {} is not the CRC64NVME {} of the bytes sent", kept,
                         base64(stored.crc64nvme));
    }
    return std::nullopt;
  });
  return stored;
}

}  // namespace tp::s3
