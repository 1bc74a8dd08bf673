#include <bertlab/error.h>

#include "squad_tools.h"

namespace bertlab::squad {
int evaluate_tool(const std::vector<std::string>& /*args*/) {
  throw Error("evaluate_tool: not written yet");
}
}  // namespace bertlab::squad
