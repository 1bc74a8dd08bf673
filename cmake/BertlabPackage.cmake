# The installed CMake package (docs/plugins.md): <prefix>/lib/cmake/bertlab/ with
# bertlabConfig.cmake, its version file, the exported bertlab::sdk (and bertlab::torch it links)
# and BertlabPlugin.cmake. The layout is fixed, not GNUInstallDirs': the executable finds its
# plugins in ../lib/bertlab/plugins relative to itself.
include(CMakePackageConfigHelpers)
set(BERTLAB_INSTALL_BINDIR bin)
set(BERTLAB_INSTALL_PLUGINDIR lib/bertlab/plugins)
set(bertlab_package_dir lib/cmake/bertlab)

install(TARGETS bertlab_torch EXPORT bertlabTargets)
install(EXPORT bertlabTargets NAMESPACE bertlab:: DESTINATION "${bertlab_package_dir}")
configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/bertlabConfig.cmake.in"
  "${CMAKE_BINARY_DIR}/package/bertlabConfig.cmake"
  INSTALL_DESTINATION "${bertlab_package_dir}"
  PATH_VARS BERTLAB_INSTALL_BINDIR BERTLAB_INSTALL_PLUGINDIR)
# 0.x: a minor version may change the plugin API (bertlab/api_version.h).
write_basic_package_version_file("${CMAKE_BINARY_DIR}/package/bertlabConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES
  "${CMAKE_BINARY_DIR}/package/bertlabConfig.cmake"
  "${CMAKE_BINARY_DIR}/package/bertlabConfigVersion.cmake"
  "${CMAKE_CURRENT_LIST_DIR}/BertlabPlugin.cmake"
  DESTINATION "${bertlab_package_dir}")
