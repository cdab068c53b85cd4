// Package snapshot owns the Iceberg side of a floe table: opening it in a
// catalog (package catalog opens the catalog), writing Arrow batches as
// Parquet data files (one file set per Kafka partition), committing one
// snapshot per flush that carries its ledger ranges, optimistic concurrency
// and fencing of zombie writers, reading the ledger back from the table's
// snapshots, and ledger-preserving maintenance.
//
// It knows nothing of Kafka beyond the vocabulary of package mapping.
package snapshot
