# trainpoint images. Targets:
#   gpu (default)  Debian 12 with PyTorch 2.11's CUDA wheel from PyPI: LibTorch 2.11 for CUDA 13 with NCCL, and
#                  NVIDIA's CUDA runtime, cuDNN and NCCL as the wheel's own dependencies.
#   cpu            Debian 12 with Debian's LibTorch 1.13 (Gloo only): as fast on the CPU as the wheel's 2.11 and
#                  Debian 13's 2.6 within a few percent either way, at a third of the gpu image's size
#                  (docs/benchmarks.md, "Three LibTorch lines"); the gpu image runs on CPU nodes too.
# Both carry Python and PyTorch for command mode ([job] command), sharing trainpoint's LibTorch, and
# python3-venv and pip for job.requirements: an environment over the image's Python (the cpu image's
# PyTorch is Debian's, in the system's site-packages; the gpu image's is in /opt/venv, which such an
# environment sees through a .pth file trainpoint writes).
# Both go the same way: a `*-source` stage compiles trainpoint, and the final stage carries only the
# binary and its runtime libraries, runs as an unprivileged user and is configured by TRAINPOINT_*
# environment variables (docs/guide.md). scripts/image-test builds and runs both here (`scripts/image-test
# gpu` on the CPU: a CUDA LibTorch runs its CPU paths without a GPU) from binaries built outside.
#
#   docker build --target cpu -t trainpoint:cpu .
#   docker build -t trainpoint:gpu .                      # gpu, the default target (last stage)
#   docker build --target cpu --build-arg BINARY_FROM=context -t trainpoint:cpu .
#       takes a trainpoint already built for Debian 12 from build-image/trainpoint instead of
#       compiling it again (scripts/image-test does this; the binary must match the image's libraries).
#   docker build --build-arg BINARY_FROM=context --build-arg TORCH_FROM=context -t trainpoint:gpu .
#       the gpu image from the wheel line's binary (build-image/trainpoint-gpu, scripts/test-torch-wheel)
#       and from the wheels in build-image/wheels instead of PyPI (scripts/image-test gpu).

ARG BINARY_FROM=source
ARG TORCH_FROM=pypi
# The gpu image's Python packages: PyTorch's CUDA 13.0 build pulls NVIDIA's runtime wheels; onnx for
# `trainpoint export --onnx` (torch.onnx writes through it).
ARG TORCH_PACKAGES="torch==2.11.0 numpy==2.4.6 onnx==1.23.2"

# ---- Debian 13's ISA-L (scripts/deps/debian13-on-12.txt), for every stage below -------------------------
# Downloaded and checked against its SHA-256 once; the build stages install libisal-dev from here, the final
# stages libisal2. Copied, not bind-mounted: podman 4.3's buildah mounts nothing for a `from=` stage it took
# from its cache (an empty /debs), and the copy is a layer of 150 KB.
FROM debian:bookworm AS debian13-debs
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends curl \
    && rm -rf /var/lib/apt/lists/*
COPY scripts/install-debian13-debs /src/scripts/install-debian13-debs
COPY scripts/deps/debian13-on-12.txt /src/scripts/deps/debian13-on-12.txt
RUN /src/scripts/install-debian13-debs --download /debs

# ---- cpu: Debian 12 and its LibTorch ----------------------------------------------------------------
FROM debian:bookworm AS cpu-source
COPY --from=debian13-debs /debs /tmp/debs
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      build-essential cmake ninja-build pkg-config libtorch-dev libgloo-dev libopenblas0-pthread libgit2-dev \
      libcurl4-openssl-dev libssl-dev libtomlplusplus-dev libcxxopts-dev libspdlog-dev nlohmann-json3-dev \
      libpng-dev libturbojpeg0-dev libjpeg-dev libcsv-dev libpugixml-dev zlib1g-dev libyaml-cpp-dev libcpp-httplib-dev \
      libprotobuf-dev protobuf-compiler libcrcutil-dev /tmp/debs/libisal2_*.deb /tmp/debs/libisal-dev_*.deb \
    && rm -rf /var/lib/apt/lists/* /tmp/debs
COPY CMakeLists.txt /src/CMakeLists.txt
COPY cmake /src/cmake
COPY runtime /src/runtime
COPY entrypoint /src/entrypoint
RUN cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DTRAINPOINT_BUILD_TESTS=OFF -DTRAINPOINT_BUILD_BENCH=OFF \
    && cmake --build /build --target trainpoint \
    && install -D -s /build/entrypoint/trainpoint /out/trainpoint

# The same binary, built outside (scripts/image-test): no second compilation of the LibTorch code.
FROM debian:bookworm AS cpu-context
COPY build-image/trainpoint /out/trainpoint

FROM cpu-${BINARY_FROM} AS cpu-binary

FROM debian:bookworm AS cpu
COPY --from=debian13-debs /debs /tmp/debs
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      ca-certificates libtorch1.13 libopenblas0-pthread libgit2-1.5 libcurl4 libssl3 libtomlplusplus3 \
      libspdlog1.10 libfmt9 libpng16-16 libturbojpeg0 libjpeg62-turbo libcsv3 libpugixml1v5 libyaml-cpp0.7 zlib1g libcpp-httplib0.11 \
      libprotobuf32 libcrcutil0 /tmp/debs/libisal2_*.deb \
      python3-torch python3-onnx python3-venv python3-pip \
    && rm -rf /var/lib/apt/lists/* /tmp/debs \
    && useradd --create-home --uid 1000 --user-group trainpoint
COPY --from=cpu-binary /out/trainpoint /usr/local/bin/trainpoint
USER 1000:1000
WORKDIR /home/trainpoint
ENV TRAINPOINT_WORKDIR=/home/trainpoint/work
ENTRYPOINT ["trainpoint"]
CMD ["run"]

# ---- gpu: Debian 12 and PyTorch's CUDA wheel -----------------------------------------------------------
# The CUDA wheel of PyTorch carries LibTorch for C++, and its dependencies are NVIDIA's CUDA runtime, cuDNN and
# NCCL as wheels: no CUDA base image is needed (the node's driver comes in through NVIDIA's container
# toolkit). trainpoint links against that LibTorch, and command mode's Python programs use the same
# libraries, as the cpu target shares Debian's libtorch1.13.
FROM debian:bookworm AS gpu-runtime
COPY --from=debian13-debs /debs /tmp/debs
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      ca-certificates libgit2-1.5 libcurl4 libssl3 libtomlplusplus3 libspdlog1.10 libfmt9 libpng16-16 libturbojpeg0 \
      libjpeg62-turbo libcsv3 libpugixml1v5 libyaml-cpp0.7 zlib1g libgomp1 libcpp-httplib0.11 libprotobuf32 libcrcutil0 \
      /tmp/debs/libisal2_*.deb \
      python3 python3-venv python3-pip \
    && rm -rf /var/lib/apt/lists/* /tmp/debs \
    && useradd --create-home --uid 1000 --user-group trainpoint

# torch from PyPI, or (TORCH_FROM=context) from wheels downloaded beforehand into build-image/wheels, mounted
# for the install only so that they add no layer.
FROM gpu-runtime AS gpu-torch-pypi
ARG TORCH_PACKAGES
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir $TORCH_PACKAGES

FROM gpu-runtime AS gpu-torch-context
ARG TORCH_PACKAGES
RUN --mount=type=bind,source=build-image/wheels,target=/wheels \
    python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheels $TORCH_PACKAGES

FROM gpu-torch-${TORCH_FROM} AS gpu-torch

# Compiled as the wheel line compiles it (scripts/configure-torch-wheel), with NVIDIA's CUDA toolkit wheels.
FROM gpu-torch AS gpu-source
COPY --from=debian13-debs /debs /tmp/debs
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      build-essential cmake ninja-build pkg-config libgit2-dev libcurl4-openssl-dev libssl-dev libtomlplusplus-dev \
      libcxxopts-dev libspdlog-dev nlohmann-json3-dev libpng-dev libturbojpeg0-dev libjpeg-dev libcsv-dev \
      libpugixml-dev zlib1g-dev libyaml-cpp-dev libcpp-httplib-dev libprotobuf-dev protobuf-compiler libcrcutil-dev \
      /tmp/debs/libisal-dev_*.deb \
    && rm -rf /var/lib/apt/lists/* /tmp/debs \
    && /opt/venv/bin/pip install --no-cache-dir "cuda-toolkit[nvcc,crt,nvvm,cccl]==13.0.2"
COPY CMakeLists.txt /src/CMakeLists.txt
COPY cmake /src/cmake
COPY runtime /src/runtime
COPY entrypoint /src/entrypoint
COPY scripts/configure-torch-wheel /src/scripts/configure-torch-wheel
RUN /src/scripts/configure-torch-wheel /opt/venv/bin/python /build -DTRAINPOINT_BUILD_TESTS=OFF \
      -DTRAINPOINT_BUILD_BENCH=OFF \
    && cmake --build /build --target trainpoint \
    && install -D -s /build/entrypoint/trainpoint /out/trainpoint

# The wheel line's binary, built outside (scripts/image-test gpu).
FROM debian:bookworm AS gpu-context
COPY build-image/trainpoint-gpu /out/trainpoint

FROM gpu-${BINARY_FROM} AS gpu-binary

FROM gpu-torch AS gpu
COPY --from=gpu-binary /out/trainpoint /usr/local/bin/trainpoint
# LibTorch, and the CUDA runtime and NCCL trainpoint links directly; LibTorch finds the rest of NVIDIA's
# libraries by its own RUNPATH.
ENV PATH=/opt/venv/bin:$PATH \
    LD_LIBRARY_PATH=/opt/venv/lib/python3.11/site-packages/torch/lib:/opt/venv/lib/python3.11/site-packages/nvidia/cu13/lib:/opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib
USER 1000:1000
WORKDIR /home/trainpoint
ENV TRAINPOINT_WORKDIR=/home/trainpoint/work
ENTRYPOINT ["trainpoint"]
CMD ["run"]
