# floe: Kafka -> Apache Iceberg sink.
#   docker build -t floe .
#   docker run --rm floe --help
# docker-compose.yml runs it against Kafka, MinIO and a PostgreSQL catalog.

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so that source edits do not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Pure Go (the SQLite catalog driver is modernc): a static binary.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/floe ./cmd/floe

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/floe /usr/local/bin/floe
# The working directory is writable by the nonroot user: the zero-setup
# default catalog and warehouse (floe-data/) land there.
WORKDIR /home/nonroot
# floe sink --metrics-addr :9464 serves /metrics and /healthz here.
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/floe"]
CMD ["--help"]
