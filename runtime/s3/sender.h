// Sends S3 requests (s3/request.h): each signed (SigV4) for its virtual-hosted or path-style URL, sent over a
// connection kept for reuse, its answer classified, and retried under common/retry.h's policy on 5xx,
// 429/SlowDown, timeouts, resets and truncated bodies.
//
// One Sender serves calls on several threads at once: idle connections are shared under a lock, and each
// call (a listing, a download, an upload) has its own cancellation, so that one call's failure stops only
// that call's transfers.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/retry.h"
#include "http/transfer.h"
#include "s3/credentials.h"
#include "s3/request.h"

namespace tp::s3 {

struct TransferSettings {
  int parallelism = 16;  // transfers (objects or parts) in flight
  std::uint64_t part_size = 8ull << 20;
  std::uint64_t parallel_download_threshold = 32ull << 20;  // larger objects download as parallel ranges
  std::uint64_t multipart_upload_threshold = 64ull << 20;   // larger files upload in parts
  RetryPolicy retry;                                        // per request
  int list_page_size = 1000;
  http::Settings http;
};

class Sender;

// One connection lent to a call, and that call's cancellation (set once another of its transfers failed).
class Channel {
 public:
  Channel(const Sender& sender, http::Handle& handle, const std::atomic<bool>& cancelled)
      : sender_(sender), handle_(handle), cancelled_(cancelled) {}
  const Sender& sender() const { return sender_; }

  // Signs and sends the request; transport failures are in the response, not thrown.
  http::Response send(const Request& request) const;
  // Runs `attempt` under the settings' retry policy until it returns no cause (a retryable failure),
  // throws, or the policy gives up (tp::Error(network)); fails at once once the call is cancelled.
  void retrying(const std::string& what, const std::function<std::optional<std::string>()>& attempt) const;

 private:
  const Sender& sender_;
  http::Handle& handle_;
  const std::atomic<bool>& cancelled_;
};

class Sender {
 public:
  // Applies S3's limits to the settings (at least one transfer, parts of at least 5 MiB) and takes the
  // connection's CA bundle when the settings name none.
  Sender(Connection connection, TransferSettings settings);
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  const Connection& connection() const { return connection_; }
  const TransferSettings& settings() const { return settings_; }

  // No value for an expected status; the cause for a retryable failure; throws tp::Error for a permanent
  // one (usage for credentials and TLS, network for an object that changed while read, data for the rest).
  std::optional<std::string> check(const http::Response& response, const std::string& what,
                                   std::initializer_list<long> expected) const;
  // "GET s3://bucket/key at https://endpoint", for messages.
  std::string describe(const std::string& method, const std::string& bucket, const std::string& key) const;

  // Runs `call` on one connection, for a call of one request at a time.
  void on_one_connection(const std::function<void(const Channel&)>& call);
  // Runs `count` tasks of one call on up to `parallelism` threads, each with its own connection; the first
  // failure cancels the call's other transfers and is rethrown.
  void run_parallel(std::size_t count, const std::function<void(const Channel&, std::size_t)>& task);

 private:
  class ConnectionLease;

  Connection connection_;
  TransferSettings settings_;
  std::mutex idle_connections_mutex_;
  std::vector<std::unique_ptr<http::Handle>> idle_connections_;
};

}  // namespace tp::s3
