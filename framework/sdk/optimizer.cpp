// The optimizer interface's defaults.

#include <bertlab/optimizer.h>

namespace bertlab {

int64_t Optimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, t] : state_dict()) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

}  // namespace bertlab
