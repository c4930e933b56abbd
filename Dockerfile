# vmgroup-operator's image: built with the same make target as everywhere
# else, run as a non-root user with only the shared libraries it needs.
FROM debian:bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
        build-essential pkg-config git ca-certificates \
        libuv1-dev libcurl4-openssl-dev libssl-dev libxml2-dev libcjson-dev libyaml-dev libhttp-parser-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ARG VERSION=dev
RUN make build VERSION=$VERSION

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
        ca-certificates libuv1 libcurl4 libssl3 libxml2 libcjson1 libyaml-0-2 libhttp-parser2.9 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/bin/vmgroup-operator /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
