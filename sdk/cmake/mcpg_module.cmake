# mcpg_add_module(<name> SOURCES <files...> [LIBRARIES <targets...>] [OUTPUT_DIR <dir>]
#                 [NO_INSTALL])
#
# Builds an mcpg module: a MODULE library <name>.so that exports only
# mcpg_module_entry (version script), with hidden visibility, and refuses
# undefined symbols at link time (-z defs) so it can never depend on kernel
# symbols. Works in the mcpg tree and out of tree (after find_package(mcpg)).
#
# `cmake --install` puts <name>.so in <prefix>/lib/mcpg/modules, where a
# gateway installed in the same prefix finds it with no gateway.module_dir.
# That folder is fixed, not GNUInstallDirs' libdir (lib/<multiarch> on
# Debian): the gateway finds it from its own binary, which cannot know the
# multiarch name. NO_INSTALL leaves the module in the build tree only.
set(_MCPG_MODULE_CMAKE_DIR ${CMAKE_CURRENT_LIST_DIR})
set(MCPG_INSTALL_MODULEDIR lib/mcpg/modules)

# In the mcpg tree only the modules under modules/<name>/ are the product:
# test fixtures built with mcpg_add_module elsewhere stay in the build tree.
function(_mcpg_install_module name)
  if(TARGET mcpg_sdk AND NOT CMAKE_CURRENT_SOURCE_DIR STREQUAL "${PROJECT_SOURCE_DIR}/modules/${name}")
    return()
  endif()
  install(TARGETS ${name} LIBRARY DESTINATION ${MCPG_INSTALL_MODULEDIR})
endfunction()

function(mcpg_add_module name)
  cmake_parse_arguments(M "NO_INSTALL" "OUTPUT_DIR" "SOURCES;LIBRARIES" ${ARGN})
  add_library(${name} MODULE ${M_SOURCES})
  set_target_properties(${name} PROPERTIES PREFIX "" C_VISIBILITY_PRESET hidden
                        POSITION_INDEPENDENT_CODE ON)
  if(M_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${M_OUTPUT_DIR})
  elseif(DEFINED MCPG_MODULE_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${MCPG_MODULE_DIR})
  endif()
  if(TARGET mcpg_sdk)
    target_link_libraries(${name} PRIVATE mcpg_sdk ${M_LIBRARIES})
  else()
    target_link_libraries(${name} PRIVATE mcpg::sdk ${M_LIBRARIES})
  endif()
  if(DEFINED MCPG_WARNINGS)
    target_compile_options(${name} PRIVATE ${MCPG_WARNINGS})
  endif()
  target_link_options(${name} PRIVATE
    -Wl,--version-script=${_MCPG_MODULE_CMAKE_DIR}/module.map)
  # Clang links no sanitizer runtime into a shared object: its symbols come
  # from the (sanitized) gateway at load time.
  if(NOT (MCPG_SANITIZE OR MCPG_SDK_SANITIZE) OR NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    target_link_options(${name} PRIVATE -Wl,-z,defs)
  endif()
  if(NOT M_NO_INSTALL)
    _mcpg_install_module(${name})
  endif()
endfunction()
