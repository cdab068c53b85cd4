// Package snapshot owns the Iceberg side of a floe table: opening it in a
// catalog (package catalog opens the catalog), writing Arrow batches as
// Parquet data files (one file set per Kafka partition, split by Iceberg
// partition value in a partitioned table), committing one snapshot per
// flush that carries its ledger ranges (with the schema changes and the
// partition fields its columns need; a commit of many ranges writes them
// to a ranges file its summary references), partition spec evolution,
// optimistic concurrency and fencing of zombie writers, reading the ledger
// back from the table's snapshots and their ranges files, and
// ledger-preserving maintenance.
//
// It knows nothing of Kafka beyond the vocabulary of package mapping.
package snapshot
