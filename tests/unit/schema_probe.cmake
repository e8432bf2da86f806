# The schema probe: the mapping tests (schema_mappings_test.cpp) and the mappings they test, built
# against binder.proto with a field added to each message (add_schema_probe.cmake). The tests pass
# only when each of them reports exactly the added fields it should have carried: a field added
# to binder.proto and forgotten in a mapping fails, by name.
find_package(nanopb CONFIG REQUIRED)
set(_probe ${CMAKE_CURRENT_BINARY_DIR}/schema_probe)
set(_probe_proto ${_probe}/proto/gpubind/v1/binder.proto)
set(_probe_gen ${_probe}/gen/gpubind/v1)
add_custom_command(
  OUTPUT ${_probe_proto}
  COMMAND ${CMAKE_COMMAND} -DIN=${CMAKE_SOURCE_DIR}/proto/gpubind/v1/binder.proto
          -DOUT=${_probe_proto} -P ${CMAKE_CURRENT_LIST_DIR}/add_schema_probe.cmake
  DEPENDS ${CMAKE_SOURCE_DIR}/proto/gpubind/v1/binder.proto
          ${CMAKE_CURRENT_LIST_DIR}/add_schema_probe.cmake
  COMMENT "schema probe: binder.proto with a field more in each message")
add_custom_command(
  OUTPUT ${_probe_gen}/binder.pb.cc ${_probe_gen}/binder.pb.h ${_probe_gen}/binder.npb.c
         ${_probe_gen}/binder.npb.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${_probe}/gen
  COMMAND protobuf::protoc --cpp_out=${_probe}/gen
          --plugin=protoc-gen-nanopb=${GPUBIND_NANOPB_PLUGIN} --nanopb_opt=-e.npb
          --nanopb_out=${_probe}/gen -I ${_probe}/proto ${_probe_proto}
  DEPENDS ${_probe_proto}
  COMMENT "schema probe: libprotobuf and nanopb code of the probe's binder.proto")

# The product's mapping sources, compiled again against the probe's generated code (nothing here
# may link gpubind_api_proto or gpubind_wire, which hold the real schema's).
add_executable(gpubind_schema_probe_tests
  unit/schema_fields.cpp
  unit/schema_mappings_test.cpp
  ${CMAKE_SOURCE_DIR}/api/src/convert.cpp
  ${CMAKE_SOURCE_DIR}/api/src/plan_bytes.cpp
  ${CMAKE_SOURCE_DIR}/api/src/status_convert.cpp
  ${CMAKE_SOURCE_DIR}/protocol/src/plan_codec.cpp
  ${_probe_gen}/binder.pb.cc
  ${_probe_gen}/binder.npb.c)
set_source_files_properties(${_probe_gen}/binder.pb.cc PROPERTIES COMPILE_OPTIONS -Wno-unused-parameter)
target_compile_definitions(gpubind_schema_probe_tests PRIVATE GPUBIND_SCHEMA_PROBE)
target_include_directories(gpubind_schema_probe_tests PRIVATE ${_probe}/gen
  ${CMAKE_SOURCE_DIR}/api/include)
target_link_libraries(gpubind_schema_probe_tests PRIVATE gpubind_output gpubind_planner
  gpubind_protocol gpubind_base protobuf::libprotobuf nanopb::protobuf-nanopb-static
  GTest::gtest_main)
gtest_discover_tests(gpubind_schema_probe_tests TEST_PREFIX schema_probe.
  PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)
