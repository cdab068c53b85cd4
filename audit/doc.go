// Package audit owns floe's completeness audit: the proof that every offset
// of a Kafka log is accounted for in an Iceberg table, exactly once, with
// nothing lost unnoticed. It checks each (topic, partition) at four levels,
// cheapest first:
//
//  1. ledger (snapshot summaries and the ranges files they reference): the
//     ranges are contiguous from the first sunk offset to the next offset;
//     every gap, every overlap and every range recorded as lost to
//     retention is reported exactly;
//  2. files (manifests only): every live data file lies inside one range of
//     the floe commit that added it and the files of each range hold its
//     record count; files added by other writers, files removed by
//     overwrites or deletes, and row-level delete files are findings;
//  3. rows (reads only the partition and offset columns): every offset is
//     unique and inside a range, each range holds exactly its record count,
//     and every file's rows agree with its manifest;
//  4. broker (with a broker connection): the retained log [logStart,
//     highWatermark) against the ledger: lag, offsets lost to retention
//     before they were sunk, partitions the table has never seen; and
//     optionally the content: the retained log re-read and compared record
//     by record (key, value, headers, timestamp) with the rows, every offset
//     without a row classified as transaction marker, aborted record or
//     compacted away.
//
// A state table (mapping.ModeFold) keeps only each key's latest record; its
// files, rows and content levels check a state table's invariants instead
// of an event table's (state.go).
//
// It renders reports as 80-column text, as stable JSON carrying an
// evidence digest over the canonical ledger and the table's metadata
// location, and as one self-contained HTML document for a person (html.go:
// the verdict, coverage bars drawn to scale, the findings and the evidence). The audit reads the ledger through snapshot.Table, like every
// other floe command, and writes nothing: not to the table, not to the
// broker (it consumes without a group and commits no offsets).
package audit
