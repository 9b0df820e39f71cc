# mcpg_add_module(<name> SOURCES <files...> [LIBRARIES <targets...>] [OUTPUT_DIR <dir>])
#
# Builds an mcpg module: a MODULE library <name>.so that exports only
# mcpg_module_entry (version script), with hidden visibility, and refuses
# undefined symbols at link time (-z defs) so it can never depend on kernel
# symbols. Works in the mcpg tree and out of tree (after find_package(mcpg)).
set(_MCPG_MODULE_CMAKE_DIR ${CMAKE_CURRENT_LIST_DIR})

function(mcpg_add_module name)
  cmake_parse_arguments(M "" "OUTPUT_DIR" "SOURCES;LIBRARIES" ${ARGN})
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
endfunction()
