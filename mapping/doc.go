// Package mapping owns how a Kafka log maps onto an Iceberg table, in both
// directions, as pure functions with no I/O:
//
//   - records to rows: the table schema (metadata columns plus the value) and
//     the builder that turns Kafka records into Arrow record batches, and the
//     partition spec a table is asked for (PartitionBy: --partition-by);
//   - offsets to snapshots: ranges [low, high) per topic partition, the ledger
//     encoding carried in snapshot summary properties (or, for a commit of
//     many ranges, in a ranges file its summary references by digest: the
//     file's bytes in, the commit out; reading the file is the caller's
//     I/O), and the interval
//     arithmetic (coverage, gaps, overlaps, lookups) that the sink, the audit
//     and the lookups share.
package mapping
