# floe: Kafka -> Apache Iceberg sink.
#   docker build --build-arg FLOE_COMMIT=$(git rev-parse HEAD) -t floe .
#   docker run --rm floe --help
# docker-compose.yml runs it against Kafka, MinIO and a PostgreSQL catalog.

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so that source edits do not download them again.
COPY go.mod go.sum ./
# go.mod replaces a module by a folder of third_party/ (see its README).
COPY third_party/ third_party/
RUN go mod download
COPY . .
# Pure Go (the SQLite catalog driver is modernc): a static binary.
# -s -w drops the symbol table and DWARF (127 MB -> 92 MB; panics still print
# stack traces). -tags grpcnotrace leaves out gRPC's request tracing, which
# floe never uses (gRPC comes in through arrow-go's Flight package, which
# Parquet schema serialization imports): its golang.org/x/net/trace renders
# html/template pages, and a reachable template execution makes the linker
# keep every exported method of every type. floe's own HTML audit report
# executes templates too now, so the tag saves little (about 0.1 MB).
# .git is not in the build context (.dockerignore), so the toolchain records
# no commit: FLOE_COMMIT gives floe version one (docker build --build-arg
# FLOE_COMMIT=$(git rev-parse HEAD) .); left empty, it says the commit is unknown.
ARG FLOE_COMMIT=
RUN CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -ldflags="-s -w -X main.buildCommit=${FLOE_COMMIT}" -o /out/floe ./cmd/floe

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/floe /usr/local/bin/floe
# The working directory is writable by the nonroot user: the zero-setup
# default catalog and warehouse (floe-data/) land there.
WORKDIR /home/nonroot
# floe sink --metrics-addr :9464 serves /metrics, /healthz and /readyz here.
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/floe"]
CMD ["--help"]
