// Package connector owns the Kafka side of floe and the sink loop: reaching
// the brokers, listing partitions and watermarks, consuming assigned
// partitions with franz-go under read_committed, checking every offset
// against the expected next one, batching rows per partition, flushing by
// records, bytes and interval, and resuming from the table's ledger.
//
// One loop serves live sinking and bounded jobs (--stop-at-end, replay):
// a bounded job is the same loop with start and end offsets. Package replay
// decides those offsets and the table a replay writes, then runs this
// package's Sink; connector itself knows nothing of replays. Pipelines runs
// several sinks in one process, sharing the broker connection and the
// catalog, checking every pipeline before it creates any table.
//
// Errors about the configuration name the Config field they concern
// (ConfigError, CheckError: a Setting), not a command-line flag: the floe
// command maps settings to its flags.
package connector
