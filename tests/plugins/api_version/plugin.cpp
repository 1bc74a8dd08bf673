// A plugin built against a future SDK: the host must refuse it by its API version.
#include <bertlab/plugin.h>

namespace {
void register_nothing(bertlab::Registry&) {}
// An API version this SDK will not reach soon.
constexpr int kForeignApiVersion = 42;
}  // namespace

extern "C" __attribute__((visibility("default"))) const bertlab::PluginEntry*
bertlab_plugin_entry() {
  static const bertlab::PluginEntry entry{kForeignApiVersion, BERTLAB_ABI_TAG, "api_version",
                                          "0.0.1", register_nothing};
  return &entry;
}
