package mapping

import "time"

// KeyRecord is one record of a key, as the winner rule of upsert tables
// compares it with the key's other records of the same commit.
type KeyRecord struct {
	Partition TopicPartition
	Offset    int64
	Timestamp time.Time
}

// Supersedes reports whether record a replaces record b of the same key
// within one commit (Winner). Within a partition the later offset wins,
// as the log orders them. Across partitions (a key that moved, in a
// repartitioned topic) no order is given, and the later record timestamp
// wins, then, on equal timestamps, the higher partition (then topic), so
// that the rule never ties. Across commits, the record of the later
// commit wins whatever the timestamps.
//
// The order across partitions is applied to each partition's latest
// record of the key only: a partition's earlier records are superseded by
// its latest one whatever their timestamps.
func Supersedes(a, b KeyRecord) bool {
	if a.Partition == b.Partition {
		return a.Offset > b.Offset
	}
	if !a.Timestamp.Equal(b.Timestamp) {
		return a.Timestamp.After(b.Timestamp)
	}
	if a.Partition.Partition != b.Partition.Partition {
		return a.Partition.Partition > b.Partition.Partition
	}
	return a.Partition.Topic > b.Partition.Topic
}

// Winner returns the index in vs of the record that gives one key its row
// after a commit that holds the records vs of that key: each partition's
// latest record by offset, then, among those, the latest by Supersedes.
// -1 when vs is empty.
func Winner(vs []KeyRecord) int {
	latest := map[TopicPartition]int{}
	for i, v := range vs {
		if j, ok := latest[v.Partition]; !ok || Supersedes(v, vs[j]) {
			latest[v.Partition] = i
		}
	}
	win := -1
	for _, i := range latest {
		if win < 0 || Supersedes(vs[i], vs[win]) {
			win = i
		}
	}
	return win
}
