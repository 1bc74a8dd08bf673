# bertlab_add_plugin(NAME SOURCES file... [LIBRARIES lib...])
#
# Builds one bertlab plugin: a shared library with hidden visibility that links libbertlab and
# exports only its `bertlab_plugin_entry` (see bertlab/plugin.h). In-tree plugins land in
# ${BERTLAB_PLUGIN_OUTPUT_DIR}, where the bertlab executable finds them without configuration.
function(bertlab_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIR" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "bertlab_add_plugin(${name}): SOURCES is required")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE bertlab::bertlab ${ARG_LIBRARIES})
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
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY "${out_dir}")
endfunction()
