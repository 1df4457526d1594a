#===- Install.cmake - the installed pattn package ---------------------------===#
#
# `cmake --install build --prefix P` installs what a compiler that embeds
# pattn needs: the headers (the generated .inc files included), every library
# as an exported target in the PAttn:: namespace, the tools, the runtime and
# P/lib/cmake/pattn/PAttnConfig.cmake, so that
#
#   find_package(PAttn CONFIG REQUIRED)
#   target_link_libraries(my-compiler PRIVATE PAttn::InitAll)
#
# works with nothing else set up. test/embedding is such a consumer;
# scripts/test-embedding.sh configures it against an installed prefix.
#
#===------------------------------------------------------------------------===#
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)

# Library target -> exported name (PAttn::<name>).
set(PATTN_EXPORTED_LIBRARIES
  PAttnNumerics:Numerics
  PAttnTarget:Target
  MLIRPAttn:Dialect
  MLIRPAttnTransforms:Transforms
  MLIRPAttnToGPU:Conversion
  PAttnPipelines:Pipelines
  PAttnInitAll:InitAll
  PAttnCAPI:CAPI
  pattn_runtime:Runtime
)
set(PATTN_EXPORTED_TARGETS)
foreach(pair ${PATTN_EXPORTED_LIBRARIES})
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 target)
  list(GET pair 1 name)
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  target_include_directories(${target} INTERFACE
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  list(APPEND PATTN_EXPORTED_TARGETS ${target})
endforeach()

install(TARGETS ${PATTN_EXPORTED_TARGETS} pattn-opt pattn-compile
  EXPORT PAttnTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Headers: the sources, the C API, and what TableGen generated.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/pattn
                  ${PROJECT_SOURCE_DIR}/include/pattn-c
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.td")
install(DIRECTORY ${PROJECT_BINARY_DIR}/include/pattn
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.inc"
  PATTERN "CMakeFiles" EXCLUDE)

set(PATTN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/pattn)
install(EXPORT PAttnTargets NAMESPACE PAttn::
  DESTINATION ${PATTN_CMAKE_DIR})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/PAttnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/PAttnConfig.cmake
  INSTALL_DESTINATION ${PATTN_CMAKE_DIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/PAttnConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/PAttnConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/PAttnConfigVersion.cmake
  DESTINATION ${PATTN_CMAKE_DIR})
