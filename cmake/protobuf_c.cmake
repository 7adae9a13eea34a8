# protobuf-c code generation for vendored upstream .proto files (DESIGN.md §7:
# protobuf-c is the wire plumbing for Connect, OTLP and push messages; the
# pprof codec stays ours).
#
#   pd_protobuf_c_library(<target> <proto_root> <file.proto>...)
#
# runs protoc-c (Debian's protobuf-c-compiler) on each file, relative to
# <proto_root> (the import root of the vendored tree under third_party/), and
# builds the generated .pb-c.c files into the static library <target>, whose
# users include "<dir>/<name>.pb-c.h" (the path of the .proto under the root).
# Imports of google/protobuf/*.proto resolve to Debian's libprotobuf-dev.
find_program(PD_PROTOC_C NAMES protoc-c REQUIRED)
pkg_check_modules(PROTOBUFC REQUIRED IMPORTED_TARGET libprotobuf-c)

function(pd_protobuf_c_library target root)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${target}_pb)
  set(srcs)
  foreach(p ${ARGN})
    string(REGEX REPLACE "\\.proto$" "" base ${p})
    set(c ${out}/${base}.pb-c.c)
    set(h ${out}/${base}.pb-c.h)
    add_custom_command(OUTPUT ${c} ${h}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${out}
      COMMAND ${PD_PROTOC_C} --proto_path=${root} --proto_path=/usr/include
              --c_out=${out} ${root}/${p}
      DEPENDS ${root}/${p}
      COMMENT "protoc-c ${p}")
    list(APPEND srcs ${c})
  endforeach()
  add_library(${target} STATIC ${srcs})
  # generated code: not ours to keep warning-clean
  target_compile_options(${target} PRIVATE -w)
  target_include_directories(${target} PUBLIC ${out})
  target_link_libraries(${target} PUBLIC PkgConfig::PROTOBUFC)
endfunction()
