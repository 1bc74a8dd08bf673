#include <bertlab/error.h>

#include "squad_tools.h"

namespace bertlab::squad {
int features_tool(const std::vector<std::string>& /*args*/) {
  throw Error("features_tool: not written yet");
}
int bench_features_tool(const std::vector<std::string>& /*args*/) {
  throw Error("bench_features_tool: not written yet");
}
}  // namespace bertlab::squad
