# The SPANK plugin e2e.vendors lists before gpubind's to stand in for Slurm 26.05's
# Flags=env_uuid (uuid_env_spank.c). Built beside the gpubind plugin for each Slurm the e2e tests
# run, since Slurm loads only plugins built against its own release.
add_library(gpubind_test_uuid_env MODULE ${CMAKE_CURRENT_LIST_DIR}/uuid_env_spank.c)
target_include_directories(gpubind_test_uuid_env PRIVATE ${GPUBIND_SLURM_HEADERS})
set_target_properties(gpubind_test_uuid_env PROPERTIES PREFIX ""
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
