#include "s3/client.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <set>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "s3/ranged_download.h"
#include "s3/xml.h"

namespace tp::s3 {
namespace {

namespace fs = std::filesystem;

// One page of a listing, retried alone.
xml::ListPage list_page(const Channel& channel, const Request& request, const std::string& what) {
  xml::ListPage page;
  channel.retrying(what, [&]() -> std::optional<std::string> {
    const http::Response response = channel.send(request);
    if (auto cause = channel.sender().check(response, what, {200})) return cause;
    // A cut or garbled page is a transport fault: ask again.
    try {
      page = xml::parse_list_objects_v2(response.body);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::nullopt;
  });
  return page;
}

// An upload's tasks: a file up to the threshold is one, a larger one a task per part of its multipart upload
// (s3/multipart_upload.h).
struct UploadTask {
  std::size_t item = 0;
  std::uint64_t size = 0;
  MultipartUpload* multipart = nullptr;
  std::size_t part = 0;
};
struct UploadPlan {
  std::vector<UploadTask> tasks;
  std::vector<std::unique_ptr<MultipartUpload>> multiparts;
};

UploadPlan plan_upload(const std::vector<UploadItem>& items, const TransferSettings& settings) {
  UploadPlan plan;
  for (std::size_t i = 0; i < items.size(); ++i) {
    std::error_code error;
    const std::uint64_t size = fs::file_size(items[i].source, error);
    if (error) fail(ExitCode::output, "cannot read {}: {}", items[i].source.string(), error.message());
    if (size <= settings.multipart_upload_threshold) {
      plan.tasks.push_back({i, size});
      continue;
    }
    plan.multiparts.push_back(std::make_unique<MultipartUpload>(items[i], size, settings.part_size));
    MultipartUpload* multipart = plan.multiparts.back().get();
    for (std::size_t part = 0; part < multipart->part_count(); ++part)
      plan.tasks.push_back({i, multipart->part_size(part), multipart, part});
  }
  return plan;
}

}  // namespace

Client::Client(Connection connection, TransferSettings settings)
    : sender_(std::move(connection), std::move(settings)) {
  // Once per process and connection: a run makes a client for its checks, its data and its outputs.
  const Connection& used = sender_.connection();
  const std::string described =
      fmt::format("s3: endpoint {} (from {}, {}-style, region {}), credentials from {}", used.endpoint,
                  used.endpoint_source, used.path_style ? "path" : "virtual-hosted", used.region,
                  used.credentials.source);
  static std::mutex mutex;
  static std::set<std::string> logged;
  const std::lock_guard<std::mutex> lock(mutex);
  if (logged.insert(described).second) spdlog::info("{}", described);
}

Listing Client::list(const std::string& bucket, const std::string& prefix, const std::string& delimiter) {
  Listing listing;
  const std::string what = sender_.describe("ListObjectsV2", bucket, prefix);
  sender_.on_one_connection([&](const Channel& channel) {
    std::string continuation;
    std::set<std::string> tokens_seen;  // a server that hands out a token again would loop forever
    do {
      xml::ListPage page =
          list_page(channel,
                    Request::list_objects_v2(bucket, prefix, delimiter, sender_.settings().list_page_size,
                                             continuation),
                    what);
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
  });
  std::sort(listing.objects.begin(), listing.objects.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return listing;
}

std::optional<ObjectInfo> Client::head(const std::string& bucket, const std::string& key) {
  const std::string what = sender_.describe("HEAD", bucket, key);
  std::optional<ObjectInfo> object;
  sender_.on_one_connection([&](const Channel& channel) {
    channel.retrying(what, [&]() -> std::optional<std::string> {
      const http::Response response = channel.send(Request::head_object(bucket, key));
      if (response.transport == http::Transport::ok && response.status == 404) {
        object.reset();
        return std::nullopt;
      }
      if (auto cause = sender_.check(response, what, {200})) return cause;
      object = ObjectInfo{key, std::stoull("0" + response.header("content-length")),
                          xml::strip_quotes(response.header("etag"))};
      return std::nullopt;
    });
  });
  return object;
}

void Client::remove(const std::string& bucket, const std::string& key) {
  const std::string what = sender_.describe("DELETE", bucket, key);
  sender_.on_one_connection([&](const Channel& channel) {
    channel.retrying(what, [&]() -> std::optional<std::string> {
      return sender_.check(channel.send(Request::delete_object(bucket, key)), what, {200, 204});
    });
  });
}

void Client::download(const std::string& bucket, const std::vector<DownloadItem>& items,
                      const std::function<void(const DownloadItem&)>& on_done) {
  // Small objects are one task each; a large one is a task per range (s3/ranged_download.h).
  struct Task {
    const DownloadItem* whole = nullptr;
    RangedDownload* ranged = nullptr;
    std::size_t range = 0;
  };
  std::vector<Task> tasks;
  std::vector<const DownloadItem*> large;
  for (const DownloadItem& item : items) {
    if (item.object.size <= sender_.settings().parallel_download_threshold) {
      tasks.push_back({&item});
    } else {
      large.push_back(&item);
    }
  }
  std::vector<std::unique_ptr<RangedDownload>> ranged;  // their temporary files go once the call ends
  if (!large.empty()) {
    sender_.on_one_connection([&](const Channel& channel) {
      for (const DownloadItem* item : large)
        ranged.push_back(std::make_unique<RangedDownload>(channel, bucket, *item));
    });
  }
  for (const auto& download : ranged) {
    for (std::size_t range = 0; range < download->range_count(); ++range)
      tasks.push_back({nullptr, download.get(), range});
  }
  std::mutex done_mutex;
  sender_.run_parallel(tasks.size(), [&](const Channel& channel, std::size_t index) {
    const Task& task = tasks[index];
    if (task.whole != nullptr) {
      download_whole(channel, bucket, *task.whole);
    } else if (!task.ranged->download(channel, task.range)) {
      return;  // the object's other ranges are not all in yet
    }
    if (!on_done) return;
    std::lock_guard<std::mutex> lock(done_mutex);
    on_done(task.whole != nullptr ? *task.whole : task.ranged->item());
  });
}

std::vector<ObjectInfo> Client::upload(const std::string& bucket, const std::vector<UploadItem>& items,
                                       const SentCallback& on_sent) {
  UploadPlan plan = plan_upload(items, sender_.settings());
  const std::vector<UploadTask>& tasks = plan.tasks;
  const std::vector<std::unique_ptr<MultipartUpload>>& multiparts = plan.multiparts;
  sender_.on_one_connection([&](const Channel& channel) {
    for (const auto& multipart : multiparts) multipart->create(channel, bucket);
  });

  std::vector<ObjectInfo> stored(items.size());
  std::mutex sent_mutex;
  auto report = [&](std::uint64_t bytes, bool object_complete) {
    if (!on_sent) return;
    std::lock_guard<std::mutex> lock(sent_mutex);
    on_sent(bytes, object_complete);
  };
  try {
    sender_.run_parallel(tasks.size(), [&](const Channel& channel, std::size_t index) {
      const UploadTask& task = tasks[index];
      if (task.multipart != nullptr) {
        task.multipart->put_part(channel, bucket, task.part);
      } else {
        stored[task.item] = ObjectInfo{items[task.item].key, task.size,
                                       put_object(channel, bucket, items[task.item], task.size)};
      }
      report(task.size, task.multipart == nullptr);
    });
    sender_.on_one_connection([&](const Channel& channel) {
      for (const auto& multipart : multiparts) {
        stored[static_cast<std::size_t>(&multipart->item() - items.data())] =
            multipart->complete(channel, bucket);
        report(0, true);
      }
    });
  } catch (...) {
    sender_.on_one_connection([&](const Channel& channel) {
      for (const auto& multipart : multiparts) multipart->abort(channel, bucket);
    });
    throw;
  }
  return stored;
}

}  // namespace tp::s3
