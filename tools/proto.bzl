"""Protocol Buffers and gRPC code generation with the system's protoc and grpc_cpp_plugin."""

def ps_proto_library(name, srcs, deps = [], grpc = False):
    """Generates C++ (and, with grpc = True, gRPC service) code for `srcs`.

    Declares `name`, a cc_library over the generated files; headers are included by workspace
    path, e.g. `#include "proto/cluster.pb.h"`. `deps` are other ps_proto_library targets whose
    .proto files the sources import.
    """
    outs = []
    for src in srcs:
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
        if grpc:
            outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    grpc_flags = ""
    if grpc:
        grpc_flags = "--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) --grpc_out=$(GENDIR) "
    native.genrule(
        name = name + "_codegen",
        srcs = srcs + [d + "_proto_sources" for d in deps],
        outs = outs,
        cmd = "protoc -I. --cpp_out=$(GENDIR) " + grpc_flags +
              " ".join(["$(location %s)" % s for s in srcs]),
    )
    native.filegroup(
        name = name + "_proto_sources",
        srcs = srcs + [d + "_proto_sources" for d in deps],
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["//third_party:protobuf"] + (["//third_party:grpc"] if grpc else []),
    )
