// A plugin claiming another compiler and libtorch: the host must refuse it by its ABI tag.
#include <bertlab/plugin.h>

namespace {
void register_nothing(bertlab::Registry&) {}
}  // namespace

extern "C" __attribute__((visibility("default"))) const bertlab::PluginEntry*
bertlab_plugin_entry() {
  static const bertlab::PluginEntry entry{bertlab::kPluginApiVersion, "gcc-4/cxx11abi-0/torch-0.4",
                                          "abi_tag", "0.0.1", register_nothing};
  return &entry;
}
