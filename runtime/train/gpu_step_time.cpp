#include "train/gpu_step_time.h"

#if TRAINPOINT_WITH_CUDA
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

#include <deque>
#include <utility>
#include <vector>

#include "common/error.h"

namespace tp::train {

#if TRAINPOINT_WITH_CUDA

struct GpuStepTimer::Events {
  struct Mark {
    StepPart part;  // what the work queued after this event is
    cudaEvent_t event;
  };
  struct Step {
    std::int64_t number;
    std::vector<Mark> marks;  // the first opens the step
    cudaEvent_t end;
  };

  explicit Events(c10::DeviceIndex index) : device(index) {}
  ~Events() {
    for (const Mark& mark : open) spare.push_back(mark.event);
    for (const Step& step : ended) {
      for (const Mark& mark : step.marks) spare.push_back(mark.event);
      spare.push_back(step.end);
    }
    for (cudaEvent_t event : spare) cudaEventDestroy(event);  // no throwing here: a failure only leaks
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;

  // An event recorded now on the device's current stream (the one training queues its work on). Events are
  // reused: creating one is a driver call.
  cudaEvent_t record() {
    const c10::cuda::CUDAGuard guard(device);
    cudaEvent_t event = nullptr;
    if (spare.empty()) {
      C10_CUDA_CHECK(cudaEventCreate(&event));
    } else {
      event = spare.back();
      spare.pop_back();
    }
    C10_CUDA_CHECK(cudaEventRecord(event, c10::cuda::getCurrentCUDAStream(device)));
    return event;
  }

  static double seconds_between(cudaEvent_t from, cudaEvent_t to) {
    float milliseconds = 0;
    C10_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, from, to));
    return milliseconds / 1000.0;
  }

  c10::DeviceIndex device;
  std::vector<Mark> open;  // the current step's
  std::deque<Step> ended;  // not taken yet
  std::vector<cudaEvent_t> spare;
};

std::unique_ptr<GpuStepTimer> GpuStepTimer::on(c10::Device device) {
  if (!device.is_cuda()) return nullptr;
  return std::unique_ptr<GpuStepTimer>(new GpuStepTimer(std::make_unique<Events>(device.index())));
}

void GpuStepTimer::start() {
  for (const auto& mark : events_->open) events_->spare.push_back(mark.event);
  events_->open.clear();
  enter(StepPart::data_wait);
}

void GpuStepTimer::enter(StepPart part) { events_->open.push_back({part, events_->record()}); }

void GpuStepTimer::end_step(std::int64_t step) {
  events_->ended.push_back({step, std::exchange(events_->open, {}), events_->record()});
  enter(StepPart::data_wait);
}

StepTimer::Step GpuStepTimer::take(std::int64_t step) {
  if (events_->ended.empty() || events_->ended.front().number != step) {
    fail(ExitCode::internal, "GPU step timer: step {} taken out of order (the oldest ended step is {})", step,
         events_->ended.empty() ? -1 : events_->ended.front().number);
  }
  Events::Step ended = std::move(events_->ended.front());
  events_->ended.pop_front();
  C10_CUDA_CHECK(cudaEventSynchronize(ended.end));
  StepTimer::Step timed;
  timed.seconds = Events::seconds_between(ended.marks.front().event, ended.end);
  for (std::size_t i = 0; i < ended.marks.size(); ++i) {
    const cudaEvent_t next = i + 1 < ended.marks.size() ? ended.marks[i + 1].event : ended.end;
    timed.times[ended.marks[i].part] += Events::seconds_between(ended.marks[i].event, next);
    events_->spare.push_back(ended.marks[i].event);
  }
  events_->spare.push_back(ended.end);
  return timed;
}

#else  // a build without CUDA: on() makes no timer, so the others are never called

struct GpuStepTimer::Events {};
std::unique_ptr<GpuStepTimer> GpuStepTimer::on(c10::Device) { return nullptr; }
void GpuStepTimer::start() {}
void GpuStepTimer::enter(StepPart) {}
void GpuStepTimer::end_step(std::int64_t) {}
StepTimer::Step GpuStepTimer::take(std::int64_t) { return {}; }

#endif

GpuStepTimer::GpuStepTimer(std::unique_ptr<Events> events) : events_(std::move(events)) {}
GpuStepTimer::~GpuStepTimer() = default;

}  // namespace tp::train
