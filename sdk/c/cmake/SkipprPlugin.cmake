# Helpers for building skippr plugins; included by skipprConfig.cmake, and
# by this source tree for its own plugins. Needs the target skippr::plugin.

# skippr_add_plugin(NAME SOURCE...)
#   Builds the plugin skippr_NAME.so: a MODULE library, C11, with every
#   symbol hidden but the entry point (SKIPPR_PLUGIN_DEFINE exports it).
#   When SKIPPR_ADD_PLUGIN_OUTPUT_DIR is set the .so lands there; when
#   SKIPPR_ADD_PLUGIN_INSTALL_DIR is set, `cmake --install` puts it there
#   (point it at ${SKIPPR_PLUGIN_DIR} to install beside skipprd's own).
function(skippr_add_plugin name)
  add_library(${name} MODULE ${ARGN})
  target_link_libraries(${name} PRIVATE skippr::plugin)
  set_target_properties(${name} PROPERTIES
    PREFIX "skippr_" C_VISIBILITY_PRESET hidden
    C_STANDARD 11 C_STANDARD_REQUIRED ON)
  if(SKIPPR_ADD_PLUGIN_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES
      LIBRARY_OUTPUT_DIRECTORY ${SKIPPR_ADD_PLUGIN_OUTPUT_DIR})
  endif()
  if(SKIPPR_ADD_PLUGIN_INSTALL_DIR)
    install(TARGETS ${name} LIBRARY DESTINATION ${SKIPPR_ADD_PLUGIN_INSTALL_DIR})
  endif()
endfunction()

# skippr_add_plugin_test(TEST_NAME PLUGIN_TARGET [TESTKIT_ARGS...])
#   A ctest that runs the conformance testkit on the plugin, e.g.
#   skippr_add_plugin_test(my_sink_conformance my_sink
#       -o path=${CMAKE_CURRENT_BINARY_DIR}/out --read "cat out/$SKIPPR_KEY")
function(skippr_add_plugin_test test plugin)
  add_test(NAME ${test}
           COMMAND skippr::testkit $<TARGET_FILE:${plugin}> ${ARGN})
endfunction()
