// A shared library that links the SDK but defines no bertlab_plugin_entry.
#include <bertlab/plugin.h>

extern "C" __attribute__((visibility("default"))) int bertlab_test_not_an_entry() { return 7; }
