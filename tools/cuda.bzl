"""CUDA code in the offline build: nvcc compiles .cu files, a cc_library links the objects.

Only used under --config=cuda (tools/setup.sh turns it on where nvcc exists), which also
defines CUDA_HOME. Headers that .cc files include from a cuda_library must be plain C++:
CUDA's own headers stay inside the .cu files.
"""

# Data-center GPUs from Ampere on, plus PTX so that newer GPUs can JIT-compile.
_NVCC_ARCH_FLAGS = (
    "-gencode arch=compute_80,code=sm_80 " +
    "-gencode arch=compute_90,code=sm_90 " +
    "-gencode arch=compute_90,code=compute_90"
)

# Without --config=cuda these targets are skipped by `bazel build //...` rather than failing.
_CUDA_ONLY = select({
    "//tools:cuda": [],
    "//conditions:default": ["//tools:incompatible"],
})

def cuda_library(name, srcs, hdrs = [], deps = [], visibility = None):
    """A cc_library named `name` made of the nvcc-compiled `srcs` (.cu files).

    `hdrs` are the plain C++ headers the .cu files implement; `deps` supply headers the .cu
    files include and libraries they need at link time.
    """
    objects = []
    for src in srcs:
        obj = name + "_objs/" + src.replace(".cu", ".pic.o")
        native.genrule(
            name = name + "_" + src.replace("/", "_").replace(".", "_"),
            srcs = [src] + hdrs,
            outs = [obj],
            target_compatible_with = _CUDA_ONLY,
            cmd = ("$(CUDA_HOME)/bin/nvcc -std=c++17 -O3 -Xcompiler -fPIC,-Wall,-Wextra " +
                   "-Werror all-warnings " + _NVCC_ARCH_FLAGS +
                   " -I. -I$(GENDIR) -c $(location " + src + ") -o $@"),
        )
        objects.append(obj)
    native.cc_library(
        name = name,
        srcs = objects,
        hdrs = hdrs,
        deps = deps + ["//third_party:cuda"],
        visibility = visibility,
        target_compatible_with = _CUDA_ONLY,
    )
