# Packaging (included at the end of the top-level CMakeLists.txt):
# `cmake --install BUILD --prefix PREFIX` installs
#   PREFIX/include/sluice/*.h          the public API (include/sluice only)
#   PREFIX/lib/libsluice.so.X.Y.Z      the runtime (sluice_runtime + sluice_ops)
#   PREFIX/bin/sluice                  the CLI
#   PREFIX/lib/cmake/Sluice/           SluiceConfig.cmake, SluiceConfigVersion.cmake,
#                                      SluiceTargets.cmake (Sluice::runtime)
# so that a project does find_package(Sluice) and links Sluice::runtime
# (docs/embedding.md; tests/scripts/install_test.sh builds examples/cpp so).
# The static libraries stay build-internal: the shared library carries their
# dependencies as DT_NEEDED entries, so the exported target needs none of
# their CMake packages.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(sluice_runtime sluice_ops PROPERTIES POSITION_INDEPENDENT_CODE ON)
add_library(sluice_shared SHARED ${CMAKE_SOURCE_DIR}/cmake/sluice_shared.cc)
# Whole archives: the source and decoder registries are filled by static
# initializers, which a plain link of an archive would drop.
# (Raw flags around the archive files: CMake's WHOLE_ARCHIVE feature refuses
# sluice_ops, which sluice_runtime's own link interface also names. The plain
# target names after them bring the archives' dependencies.)
target_link_libraries(sluice_shared PRIVATE
  -Wl,--whole-archive $<TARGET_FILE:sluice_runtime> $<TARGET_FILE:sluice_ops> -Wl,--no-whole-archive
  sluice_runtime sluice_ops)
target_link_options(sluice_shared PRIVATE -Wl,--no-undefined)
target_include_directories(sluice_shared PUBLIC
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(sluice_shared PUBLIC cxx_std_23)  # <expected> in sluice/result.h
set_target_properties(sluice_shared PROPERTIES
  OUTPUT_NAME sluice EXPORT_NAME runtime
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
add_library(Sluice::runtime ALIAS sluice_shared)

# The installed CLI finds libHalide where the build found it: an RPATH entry
# when that is outside the system's directories (.deps/halide, PyPI's Halide).
get_filename_component(SLUICE_HALIDE_LIB_DIR ${SLUICE_HALIDE_LIB} DIRECTORY)
if(NOT SLUICE_HALIDE_LIB_DIR IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
  set_target_properties(sluice PROPERTIES INSTALL_RPATH ${SLUICE_HALIDE_LIB_DIR})
endif()

# compiler.h stays out: sluice::Compile is in the static sluice_compiler
# (Halide, LLVM), not in libsluice.so; an installed prefix compiles plans with
# bin/sluice (Sluice_EXECUTABLE).
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/sluice DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT devel FILES_MATCHING PATTERN "*.h" PATTERN "compiler.h" EXCLUDE)
install(TARGETS sluice_shared EXPORT SluiceTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS sluice RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
set(SLUICE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Sluice)
install(EXPORT SluiceTargets NAMESPACE Sluice:: DESTINATION ${SLUICE_CMAKE_DIR}
  COMPONENT devel)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/SluiceConfig.cmake.in
  ${CMAKE_BINARY_DIR}/SluiceConfig.cmake INSTALL_DESTINATION ${SLUICE_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
# Plans are compatible within a major.minor series (runtime/plan/plan.cc), and
# so is the API: a consumer asking for 0.1 gets any 0.1.x.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/SluiceConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/SluiceConfig.cmake ${CMAKE_BINARY_DIR}/SluiceConfigVersion.cmake
  DESTINATION ${SLUICE_CMAKE_DIR} COMPONENT devel)

# ctest -L install: installs into a temporary prefix, builds examples/cpp as a
# separate project against it and runs it on a generated dataset.
add_test(NAME install.find_package
  COMMAND ${CMAKE_SOURCE_DIR}/tests/scripts/install_test.sh ${CMAKE_BINARY_DIR}
          $<TARGET_FILE:sluice_make_dataset>)
set_tests_properties(install.find_package PROPERTIES LABELS install TIMEOUT 900)

# ctest -L wheel (slow: a Release build of the project in build-pip/): `pip
# wheel .` and a smoke test of the wheel in a fresh virtual environment.
if(SLUICE_PYTHON)
  add_test(NAME wheel.venv_smoke
    COMMAND ${CMAKE_SOURCE_DIR}/tests/scripts/wheel_test.sh $<TARGET_FILE:sluice_make_dataset>
            ${Python_EXECUTABLE})
  set_tests_properties(wheel.venv_smoke PROPERTIES LABELS wheel TIMEOUT 3600 RUN_SERIAL ON)
endif()
