package floetest

import "github.com/twmb/franz-go/pkg/kgo"

// MixedLog describes a topic's log that holds every kind of offset a sink
// meets, in this order on every partition: Records plain records, a
// committed transaction of Committed records, an aborted one of Aborted
// records (each transaction's marker occupies an offset), then Trailing
// more records on partition TrailingOn only, so that the other partitions
// end in the abort marker.
type MixedLog struct {
	Partitions                            int32
	Records, Committed, Aborted, Trailing int
	TrailingOn                            int32
}

// MixedLog creates topic and writes m's log into it (records from Records,
// transactional ids derived from the topic). It returns the number of
// committed records: the rows an event table of the whole log holds.
func (e *Env) MixedLog(topic string, m MixedLog) int {
	e.T.Helper()
	e.Topic(topic, m.Partitions, nil)
	rows := 0
	var committed, aborted []*kgo.Record
	for p := range m.Partitions {
		e.Produce(Records(topic, p, m.Records, "a"))
		committed = append(committed, Records(topic, p, m.Committed, "txn")...)
		aborted = append(aborted, Records(topic, p, m.Aborted, "aborted")...)
		rows += m.Records
	}
	e.Txn(topic+"-commit", committed, true)
	e.Txn(topic+"-abort", aborted, false)
	rows += len(committed)
	if m.Trailing > 0 {
		e.Produce(Records(topic, m.TrailingOn, m.Trailing, "b"))
		rows += m.Trailing
	}
	return rows
}
