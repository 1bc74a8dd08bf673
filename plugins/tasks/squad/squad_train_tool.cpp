#include <bertlab/error.h>

#include "squad_tools.h"

namespace bertlab::squad {
int train_tool(const std::vector<std::string>& /*args*/) {
  throw Error("train_tool: not written yet");
}
}  // namespace bertlab::squad
