// A plugin built against a future SDK: compiled with BERTLAB_API_VERSION=42 (see
// tests/plugins/CMakeLists.txt) and the real BERTLAB_PLUGIN macro, the host must refuse it by its
// API version.
#include <bertlab/plugin.h>

namespace {
void register_nothing(bertlab::Registry&) {}
}  // namespace

BERTLAB_PLUGIN("api_version", "0.0.1", register_nothing)
