// Package lookup answers floe's read-only questions about a table and its
// log: which range, snapshot and data file hold an offset (Where), which
// snapshot first covers a position or a record time and what the table held
// then (AsOf, ExactAt, Rows), where the table stands against its log per
// partition (Status), and the rows as a file (Export: Parquet, CSV, JSON
// lines). A question without a true answer (a negative offset, a record time
// still to come) is a *QueryError naming the value.
//
// The answers combine the table's ledger and data (package snapshot) with,
// when a broker connection is given, the log itself (package connector):
// what an offset without a row is, and where a record time falls. Like the
// audit, lookups read both sides and write nothing, so they live beside
// them rather than in either: snapshot does not talk to Kafka, connector is
// the consumer and sink loop, and mapping stays pure. The CLI (floe where,
// floe as-of, floe status) only parses flags and formats the structs
// returned here, whose JSON field names are its stable output; the demo
// calls the same functions.
package lookup
