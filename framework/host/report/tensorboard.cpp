// Hand-written protobuf for TensorBoard's Event and Summary messages, TFRecord-framed.

#include "report/tensorboard.h"

#include <bertlab/io/atomic_file.h>
#include <bertlab/io/protobuf_wire.h>
#include <bertlab/io/tfrecord.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <climits>
#include <cmath>
#include <cstring>

namespace bertlab {

namespace fs = std::filesystem;

namespace {

using protobuf::kVarint;
using protobuf::put_bytes;
using protobuf::put_double;
using protobuf::put_float;
using protobuf::put_tag;
using protobuf::put_varint;

std::string event_head(double wall_time, int64_t step) {
  std::string event;
  put_double(event, 1, wall_time);
  if (step != 0) {  // proto3: a default value is not written
    put_tag(event, 2, kVarint);
    put_varint(event, static_cast<uint64_t>(step));
  }
  return event;
}

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  // Only characters safe in a file name.
  std::string out;
  for (const char* p = name; *p != '\0'; ++p) {
    const char c = *p;
    out +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ? c : '_';
  }
  return out;
}

}  // namespace

std::string file_version_event(double wall_time) {
  std::string event = event_head(wall_time, 0);
  put_bytes(event, 3, kEventFileVersion);
  return event;
}

std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<std::pair<std::string, float>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    put_bytes(v, 1, tag);
    put_float(v, 2, value);
    put_bytes(summary, 1, v);
  }
  std::string event = event_head(wall_time, step);
  put_bytes(event, 5, summary);
  return event;
}

std::vector<std::string> variant_events(const VariantOutputs& outputs, double start_time) {
  std::vector<std::string> events = {file_version_event(start_time)};
  // metrics.jsonl key → TensorBoard tag.
  static const std::pair<const char*, const char*> kTags[] = {
      {"loss", "loss"},
      {"learning_rate", "learning_rate"},
      {"grad_norm", "grad_norm"},
      {"examples_per_second", "throughput"}};
  double last_time = start_time;
  int64_t last_step = 0;
  for (const MetricsLine& line : outputs.metrics) {
    std::vector<std::pair<std::string, float>> scalars;
    for (const auto& [key, tag] : kTags) {
      auto it = line.values.find(key);
      if (it != line.values.end() && std::isfinite(it->second)) {
        scalars.emplace_back(tag, static_cast<float>(it->second));
      }
    }
    auto elapsed = line.values.find("elapsed_s");
    const double time = elapsed != line.values.end() && std::isfinite(elapsed->second)
                            ? start_time + elapsed->second
                            : last_time;
    last_time = time;
    last_step = line.step;
    if (!scalars.empty()) events.push_back(scalars_event(time, line.step, scalars));
  }
  std::vector<std::pair<std::string, float>> eval;
  for (const auto& [name, value] : outputs.eval) {
    if (std::isfinite(value)) eval.emplace_back("eval/" + name, static_cast<float>(value));
  }
  if (!eval.empty()) {
    events.push_back(scalars_event(start_time + outputs.summary.wall_time_s, last_step, eval));
  }
  return events;
}

fs::path write_event_file(const fs::path& dir, double start_time,
                          const std::vector<std::string>& events) {
  std::error_code ec;
  // A rerun replaces the variant's outputs: its old events would show as a second run.
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
      fs::remove(entry.path(), ec);
    }
  }
  const fs::path path =
      dir / fmt::format("events.out.tfevents.{}.{}", static_cast<int64_t>(start_time), host_name());
  std::string bytes;
  for (const auto& e : events) bytes += frame_tfrecord(e);
  write_file_atomic(path, bytes);
  return path;
}

}  // namespace bertlab
