# bertlab_add_plugin(NAME SOURCES file... [LIBRARIES lib...] [OUTPUT_DIR dir])
#
# Builds one bertlab plugin: a shared library with hidden visibility that links the SDK
# (bertlab::sdk: libbertlab, its headers, libtorch) and exports only its `bertlab_plugin_entry`
# (see bertlab/plugin.h). The in-tree plugins and an out-of-tree project that found the installed
# package (find_package(bertlab)) get the same flags: C++17, -Wall -Wextra, libtorch's ABI flag,
# and the API version and ABI tag of bertlab/api_version.h.
#
# The library lands in OUTPUT_DIR, else ${BERTLAB_PLUGIN_OUTPUT_DIR} (the in-tree plugin folder,
# where the bertlab executable finds it), else the current binary folder (out of tree: pass it
# to `bertlab --plugin-dir`). In-tree plugins without OUTPUT_DIR are installed into
# lib/bertlab/plugins when BERTLAB_INSTALL_PLUGINS is on.
function(bertlab_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIR" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "bertlab_add_plugin(${name}): SOURCES is required")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE bertlab::sdk ${ARG_LIBRARIES})
  target_compile_features(${name} PRIVATE cxx_std_17)
  target_compile_options(${name} PRIVATE -Wall -Wextra)
  # Every symbol a plugin uses resolves in the SDK, libtorch or its own LIBRARIES: a plugin
  # that reached for a host function (the runner, the reports) would not link. Not in sanitized
  # builds: their shared libraries leave the sanitizer runtime to the executable.
  if(NOT BERTLAB_SANITIZE)
    target_link_options(${name} PRIVATE -Wl,--no-undefined)
  endif()
  set(out_dir "${ARG_OUTPUT_DIR}")
  if(NOT out_dir)
    if(DEFINED BERTLAB_PLUGIN_OUTPUT_DIR)
      set(out_dir "${BERTLAB_PLUGIN_OUTPUT_DIR}")
    else()
      set(out_dir "${CMAKE_CURRENT_BINARY_DIR}")
    endif()
  endif()
  set_target_properties(${name} PROPERTIES
    PREFIX "libbertlab_"
    OUTPUT_NAME "${name}"
    CXX_EXTENSIONS OFF
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY "${out_dir}"
    # Installed in <prefix>/lib/bertlab/plugins: libbertlab is two folders up.
    INSTALL_RPATH "$ORIGIN/../..")
  if(BERTLAB_INSTALL_PLUGINS AND NOT ARG_OUTPUT_DIR)
    install(TARGETS ${name} LIBRARY DESTINATION lib/bertlab/plugins)
  endif()
endfunction()
