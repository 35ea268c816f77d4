#include "s3/streaming.h"

#include <algorithm>

#include "common/error.h"

namespace tp::s3 {

namespace fs = std::filesystem;

PrefetchCache::PrefetchCache(Client& client, std::string bucket, std::vector<ObjectInfo> objects,
                             std::vector<fs::path> relative_paths, fs::path directory, Options options)
    : client_(client),
      bucket_(std::move(bucket)),
      objects_(std::move(objects)),
      relative_paths_(std::move(relative_paths)),
      directory_(std::move(directory)),
      options_(options),
      entries_(objects_.size()),
      position_in_order_(objects_.size(), SIZE_MAX) {
  fetcher_ = std::thread([this] { fetch_loop(); });
}

PrefetchCache::~PrefetchCache() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  fetcher_.join();
}

void PrefetchCache::set_order(std::vector<std::size_t> order) {
  std::lock_guard<std::mutex> lock(mutex_);
  order_ = std::move(order);
  std::fill(position_in_order_.begin(), position_in_order_.end(), SIZE_MAX);
  for (std::size_t position = 0; position < order_.size(); ++position)
    position_in_order_[order_[position]] = position;
  cursor_ = 0;
  changed_.notify_all();
}

fs::path PrefetchCache::acquire(std::size_t index) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (index >= entries_.size()) fail(ExitCode::internal, "object {} of {} requested", index, entries_.size());
  Entry& entry = entries_[index];
  // The fetcher is woken only when it has more to do: a window moved on, or an object wanted now. Waking it
  // at every read of a packed shard (thousands per shard) cost a fifth of a streamed epoch's CPU.
  bool wake_fetcher = false;
  if (position_in_order_[index] != SIZE_MAX && position_in_order_[index] + 1 > cursor_) {
    cursor_ = position_in_order_[index] + 1;
    wake_fetcher = true;
  }
  if (entry.holders++ == 0) evictable_.erase(entry.last_use);  // held: never evicted while read
  if (entry.state == State::remote) {
    urgent_.push_back(index);
    wake_fetcher = true;
  }
  if (wake_fetcher) changed_.notify_all();
  changed_.wait(lock, [&] { return entry.state == State::local || error_; });
  if (entry.state != State::local) {
    --entry.holders;
    std::rethrow_exception(error_);
  }
  entry.read = true;
  entry.last_use = ++clock_;
  return directory_ / relative_paths_[index];
}

void PrefetchCache::release(std::size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& entry = entries_.at(index);
  if (entry.holders > 0 && --entry.holders == 0 && entry.state == State::local && entry.read) {
    evictable_[entry.last_use] = index;
    if (fetcher_needs_room_) changed_.notify_all();
  }
}

std::uint64_t PrefetchCache::bytes_on_disk() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_on_disk_;
}

bool PrefetchCache::make_room(std::uint64_t bytes) {
  while (bytes_on_disk_ + bytes > options_.capacity_bytes) {
    if (evictable_.empty()) return false;
    const std::size_t victim = evictable_.begin()->second;
    evictable_.erase(evictable_.begin());
    std::error_code ignored;
    fs::remove(directory_ / relative_paths_[victim], ignored);
    entries_[victim].state = State::remote;
    entries_[victim].read = false;
    bytes_on_disk_ -= objects_[victim].size;
  }
  return true;
}

void PrefetchCache::fetch_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    // What to fetch next: objects a reader waits for first (even past the capacity: a reader must get its
    // object), then the coming objects in read order while they fit.
    std::vector<DownloadItem> batch;
    std::vector<std::size_t> batch_indices;
    std::uint64_t batch_bytes = 0;
    const std::size_t batch_limit = options_.objects_per_fetch > 0
                                        ? options_.objects_per_fetch
                                        : static_cast<std::size_t>(client_.settings().parallelism);
    auto take = [&](std::size_t index) {
      entries_[index].state = State::fetching;
      batch_indices.push_back(index);
      batch.push_back({objects_[index], directory_ / relative_paths_[index]});
      batch_bytes += objects_[index].size;
    };
    for (const std::size_t index : urgent_) {
      if (entries_[index].state == State::remote && batch.size() < batch_limit) {
        make_room(batch_bytes + objects_[index].size);
        take(index);
      }
    }
    urgent_.erase(std::remove_if(urgent_.begin(), urgent_.end(),
                                 [&](std::size_t index) { return entries_[index].state != State::remote; }),
                  urgent_.end());
    const std::size_t window_end = std::min(order_.size(), cursor_ + options_.lookahead);
    fetcher_needs_room_ = false;
    for (std::size_t position = cursor_; position < window_end && batch.size() < batch_limit; ++position) {
      const std::size_t index = order_[position];
      if (entries_[index].state != State::remote) continue;
      if (!make_room(batch_bytes + objects_[index].size)) {
        fetcher_needs_room_ = true;
        break;
      }
      take(index);
    }
    if (batch.empty()) {
      changed_.wait(lock);
      continue;
    }
    lock.unlock();
    // Each object is readable as soon as it is in, not when the whole batch is.
    const auto landed = [&](const DownloadItem& item) {
      const std::size_t index = batch_indices[static_cast<std::size_t>(&item - batch.data())];
      std::lock_guard<std::mutex> relock(mutex_);
      entries_[index].state = State::local;
      entries_[index].last_use = ++clock_;
      bytes_on_disk_ += objects_[index].size;
      changed_.notify_all();
    };
    std::exception_ptr failure;
    try {
      client_.download(bucket_, batch, landed);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    for (const std::size_t index : batch_indices) {
      if (entries_[index].state == State::fetching) entries_[index].state = State::remote;  // failed
    }
    if (failure) error_ = failure;
    changed_.notify_all();
    if (failure) return;
  }
}

}  // namespace tp::s3
