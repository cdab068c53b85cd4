package snapshot_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// upsertModel drives an upsert table keyed by the Kafka key through
// random flushes (upserts and tombstones over two Kafka partitions, a key
// always in the same partition), truncates, compactions (some racing a
// sink commit) and expiries, and checks after every step that the table
// read with iceberg-go's scan is the fold of the log, and that every live
// ledger commit's snapshot reads as the fold up to that commit.
type upsertModel struct {
	t       *testing.T
	rng     *rand.Rand
	sink    *snapshot.Table
	hc      *hookCatalog
	comp    *snapshot.Table
	hcSink  *hookCatalog
	comp2   *snapshot.Table
	fv      string
	next    map[int32]int64
	state   map[string]string
	atSnap  map[int64]map[string]string
	seq     int
	keys    int
	verbose []string
}

func keyPartition(k string) int32 {
	var h int32
	for _, c := range k {
		h += c
	}
	return h % 2
}

// flush commits n random records (tombstones among them); truncate, when
// set, truncates partition 0 before them (they are then of partition 0).
func (m *upsertModel) flush(n int, truncate bool) {
	t := m.t
	var recs []testRec
	bounds := map[int32]mapping.Interval{}
	dels := map[mapping.TopicPartition][]int64{}
	counts := map[int32][2]int64{}
	lows := maps.Clone(m.next)
	if truncate {
		// The truncate event's offset first.
		m.next[0]++
	}
	type change struct {
		key, val string
	}
	var changes []change
	for range n {
		k := fmt.Sprintf("k%02d", m.rng.IntN(m.keys))
		p := keyPartition(k)
		if truncate && p != 0 {
			continue
		}
		off := m.next[p]
		m.next[p]++
		v := fmt.Sprintf("v%d", m.seq)
		m.seq++
		c := counts[p]
		if m.rng.IntN(4) == 0 {
			v = "-"
			dels[mapping.TopicPartition{Topic: "t", Partition: p}] = append(dels[mapping.TopicPartition{Topic: "t", Partition: p}], off)
			c[1]++
		} else {
			c[0]++
		}
		counts[p] = c
		recs = append(recs, testRec{p, off, k, v, 0})
		changes = append(changes, change{k, v})
	}
	slices.SortStableFunc(recs, func(a, b testRec) int { return int(a.partition - b.partition) })
	for p := range int32(2) {
		if m.next[p] > lows[p] {
			bounds[p] = mapping.Interval{Low: lows[p], High: m.next[p]}
		}
	}
	if len(bounds) == 0 {
		return
	}
	f := flushOf(t, m.sink, bounds, recs...)
	f.Deletes = dels
	for i, r := range f.Ranges {
		c := counts[r.Partition]
		f.Ranges[i].Records, f.Ranges[i].Deletes = c[0], c[1]
		if truncate && r.Partition == 0 {
			f.Ranges[i].Deletes++
		}
	}
	if truncate {
		f.Truncated = map[mapping.TopicPartition]int64{{Topic: "t", Partition: 0}: lows[0]}
		clear(m.state)
	}
	for _, c := range changes {
		if c.val == "-" {
			delete(m.state, c.key)
		} else {
			m.state[c.key] = c.val
		}
	}
	res := commitFlush(t, m.sink, f)
	m.atSnap[res.Commit.SnapshotID] = maps.Clone(m.state)
	m.verbose = append(m.verbose, fmt.Sprintf("commit %d (truncate %v): %d records", res.Commit.SnapshotID, truncate, len(recs)))
}

func (m *upsertModel) check(when string) {
	t := m.t
	t.Helper()
	if err := m.sink.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var dups []string
	for _, r := range snapshotRows(t, m.sink, 0) {
		kv := strings.SplitN(strings.SplitN(r, " ", 2)[1], "=", 2)
		if _, ok := got[kv[0]]; ok {
			dups = append(dups, kv[0])
		}
		got[kv[0]] = kv[1]
	}
	if len(dups) > 0 || !maps.Equal(got, m.state) {
		t.Fatalf("%s: the table is not the fold of the log (keys twice: %v):\n got  %v\n want %v\nhistory:\n%s", when, dups, got, m.state, strings.Join(m.verbose, "\n"))
	}
	meta := m.sink.Iceberg().Metadata()
	for id, want := range m.atSnap {
		if meta.SnapshotByID(id) == nil {
			continue
		}
		got := map[string]string{}
		for _, r := range snapshotRows(t, m.sink, id) {
			kv := strings.SplitN(strings.SplitN(r, " ", 2)[1], "=", 2)
			got[kv[0]] = kv[1]
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s: snapshot %d (kept) does not read as the fold at its commit:\n got  %v\n want %v\nhistory:\n%s", when, id, got, want, strings.Join(m.verbose, "\n"))
		}
	}
}

// compact compacts the table; race: 1 a sink commit gets in first, 2 a
// truncate, 3 another compaction.
func (m *upsertModel) compact(race int) {
	t := m.t
	if race > 0 {
		m.hc.beforeCommit = func() {
			if err := m.sink.Refresh(t.Context()); err != nil {
				t.Error(err)
				return
			}
			switch race {
			case 1:
				m.flush(1+m.rng.IntN(6), false)
			case 2:
				m.flush(m.rng.IntN(4), true)
			case 3:
				res, err := m.comp2.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20})
				if err != nil {
					t.Errorf("inner compaction: %v", err)
				}
				m.verbose = append(m.verbose, fmt.Sprintf("inner compaction %d: replaced %d, added %d, dropped %d deletes", res.SnapshotID, res.Replaced, res.Added, res.DroppedDeletes))
			}
		}
	}
	res, err := m.comp.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20})
	m.hc.beforeCommit = nil
	if err != nil && !(race >= 2 && errors.Is(err, snapshot.ErrCompactConflict)) {
		t.Fatalf("compaction (race %v): %v", race, err)
	}
	m.verbose = append(m.verbose, fmt.Sprintf("compaction %d (race %v): replaced %d, added %d, dropped %d deletes, %d attempts", res.SnapshotID, race, res.Replaced, res.Added, res.DroppedDeletes, res.Attempts))
}

// sinkLoses commits a flush that a compaction gets in before.
func (m *upsertModel) sinkLoses() {
	t := m.t
	m.hcSink.beforeCommit = func() {
		res, err := m.comp2.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20})
		if err != nil {
			t.Errorf("compaction before a sink commit: %v", err)
		}
		m.verbose = append(m.verbose, fmt.Sprintf("compaction %d before the next commit: replaced %d, added %d, dropped %d deletes", res.SnapshotID, res.Replaced, res.Added, res.DroppedDeletes))
	}
	m.flush(1+m.rng.IntN(6), m.fv == "2" && m.rng.IntN(3) == 0)
	m.hcSink.beforeCommit = nil
}

func (m *upsertModel) expire() {
	t := m.t
	res, err := m.sink.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1 + m.rng.IntN(3),
		RemoveOrphans: m.rng.IntN(2) == 0, OrphanMinAge: time.Nanosecond})
	if err != nil {
		t.Fatalf("expiry: %v", err)
	}
	m.verbose = append(m.verbose, fmt.Sprintf("expired %d snapshots, %d orphans removed", len(res.Expired), len(res.Orphans)))
}

func TestReviewUpsertMaintenanceModel(t *testing.T) {
	for _, spec := range []string{"", "bucket(4, kafka_key)", "truncate(2, kafka_key)", "identity(kafka_key)"} {
		for _, fv := range []string{"2", "3"} {
			t.Run(fmt.Sprintf("spec=%s/v%s", spec, fv), func(t *testing.T) {
				for seed := range uint64(3) {
					runUpsertModel(t, spec, fv, seed)
				}
			})
		}
	}
}

func runUpsertModel(t *testing.T, spec, fv string, seed uint64) {
	cat := tempCatalog(t)
	name := fmt.Sprintf("lake.model%d", seed)
	opts := snapshot.OpenOptions{Create: true, Mode: mapping.ModeUpsert, Properties: map[string]string{"format-version": fv}}
	if spec != "" {
		opts.PartitionBy = partitionBy(t, spec)
	}
	m := &upsertModel{t: t, rng: rand.New(rand.NewPCG(seed, 7)), next: map[int32]int64{}, state: map[string]string{}, atSnap: map[int64]map[string]string{}, keys: 12}
	m.fv = fv
	m.hcSink = &hookCatalog{Catalog: cat}
	openTestTable(t, cat, name, opts)
	m.sink = openTestTable(t, m.hcSink, name, snapshot.OpenOptions{})
	m.hc = &hookCatalog{Catalog: cat}
	m.comp = openTestTable(t, m.hc, name, snapshot.OpenOptions{})
	m.comp2 = openTestTable(t, cat, name, snapshot.OpenOptions{})
	for step := range 40 {
		switch op := m.rng.IntN(14); {
		case op == 10:
			m.sinkLoses()
		case op == 11:
			m.compact(3)
		case op == 12 && fv == "2":
			m.compact(2)
		case op >= 12:
			m.compact(1)
		case op < 5:
			m.flush(1+m.rng.IntN(8), false)
		case op == 5:
			// A truncate cannot commit on v3 (TestReviewTruncateOnFormatV3).
			m.flush(m.rng.IntN(4), fv == "2")
		case op == 6:
			m.compact(0)
		case op == 7:
			m.compact(1)
		default:
			m.expire()
		}
		m.check(fmt.Sprintf("seed %d step %d", seed, step))
	}
	if testing.Verbose() {
		t.Logf("seed %d:\n%s", seed, strings.Join(m.verbose, "\n"))
	}
}
