# Generates agent-schema.h and agent-schema.c from agent-protocol.json:
#   cmake -DSCHEMA=agent-protocol.json -DOUT_DIR=dir -P agent-schema-gen.cmake
# The header declares the command and error enums, the protocol constants and the argument
# specs the request parser checks against; the agent's dispatcher table is indexed by the
# command enum (a test checks that every command has a handler).
cmake_minimum_required(VERSION 3.25)
file(READ "${SCHEMA}" json)

macro(schema_get var)
  string(JSON ${var} ERROR_VARIABLE _err GET "${json}" ${ARGN})
  if(_err)
    message(FATAL_ERROR "${SCHEMA}: ${_err}")
  endif()
endmacro()

function(c_upper out name)
  string(TOUPPER "${name}" up)
  string(REGEX REPLACE "[^A-Z0-9]" "_" up "${up}")
  set(${out} "${up}" PARENT_SCOPE)
endfunction()

schema_get(protocol protocol)
schema_get(protocol_min protocol_min)
schema_get(line_max line_max)
schema_get(sync_byte sync_byte)

set(h "/* Generated from guest-agent/schema/agent-protocol.json by agent-schema-gen.cmake. */\n")
string(APPEND h "#pragma once\n\n#include <glib.h>\n\n")
string(APPEND h "#define AGENT_PROTOCOL_VERSION ${protocol}\n")
string(APPEND h "#define AGENT_PROTOCOL_MIN ${protocol_min}\n")
string(APPEND h "#define AGENT_HOST_LINE_MAX ${line_max} /* bytes per host line, newline included */\n")
string(APPEND h "#define AGENT_SYNC_BYTE ${sync_byte}\n\n")

# errors
string(JSON n_err LENGTH "${json}" errors)
math(EXPR last "${n_err} - 1")
string(APPEND h "typedef enum {\n")
set(err_names "")
foreach(i RANGE ${last})
  schema_get(name errors ${i} name)
  c_upper(up "${name}")
  # GenericError -> AGENT_ERROR_GENERIC etc.: CamelCase to UPPER_SNAKE without the Error suffix.
  string(REGEX REPLACE "Error$" "" base "${name}")
  string(REGEX REPLACE "([a-z0-9])([A-Z])" "\\1_\\2" snake "${base}")
  string(REGEX REPLACE "([A-Z]+)([A-Z][a-z])" "\\1_\\2" snake "${snake}")
  string(TOUPPER "${snake}" snake)
  string(APPEND h "    AGENT_ERROR_${snake}, /* \"${name}\" */\n")
  string(APPEND err_names "\"${name}\", ")
endforeach()
string(APPEND h "    AGENT_ERROR_LAST,\n} AgentError;\n\n")

# commands
string(JSON n_cmd LENGTH "${json}" commands)
math(EXPR last "${n_cmd} - 1")
set(enum "typedef enum {\n")
set(cmd_names "")
set(specs "")
set(c "/* Generated from guest-agent/schema/agent-protocol.json by agent-schema-gen.cmake. */\n")
string(APPEND c "#include \"agent-schema.h\"\n\n")
foreach(i RANGE ${last})
  schema_get(name commands ${i} name)
  schema_get(since commands ${i} since)
  c_upper(up "${name}")
  string(APPEND enum "    AGENT_COMMAND_${up},\n")
  string(APPEND cmd_names "\"${name}\", ")
  string(JSON n_args LENGTH "${json}" commands ${i} arguments)
  set(args_ref "NULL")
  if(n_args GREATER 0)
    math(EXPR alast "${n_args} - 1")
    string(APPEND c "static const AgentArgSpec agent_args_${name}[] = {\n")
    foreach(j RANGE ${alast})
      schema_get(aname commands ${i} arguments ${j} name)
      schema_get(atype commands ${i} arguments ${j} type)
      schema_get(areq commands ${i} arguments ${j} required)
      if(NOT atype STREQUAL "int")
        message(FATAL_ERROR "${SCHEMA}: ${name}.${aname}: only int arguments are implemented")
      endif()
      schema_get(amin commands ${i} arguments ${j} min)
      schema_get(amax commands ${i} arguments ${j} max)
      if(amin STREQUAL "-9223372036854775808")
        set(amin "G_MININT64")
      else()
        set(amin "G_GINT64_CONSTANT(${amin})")
      endif()
      if(areq)
        set(areq TRUE)
      else()
        set(areq FALSE)
      endif()
      string(APPEND c "    {\"${aname}\", AGENT_ARG_INT, ${areq}, ${amin}, G_GINT64_CONSTANT(${amax})},\n")
    endforeach()
    string(APPEND c "    {NULL, AGENT_ARG_INT, FALSE, 0, 0},\n};\n")
    set(args_ref "agent_args_${name}")
  endif()
  string(APPEND specs "    {\"${name}\", ${since}, ${args_ref}},\n")
endforeach()
string(APPEND enum "    AGENT_COMMAND_LAST,\n} AgentCommand;\n\n")
string(APPEND h "${enum}")
string(APPEND h [=[typedef enum {
    AGENT_ARG_INT,
} AgentArgType;

typedef struct {
    const char *name; /* NULL ends a list */
    AgentArgType type;
    gboolean required;
    gint64 min;
    gint64 max;
} AgentArgSpec;

typedef struct {
    const char *name;
    int since;                /* protocol version that added the command */
    const AgentArgSpec *args; /* NULL: takes no arguments */
} AgentCommandSpec;

extern const AgentCommandSpec agent_command_specs[AGENT_COMMAND_LAST];
extern const char *const agent_error_names[AGENT_ERROR_LAST];
]=])
string(APPEND c "\nconst AgentCommandSpec agent_command_specs[AGENT_COMMAND_LAST] = {\n${specs}};\n\n")
string(APPEND c "const char *const agent_error_names[AGENT_ERROR_LAST] = {${err_names}};\n")

# Write only on change, so dependents are not rebuilt for nothing.
foreach(pair "h;${h}" "c;${c}")
  list(GET pair 0 ext)
  string(LENGTH "${ext};" skip)
  string(SUBSTRING "${pair}" ${skip} -1 body)
  file(CONFIGURE OUTPUT "${OUT_DIR}/agent-schema.${ext}" CONTENT "${body}" @ONLY)
endforeach()
