#include "telemetry/sinks.h"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>

namespace tp::telemetry {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace {

struct ScalarsRecord {
  std::int64_t step;
  double wall_time;
  Scalars values;
};
struct StartRecord {
  HParams hparams;
  double wall_time;
};
struct ArtifactRecord {
  std::filesystem::path file;
};
struct OutcomeRecord {
  std::string text;
  double wall_time;
};
struct EndRecord {
  RunEnd end;
  double wall_time;
};
struct FlushRecord {};
using Record = std::variant<ScalarsRecord, StartRecord, ArtifactRecord, OutcomeRecord, EndRecord, FlushRecord>;

// The run's end, to a sink that failed before: a failure now is only a debug line.
void tell_the_end_quietly(Sink& sink, const EndRecord& end) {
  try {
    sink.run_ended(end.end, end.wall_time);
  } catch (const std::exception& error) {
    spdlog::debug("{}: telling it how the run ended failed too: {}", sink.name(), error.what());
  }
}

}  // namespace

struct Sinks::State {
  State(std::vector<std::unique_ptr<Sink>> all, std::size_t most)
      : sinks(std::move(all)), failed(sinks.size(), false), capacity(most) {}

  void push(Record record);
  void deliver(const Record& record);
  // The sink the thread is writing to, or last wrote to: the one a writer that falls behind waits for.
  std::string slow_sink_name() const { return sinks[writing]->name(); }

  std::vector<std::unique_ptr<Sink>> sinks;
  std::vector<bool> failed;  // under mutex
  std::size_t writing = 0;   // under mutex
  const std::size_t capacity;
  std::mutex mutex;
  std::condition_variable wake;  // a record, or stopping
  std::condition_variable done;  // written grew, or the thread finished
  std::deque<Record> queue;
  std::uint64_t pushed = 0;    // records queued so far
  std::uint64_t written = 0;   // records the thread has finished with
  std::uint64_t behind = 0;    // a flush that a wait gave up on: no waiting until it is written
  bool dropping_warned = false;
  bool stopping = false;
  bool finished = false;
};

void Sinks::State::push(Record record) {
  if (sinks.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (queue.size() >= capacity) {
      if (!dropping_warned) {
        dropping_warned = true;
        spdlog::warn("{} records wait to be written: {} falls behind, and records are dropped until it "
                     "catches up (training goes on)", queue.size(), slow_sink_name());
      }
      return;
    }
    queue.push_back(std::move(record));
    ++pushed;
  }
  wake.notify_one();
}

void Sinks::State::deliver(const Record& record) {
  const auto* end = std::get_if<EndRecord>(&record);
  for (std::size_t i = 0; i < sinks.size(); ++i) {
    bool has_failed = false;
    {
      std::lock_guard<std::mutex> lock(mutex);
      has_failed = failed[i];
      writing = i;
    }
    Sink& sink = *sinks[i];
    if (has_failed) {
      // Still told how the run ended, so that a tracking server does not show it running for ever; its
      // failure was the one warning.
      if (end) tell_the_end_quietly(sink, *end);
      continue;
    }
    try {
      if (const auto* values = std::get_if<ScalarsRecord>(&record)) {
        sink.scalars(values->step, values->wall_time, values->values);
      } else if (const auto* start = std::get_if<StartRecord>(&record)) {
        sink.run_started(start->hparams, start->wall_time);
      } else if (const auto* artifact = std::get_if<ArtifactRecord>(&record)) {
        sink.artifact(artifact->file);
      } else if (const auto* outcome = std::get_if<OutcomeRecord>(&record)) {
        sink.outcome(outcome->text, outcome->wall_time);
      } else if (end) {
        sink.run_ended(end->end, end->wall_time);
      } else {
        sink.flush();
      }
    } catch (const std::exception& error) {
      spdlog::warn("{}: {}; it gets no more records of this run (training goes on)", sink.name(), error.what());
      std::lock_guard<std::mutex> lock(mutex);
      failed[i] = true;
    }
  }
}

Sinks::Sinks(std::vector<std::unique_ptr<Sink>> sinks, std::size_t capacity, std::chrono::milliseconds close_wait)
    : state_(std::make_shared<State>(std::move(sinks), capacity)), close_wait_(close_wait) {
  if (!state_->sinks.empty()) thread_ = std::thread(run, state_);
}

Sinks::~Sinks() {
  if (!thread_.joinable()) return;
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->stopping = true;
  state_->wake.notify_one();
  if (state_->done.wait_for(lock, close_wait_, [&] { return state_->finished; })) {
    lock.unlock();
    thread_.join();
    return;
  }
  spdlog::warn("{} has not written the run's last records after {}s: the process ends without them",
               state_->slow_sink_name(), std::chrono::duration<double>(close_wait_).count());
  lock.unlock();
  thread_.detach();  // it holds the state; the process's end stops it
}

void Sinks::scalars(std::int64_t step, Scalars values) {
  state_->push(ScalarsRecord{step, unix_seconds(), std::move(values)});
}

void Sinks::run_started(HParams hparams) {
  state_->push(StartRecord{std::move(hparams), unix_seconds()});
}

void Sinks::artifact(std::filesystem::path file) {
  state_->push(ArtifactRecord{std::move(file)});
}

void Sinks::outcome(std::string text) {
  state_->push(OutcomeRecord{std::move(text), unix_seconds()});
}

void Sinks::run_ended(RunEnd end) {
  state_->push(EndRecord{end, unix_seconds()});
}

void Sinks::flush() {
  state_->push(FlushRecord{});
}

bool Sinks::flush_and_wait(std::chrono::milliseconds timeout) {
  if (state_->sinks.empty()) return true;
  flush();
  std::unique_lock<std::mutex> lock(state_->mutex);
  const std::uint64_t target = state_->pushed;
  if (state_->written < state_->behind) return false;
  if (state_->done.wait_for(lock, timeout, [&] { return state_->written >= target; })) return true;
  state_->behind = target;
  return false;
}

std::vector<std::filesystem::path> Sinks::files() const {
  std::vector<std::filesystem::path> all;
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (std::size_t i = 0; i < state_->sinks.size(); ++i) {
    if (state_->failed[i]) continue;
    for (auto& file : state_->sinks[i]->files()) {
      std::error_code error;
      if (std::filesystem::exists(file, error)) all.push_back(std::move(file));  // written once records came
    }
  }
  return all;
}

void Sinks::run(const std::shared_ptr<State>& state) {
  std::unique_lock<std::mutex> lock(state->mutex);
  for (;;) {
    state->wake.wait(lock, [&] { return state->stopping || !state->queue.empty(); });
    if (state->queue.empty()) break;  // stopping, with everything written
    Record record = std::move(state->queue.front());
    state->queue.pop_front();
    lock.unlock();
    state->deliver(record);
    lock.lock();
    ++state->written;
    state->done.notify_all();
  }
  lock.unlock();
  state->deliver(FlushRecord{});  // the last records reach the disk before the sinks close
  lock.lock();
  state->finished = true;
  state->done.notify_all();
}

}  // namespace tp::telemetry
