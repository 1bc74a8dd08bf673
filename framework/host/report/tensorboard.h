#pragma once
// TensorBoard event files from a variant's metrics, so that `tensorboard --logdir runs/`
// shows each variant as a run. The protobuf encoding is written by hand (tensorflow/core/util/
// event.proto, summary.proto): only the fields TensorBoard's scalar dashboard reads.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "report/run_outputs.h"

namespace bertlab {

/// The file_version TensorBoard expects in a file's first Event.
inline constexpr const char* kEventFileVersion = "brain.Event:2";

/// Event{wall_time = 1, step = 2, file_version = 3} serialized.
std::string file_version_event(double wall_time);

/// Event{wall_time = 1, step = 2, summary = 5 Summary{value = 1 Value{tag = 1,
/// simple_value = 2}}} serialized: one Value per (tag, value).
std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<std::pair<std::string, float>>& scalars);

/// The Events of a finished variant: the file_version one, then per metrics.jsonl line loss,
/// learning_rate, grad_norm and throughput (examples/s) at its step, timed start_time +
/// elapsed_s, and the eval metrics ("eval/NAME") at the last step. Non-finite values are
/// left out.
std::vector<std::string> variant_events(const VariantOutputs& outputs, double start_time);

/// Writes `dir`/events.out.tfevents.<start time>.<host> (TFRecord-framed Events) atomically and
/// removes the event files of earlier runs of the variant there. Returns the path.
std::filesystem::path write_event_file(const std::filesystem::path& dir, double start_time,
                                       const std::vector<std::string>& events);

}  // namespace bertlab
