# Finds every third-party dependency once, as imported targets.

# libtorch: Debian's (CPU) by default. -DBERTLAB_TORCH_FROM_PYTHON=ON uses the libtorch inside
# python3's torch package instead (a wheel's, CUDA on GPU machines; python3 from
# -DBERTLAB_PYTHON), as torch.utils.cmake_prefix_path names it.
option(BERTLAB_TORCH_FROM_PYTHON "Build against the libtorch inside python3's torch package" OFF)
set(BERTLAB_PYTHON "python3" CACHE STRING "python3 whose torch package gives libtorch")
if(BERTLAB_TORCH_FROM_PYTHON)
  execute_process(
    COMMAND "${BERTLAB_PYTHON}" -c "import torch; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE bertlab_torch_prefix
    RESULT_VARIABLE bertlab_torch_rc
    ERROR_VARIABLE bertlab_torch_err
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT bertlab_torch_rc EQUAL 0)
    message(FATAL_ERROR "BERTLAB_TORCH_FROM_PYTHON: '${BERTLAB_PYTHON} -c \"import torch\"' "
                        "failed (${bertlab_torch_err}); set BERTLAB_PYTHON to a python3 with torch")
  endif()
  list(PREPEND CMAKE_PREFIX_PATH "${bertlab_torch_prefix}")
  message(STATUS "[bertlab] libtorch from ${BERTLAB_PYTHON}'s torch: ${bertlab_torch_prefix}")
endif()
find_package(Torch REQUIRED)
find_package(fmt REQUIRED)
find_package(tomlplusplus REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS filesystem)
find_package(Threads REQUIRED)
# The table format of TensorFlow checkpoint indexes is LevelDB's.
find_package(leveldb CONFIG REQUIRED)
# Its blocks may be snappy-compressed; the reader checks their sizes before LevelDB allocates.
find_library(SNAPPY_LIBRARY snappy REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
# .json.zip SQuAD files (the squad plugin). pkg-config: Debian's libzip CMake package names
# tools (zipcmp, ...) that libzip-dev does not install.
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET libzip)

# libtorch's imported targets carry the C++ ABI flag; keep it consistent across the project.
if(NOT TARGET bertlab::torch)
  add_library(bertlab_torch INTERFACE)
  target_link_libraries(bertlab_torch INTERFACE ${TORCH_LIBRARIES})
  target_include_directories(bertlab_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
  target_compile_options(bertlab_torch INTERFACE ${TORCH_CXX_FLAGS})
  set_target_properties(bertlab_torch PROPERTIES EXPORT_NAME torch)
  add_library(bertlab::torch ALIAS bertlab_torch)
endif()

# CUDA/NCCL code (framework/host/**/cuda/) compiles only against a libtorch built with CUDA.
set(BERTLAB_WITH_CUDA OFF)
if(TARGET torch_cuda OR CAFFE2_USE_CUDA)
  set(BERTLAB_WITH_CUDA ON)
endif()
message(STATUS "[bertlab] libtorch ${Torch_VERSION}, CUDA: ${BERTLAB_WITH_CUDA}")
