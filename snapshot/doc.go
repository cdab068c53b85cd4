// Package snapshot owns the Iceberg side of floe: opening the catalog and the
// table, writing Arrow batches as Parquet data files (one file set per Kafka
// partition), committing one snapshot per flush that carries its ledger
// ranges, optimistic concurrency and fencing of zombie writers, and reading
// the ledger back from the table's snapshots.
//
// It knows nothing of Kafka beyond the vocabulary of package mapping.
package snapshot
