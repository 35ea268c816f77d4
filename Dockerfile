# trainpoint images. Targets:
#   gpu (default)  NVIDIA CUDA + cuDNN Ubuntu base, LibTorch 2.x for CUDA with NCCL (from the PyTorch wheel).
#   cpu            debian:bookworm with Debian's LibTorch 1.13 (Gloo only).
# Both carry Python and PyTorch for command mode ([job] command), sharing trainpoint's LibTorch, and
# python3-venv and pip for job.requirements: an environment over the image's Python (the cpu image's
# PyTorch is Debian's, in the system's site-packages; the gpu image's is in /opt/venv, which such an
# environment sees through a .pth file trainpoint writes).
# Both go the same way: a `*-build` stage compiles trainpoint, and the final stage carries only the
# binary and its runtime libraries, runs as an unprivileged user and is configured by TRAINPOINT_*
# environment variables (docs/guide.md). Only the cpu target is built and run by CI
# (scripts/image-test); the gpu target cannot be built there (no CUDA base image, no GPU) and is kept
# step for step in the shape of the cpu target.
#
#   docker build --target cpu -t trainpoint:cpu .
#   docker build -t trainpoint:gpu .                      # gpu, the default target (last stage)
#   docker build --target cpu --build-arg BINARY_FROM=context -t trainpoint:cpu .
#       takes a trainpoint already built for Debian 12 from build-image/trainpoint instead of
#       compiling it again (scripts/image-test does this; the binary must match the image's libraries).

ARG BINARY_FROM=source
ARG CUDA_IMAGE=nvidia/cuda:12.6.3-cudnn-devel-ubuntu24.04
ARG CUDA_RUNTIME_IMAGE=nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04
ARG TORCH_INDEX=https://download.pytorch.org/whl/cu126
# 2.7 is the first whose Linux wheels use the C++11 ABI, as Ubuntu's libraries do.
ARG TORCH_VERSION=2.7.1

# ---- cpu: Debian 12 and its LibTorch ----------------------------------------------------------------
FROM debian:bookworm AS cpu-build
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      build-essential cmake ninja-build pkg-config libtorch-dev libgloo-dev libopenblas0-pthread libgit2-dev \
      libcurl4-openssl-dev libssl-dev libtomlplusplus-dev libcxxopts-dev libspdlog-dev nlohmann-json3-dev \
      libpng-dev libturbojpeg0-dev libjpeg-dev libcsv-dev libpugixml-dev zlib1g-dev libyaml-cpp-dev libcpp-httplib-dev \
      libprotobuf-dev protobuf-compiler libcrcutil-dev \
    && rm -rf /var/lib/apt/lists/*
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
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      ca-certificates libtorch1.13 libopenblas0-pthread libgit2-1.5 libcurl4 libssl3 libtomlplusplus3 \
      libspdlog1.10 libfmt9 libpng16-16 libturbojpeg0 libjpeg62-turbo libcsv3 libpugixml1v5 libyaml-cpp0.7 zlib1g libcpp-httplib0.11 \
      libprotobuf32 libcrcutil0 \
      python3-torch python3-venv python3-pip \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 1000 --user-group trainpoint
COPY --from=cpu-binary /out/trainpoint /usr/local/bin/trainpoint
USER 1000:1000
WORKDIR /home/trainpoint
ENV TRAINPOINT_WORKDIR=/home/trainpoint/work
ENTRYPOINT ["trainpoint"]
CMD ["run"]

# ---- gpu: CUDA + cuDNN, PyTorch's CUDA LibTorch (NCCL inside) ---------------------------------------
# The CUDA wheel of PyTorch carries LibTorch for C++ as well: trainpoint links against it, and command
# mode's Python programs use the same libraries, as the cpu target shares Debian's libtorch1.13.
FROM ${CUDA_IMAGE} AS gpu-build
ARG TORCH_INDEX
ARG TORCH_VERSION
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      build-essential cmake ninja-build pkg-config python3-venv ca-certificates libgit2-dev libcurl4-openssl-dev \
      libssl-dev libtomlplusplus-dev libcxxopts-dev libspdlog-dev nlohmann-json3-dev libpng-dev \
      libturbojpeg0-dev libjpeg-dev libcsv-dev libpugixml-dev zlib1g-dev libyaml-cpp-dev libcpp-httplib-dev \
      libprotobuf-dev protobuf-compiler libcrcutil-dev \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --index-url "$TORCH_INDEX" "torch==$TORCH_VERSION"
COPY CMakeLists.txt /src/CMakeLists.txt
COPY cmake /src/cmake
COPY runtime /src/runtime
COPY entrypoint /src/entrypoint
RUN cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DTRAINPOINT_BUILD_TESTS=OFF -DTRAINPOINT_BUILD_BENCH=OFF \
      -DCMAKE_PREFIX_PATH="$(/opt/venv/bin/python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
    && cmake --build /build --target trainpoint \
    && install -D -s /build/entrypoint/trainpoint /out/trainpoint

FROM ${CUDA_RUNTIME_IMAGE} AS gpu
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      ca-certificates python3 libgit2-1.7 libcurl4t64 libssl3t64 libtomlplusplus3t64 libspdlog1.12 libfmt9 \
      libpng16-16t64 libturbojpeg libjpeg-turbo8 libcsv3 libpugixml1v5 libyaml-cpp0.8 zlib1g libgomp1 libcpp-httplib0.14t64 \
      libprotobuf32t64 libcrcutil0 \
      python3-venv python3-pip \
    && rm -rf /var/lib/apt/lists/* \
    && (userdel --remove ubuntu 2>/dev/null || true) \
    && useradd --create-home --uid 1000 --user-group trainpoint
COPY --from=gpu-build /opt/venv /opt/venv
COPY --from=gpu-build /out/trainpoint /usr/local/bin/trainpoint
ENV PATH=/opt/venv/bin:$PATH LD_LIBRARY_PATH=/opt/venv/lib/python3.12/site-packages/torch/lib
USER 1000:1000
WORKDIR /home/trainpoint
ENV TRAINPOINT_WORKDIR=/home/trainpoint/work
ENTRYPOINT ["trainpoint"]
CMD ["run"]
