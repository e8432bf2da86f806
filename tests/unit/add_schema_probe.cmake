# Writes binder.proto with one field more in each message the mappings carry, for the schema probe
# build (schema_probe.cmake). Usage: cmake -DIN=binder.proto -DOUT=copy.proto -P add_schema_probe.cmake
set(probe_fields
  "PlanRequest:string" "StepGpu:uint32" "PlanResponse:uint64" "TaskPlan:int32" "TaskGpu:string"
  "EnvVar:bool" "GetTopologyResponse:repeated string" "Core:bool" "Gpu:int32" "Nic:string"
  "Locality:repeated int32" "GetStatusResponse:double" "PlanCounts:uint64" "LatencyBucket:uint32"
  "FallbackCount:string")
file(READ "${IN}" schema)
foreach(probe IN LISTS probe_fields)
  string(REPLACE ":" ";" parts "${probe}")
  list(GET parts 0 message)
  list(GET parts 1 type)
  set(opening "message ${message} {\n")
  string(FIND "${schema}" "${opening}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "add_schema_probe: binder.proto has no 'message ${message} {'")
  endif()
  string(REPLACE "${opening}" "${opening}  ${type} schema_probe = 1000;\n" schema "${schema}")
endforeach()
file(WRITE "${OUT}" "${schema}")
