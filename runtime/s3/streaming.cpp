#include "s3/streaming.h"

#include <algorithm>

#include "common/error.h"

namespace tp::s3 {

namespace fs = std::filesystem;

namespace {

// How often a fetch that found no room in the node's cache tries again, unless this rank lets go of something
// first: soon for an object a reader waits for, less often for one ahead of the readers.
constexpr std::chrono::milliseconds kRoomPollWanted{20};
constexpr std::chrono::milliseconds kRoomPollAhead{100};

}  // namespace

PrefetchCache::PrefetchCache(Client& client, std::string bucket, std::vector<ObjectInfo> objects,
                             std::vector<fs::path> relative_paths, fs::path directory, Options options)
    : client_(&client),
      bucket_(std::move(bucket)),
      objects_(std::move(objects)),
      relative_paths_(std::move(relative_paths)),
      directory_(std::move(directory)),
      options_(options),
      entries_(objects_.size()),
      position_in_order_(objects_.size(), SIZE_MAX) {
  fetcher_ = std::thread([this] { fetch_loop(); });
}

PrefetchCache::PrefetchCache(std::shared_ptr<NodeCache> node, Options options)
    : node_(std::move(node)), client_(nullptr), options_(options), entries_(node_->size()),
      position_in_order_(node_->size(), SIZE_MAX) {
  objects_.reserve(node_->size());
  for (std::size_t i = 0; i < node_->size(); ++i) objects_.push_back(node_->object(i));
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
  if (node_) let_go(Shed::nothing);
  changed_.notify_all();
}

fs::path PrefetchCache::path(std::size_t index) const {
  return node_ ? node_->path(index) : directory_ / relative_paths_[index];
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
  if (node_ && recent_[0] != index) {
    recent_[1] = std::exchange(recent_[0], index);
    let_go(Shed::nothing);  // what the reader has moved past
  }
  if (entry.holders++ == 0 && !node_) evictable_.erase(entry.last_use);  // held: never evicted while read
  // Wanted now. A node's cache may also find no room for an object it is fetching: tried again as wanted now.
  const bool wanted = entry.state == State::remote || (node_ && entry.state == State::fetching);
  if (wanted && std::find(urgent_.begin(), urgent_.end(), index) == urgent_.end()) {
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
  return path(index);
}

void PrefetchCache::release(std::size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& entry = entries_.at(index);
  if (entry.holders > 0 && --entry.holders == 0 && entry.state == State::local && entry.read) {
    if (node_) {
      if (!keeps(index, Shed::nothing)) let_go_of(index);
    } else {
      evictable_[entry.last_use] = index;
    }
    if (fetcher_needs_room_) changed_.notify_all();
  }
}

std::uint64_t PrefetchCache::bytes_on_disk() const {
  if (node_) return node_->bytes_on_disk();
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_on_disk_;
}

bool PrefetchCache::keeps(std::size_t index, Shed shed) const {
  if (entries_[index].holders > 0) return true;
  const std::size_t position = position_in_order_[index];
  if (position != SIZE_MAX && position >= cursor_ && position < cursor_ + options_.lookahead) {
    return shed != Shed::window || position == cursor_;  // the next of the order is read soon, whatever else
  }
  // Read last: a shuffle block spans the one or two shards read last, each read and released in turn.
  return shed == Shed::nothing && (index == recent_[0] || index == recent_[1]);
}

void PrefetchCache::let_go_of(std::size_t index) {
  Entry& entry = entries_[index];
  entry.hold = {};  // the node may evict it now; it is found there again if not
  entry.state = State::remote;
  entry.read = false;
  held_.erase(std::remove(held_.begin(), held_.end(), index), held_.end());
}

bool PrefetchCache::let_go(Shed shed) {
  std::vector<std::size_t> done;
  for (const std::size_t index : held_) {
    if (!keeps(index, shed)) done.push_back(index);
  }
  for (const std::size_t index : done) let_go_of(index);
  return !done.empty();
}

void PrefetchCache::note_waiting() {
  const bool waiting = std::any_of(urgent_.begin(), urgent_.end(), [&](std::size_t index) {
    return entries_[index].waiting_for_room_since.has_value();
  });
  if (!waiting) {
    waiting_ = {};
  } else if (!waiting_.held()) {
    waiting_ = node_->waiting_for_room();  // at once: no process holds the lock but for a moment
  }
}

bool PrefetchCache::fetch_shared(std::unique_lock<std::mutex>& lock) {
  // Urgent: wanted now and not in yet. An object in, or no longer waited for, is not.
  urgent_.erase(std::remove_if(urgent_.begin(), urgent_.end(),
                               [&](std::size_t index) {
                                 Entry& entry = entries_[index];
                                 if (entry.state != State::local && entry.holders > 0) return false;
                                 entry.waiting_for_room_since.reset();
                                 return true;
                               }),
                urgent_.end());
  note_waiting();
  std::size_t next = SIZE_MAX;
  for (const std::size_t index : urgent_) {
    if (next == SIZE_MAX && entries_[index].state == State::remote) next = index;
  }
  const std::size_t window_end = std::min(order_.size(), cursor_ + options_.lookahead);
  for (std::size_t position = cursor_; next == SIZE_MAX && position < window_end; ++position) {
    if (entries_[order_[position]].state == State::remote) next = order_[position];
  }
  if (next == SIZE_MAX) return false;
  // A reader waits for it: fetched even one object past the capacity, and past that once waited too long.
  NodeCache::Room room = NodeCache::Room::capacity;
  if (entries_[next].holders > 0) {
    const auto& since = entries_[next].waiting_for_room_since;
    const bool waited_too_long = since && std::chrono::steady_clock::now() - *since >= options_.patience;
    room = waited_too_long ? NodeCache::Room::any : NodeCache::Room::one_over;
  }
  entries_[next].state = State::fetching;
  lock.unlock();
  std::optional<NodeCache::Hold> hold;
  std::exception_ptr failure;
  try {
    hold = node_->fetch(next, room);
  } catch (...) {
    failure = std::current_exception();
  }
  lock.lock();
  Entry& entry = entries_[next];
  entry.state = State::remote;
  if (failure) {
    error_ = failure;
    waiting_ = {};
    changed_.notify_all();
    return true;
  }
  if (hold) {
    entry.state = State::local;
    entry.hold = std::move(*hold);
    entry.last_use = ++clock_;
    entry.waiting_for_room_since.reset();
    held_.push_back(next);
    note_waiting();
    if (!keeps(next, Shed::nothing)) let_go_of(next);  // the order moved on while it came
    changed_.notify_all();
    return true;
  }
  if (entry.holders == 0) {
    // No room ahead of the readers: what this rank read last goes first, else a reader's release makes some.
    if (!let_go(Shed::recent)) changed_.wait_for(lock, kRoomPollAhead);
    return true;
  }
  // No room for a reader's object. The node's ranks fetch nothing ahead into room from now on, and give up what
  // they read last; this rank gives up what it does not read now: what it read last, then its window beyond
  // the next object. Else the room comes from the node's readers moving on, tried again soon, and once the
  // reader has waited options.patience, past the bound (Room::any).
  if (!entry.waiting_for_room_since) entry.waiting_for_room_since = std::chrono::steady_clock::now();
  note_waiting();
  if (!let_go(Shed::recent) && !let_go(Shed::window)) changed_.wait_for(lock, kRoomPollWanted);
  return true;
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
  while (node_ && !stopping_ && !error_) {
    try {
      if (fetch_shared(lock)) continue;
      // Nothing to fetch. What this rank read last it keeps until a reader of the node waits for room: looked
      // at now and then while it keeps some.
      const bool read_last = std::any_of(held_.begin(), held_.end(),
                                         [&](std::size_t index) { return !keeps(index, Shed::recent); });
      if (!read_last) {
        changed_.wait(lock);
      } else if (changed_.wait_for(lock, kRoomPollAhead) == std::cv_status::timeout && node_->readers_waiting()) {
        let_go(Shed::recent);
      }
    } catch (...) {  // a lock file of the node's cache (the fetches' own errors are the readers')
      error_ = std::current_exception();
      waiting_ = {};
      changed_.notify_all();
    }
  }
  while (!node_ && !stopping_) {
    // What to fetch next: objects a reader waits for first (even past the capacity: a reader must get its
    // object), then the coming objects in read order while they fit.
    std::vector<DownloadItem> batch;
    std::vector<std::size_t> batch_indices;
    std::uint64_t batch_bytes = 0;
    const std::size_t batch_limit = options_.objects_per_fetch > 0
                                        ? options_.objects_per_fetch
                                        : static_cast<std::size_t>(client_->settings().parallelism);
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
      client_->download(bucket_, batch, landed);
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
