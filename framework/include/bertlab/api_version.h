#pragma once
// The SDK's version tags: what a plugin embeds in its entry point (BERTLAB_PLUGIN in
// bertlab/plugin.h) and what the host compares them with when it loads the plugin.

#include <torch/csrc/api/include/torch/version.h>

/// The plugin API version of this SDK: bumped on every incompatible change of its interfaces.
/// 2: Optimizer::state_dict(); 3: token-weighted Task losses; 4: streamed training data;
/// 5: gradients averaged during backward (Strategy::overlap_bucket_mb,
/// Communicator::all_reduce_sum_async, GradientEntry::averaged); 6: strategy contracts
/// (ComponentSpec::contract), state and hooks (Strategy::begin_step, after_update, state_dict,
/// last_error_feedback); 7: adversarial training (ComponentKind::kAdversarial,
/// Registry::add_adversarial, bertlab/adversarial.h); 8: Task::hf_model_head(); 9:
/// Task::floor_metrics().
#define BERTLAB_SDK_API_VERSION 9

/// The API version a plugin embeds: the SDK's. A build may predefine it only to produce a plugin
/// the host must refuse (tests/plugins/api_version does).
#ifndef BERTLAB_API_VERSION
#define BERTLAB_API_VERSION BERTLAB_SDK_API_VERSION
#endif

#define BERTLAB_STRINGIFY_(x) #x
#define BERTLAB_STRINGIFY(x) BERTLAB_STRINGIFY_(x)
#if defined(__clang__)
#define BERTLAB_COMPILER_TAG_ "clang-" BERTLAB_STRINGIFY(__clang_major__)
#elif defined(__GNUC__)
#define BERTLAB_COMPILER_TAG_ "gcc-" BERTLAB_STRINGIFY(__GNUC__)
#else
#define BERTLAB_COMPILER_TAG_ "unknown"
#endif

/// Compiler and major version, C++ ABI flag, libtorch version of this translation unit: a plugin
/// built with another combination would share std:: and torch:: types with the host that do not
/// match.
#define BERTLAB_SDK_ABI_TAG                                                           \
  BERTLAB_COMPILER_TAG_                                                               \
  "/cxx11abi-" BERTLAB_STRINGIFY(_GLIBCXX_USE_CXX11_ABI) "/torch-" BERTLAB_STRINGIFY( \
      TORCH_VERSION_MAJOR) "." BERTLAB_STRINGIFY(TORCH_VERSION_MINOR)

/// The ABI tag a plugin embeds: the one its compiler and libtorch give. A build may predefine it
/// only to produce a plugin the host must refuse (tests/plugins/abi_tag does).
#ifndef BERTLAB_ABI_TAG
#define BERTLAB_ABI_TAG BERTLAB_SDK_ABI_TAG
#endif
