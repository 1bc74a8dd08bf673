// A plugin claiming another compiler, C++ ABI and libtorch: compiled with a foreign
// BERTLAB_ABI_TAG (see tests/plugins/CMakeLists.txt) and the real BERTLAB_PLUGIN macro, the host
// must refuse it by its ABI tag.
#include <bertlab/plugin.h>

namespace {
void register_nothing(bertlab::Registry&) {}
}  // namespace

BERTLAB_PLUGIN("abi_tag", "0.0.1", register_nothing)
