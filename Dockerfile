# syntax=docker/dockerfile:1
# The three binaries (controller, webhook and the backup agent its backup Jobs run) in one
# minimal, non-root image.

# Base images are pinned by digest (a tag can be moved); Renovate proposes the updates.
FROM rust:1.95.0-bookworm@sha256:6258907abe69656e41cd992e0b705cdcfabcbbe3db374f92ed2d47121282d4a1 AS build
WORKDIR /src

# Dependency layer: the manifests and empty sources first, so that changing the code
# reuses the compiled dependencies.
COPY Cargo.toml Cargo.lock rust-toolchain.toml ./
COPY crates/api/Cargo.toml crates/api/
COPY crates/runtime/Cargo.toml crates/runtime/
COPY crates/controller/Cargo.toml crates/controller/
COPY crates/webhook/Cargo.toml crates/webhook/
COPY crates/crdgen/Cargo.toml crates/crdgen/
COPY crates/testenv/Cargo.toml crates/testenv/
COPY crates/backup/Cargo.toml crates/backup/
COPY crates/e2e/Cargo.toml crates/e2e/
COPY crates/plugin/Cargo.toml crates/plugin/
COPY xtask/Cargo.toml xtask/
RUN for crate in crates/api crates/runtime crates/controller crates/webhook crates/crdgen crates/testenv crates/backup crates/e2e crates/plugin xtask; do \
        mkdir -p "$crate/src" && touch "$crate/src/lib.rs" && echo 'fn main() {}' > "$crate/src/main.rs"; \
    done \
    && cargo build --locked --release -p database-controller -p database-webhook -p database-backup \
    && rm -rf crates xtask

COPY crates crates
COPY xtask xtask
# The real sources are newer than the stubs' build outputs, so only the workspace
# crates are rebuilt.
RUN cargo build --locked --release -p database-controller -p database-webhook -p database-backup --bins

FROM gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="database-operator" \
      org.opencontainers.image.description="Kubernetes operator for Database resources (mycompany.io/v1)" \
      org.opencontainers.image.source="https://github.com/mycompany/database-operator" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /src/target/release/controller /controller
COPY --from=build /src/target/release/webhook /webhook
COPY --from=build /src/target/release/backup-agent /backup-agent
USER 65532:65532
ENTRYPOINT ["/controller"]
