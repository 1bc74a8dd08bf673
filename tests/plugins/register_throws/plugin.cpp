// A register function that throws: the host must report the plugin and the message.
#include <bertlab/plugin.h>

#include <stdexcept>

namespace {
void register_components(bertlab::Registry&) {
  throw std::runtime_error("the license server is unreachable");
}
}  // namespace

BERTLAB_PLUGIN("register_throws", "0.0.1", register_components)
