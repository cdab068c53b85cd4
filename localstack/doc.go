// Package localstack runs a whole floe stack on one laptop with nothing to
// install: an in-process Kafka-protocol broker (franz-go's kfake) listening
// on loopback TCP, a Confluent-compatible schema registry (franz-go's
// srfake) served over HTTP on loopback, a SQLite catalog and a file
// warehouse under one folder. floe demo and the tests use it; production
// code paths never do.
package localstack
