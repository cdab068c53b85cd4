package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/apache/arrow-go/v18/arrow/array"
	"hash/crc32"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// s68Pos is what the log holds at one offset, as the model knows it.
type s68Pos int

const (
	s68Row     s68Pos = iota // a committed record: one row
	s68NoRow                 // an aborted record or a marker
	s68Deleted               // deleted by DeleteRecords before the sink read it
)

// s68Model is the log as produced: per topic partition, what each offset holds.
type s68Model struct {
	log map[mapping.TopicPartition]map[int64]s68Pos
}

func (m *s68Model) note(recs []*kgo.Record, what s68Pos) {
	if m.log == nil {
		m.log = map[mapping.TopicPartition]map[int64]s68Pos{}
	}
	for _, r := range recs {
		tp := mapping.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		if m.log[tp] == nil {
			m.log[tp] = map[int64]s68Pos{}
		}
		m.log[tp][r.Offset] = what
	}
}

// produce writes recs (plain, or in a transaction committed or aborted)
// and records their offsets; a transaction's marker is the offset after
// its last record of each partition.
func (m *s68Model) produce(t *testing.T, brokers []string, recs []*kgo.Record, txn string, commit bool) {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if txn != "" {
		opts = append(opts, kgo.TransactionalID(txn))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if txn != "" {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if txn != "" {
		if err := cl.EndTransaction(t.Context(), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	what := s68Row
	if txn != "" && !commit {
		what = s68NoRow
	}
	m.note(recs, what)
	if txn != "" {
		last := map[mapping.TopicPartition]int64{}
		for _, r := range recs {
			tp := mapping.TopicPartition{Topic: r.Topic, Partition: r.Partition}
			last[tp] = max(last[tp], r.Offset)
		}
		for tp, o := range last {
			m.log[tp][o+1] = s68NoRow
		}
	}
}

// TestReviewS68HoldsTwoTopicsTxnCompactExpireWhere: two topics (8 and 5
// partitions, so the quiet partitions of a flush share file groups) into
// one table, committed and aborted transactions on some partitions,
// records deleted (DeleteRecords) while the sink is stopped and recorded
// lost, sinks with random flush sizes, compaction with a small target and
// expiry down to one snapshot between them. At the end every committed
// record has one row, floe where names a live file for each row (whose
// bounds hold it) and the right status for every other offset, and the
// deep audit reports only the recorded losses.
func TestReviewS68HoldsTwoTopicsTxnCompactExpireWhere(t *testing.T) {
	crashScenario(t)
	s68TwoTopics(t, "ta", "tb", 1)
}

// TestReviewS68HoldsTwoLongTopicsWhere: TestReviewS68HoldsTwoTopicsTxnCompactExpireWhere
// with topic names sharing their first 16 characters (Iceberg's truncated
// string bounds cannot tell the two topics' files apart).
func TestReviewS68HoldsTwoLongTopicsWhere(t *testing.T) {
	crashScenario(t)
	s68TwoTopics(t, "orders.europe-west.alpha", "orders.europe-west.beta", 2)
}

func s68TwoTopics(t *testing.T, ta, tb string, seed uint64) {
	rng := rand.New(rand.NewPCG(68, seed))
	st, brokers, cat := partitionedStack(t, ta, 8)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, tb, 5, nil); err != nil {
		t.Fatal(err)
	}
	parts := map[string]int32{ta: 8, tb: 5}
	m := &s68Model{}
	n := 0
	batch := func(topic string, k int) []*kgo.Record {
		var out []*kgo.Record
		for range k {
			p := rng.Int32N(parts[topic])
			n++
			out = append(out, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", n%37),
				Value: fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, n, strings.Repeat("x", rng.IntN(200)))})
		}
		return out
	}
	sink := func() {
		args := append([]string{"sink", "--brokers", brokers, "--topic", ta, "--topic", tb, "--table", "lake.two",
			"--stop-at-end", "--on-data-loss", "record", "--flush-records", fmt.Sprint(5 + rng.IntN(200))}, cat...)
		mustFloe(t, args...)
	}
	for round := range 6 {
		for range 3 {
			m.produce(t, st.Brokers, batch(ta, 20+rng.IntN(80)), "", false)
			m.produce(t, st.Brokers, batch(tb, 20+rng.IntN(80)), "", false)
		}
		m.produce(t, st.Brokers, batch(ta, 10+rng.IntN(20)), fmt.Sprintf("tx%d", round), true)
		m.produce(t, st.Brokers, batch(ta, 10+rng.IntN(20)), fmt.Sprintf("tx%d", round), false)
		m.produce(t, st.Brokers, batch(ta, 10+rng.IntN(20)), "", false)
		if round == 2 || round == 4 {
			// The sink is stopped: retention deletes part of what it has not read.
			tp := mapping.TopicPartition{Topic: ta, Partition: rng.Int32N(8)}
			if round == 4 {
				tp = mapping.TopicPartition{Topic: tb, Partition: rng.Int32N(5)}
			}
			l, err := openTableNoFail(t, st, "lake.two")
			if err != nil {
				t.Fatal(err)
			}
			from := l[tp]
			hi := int64(0)
			for o := range m.log[tp] {
				hi = max(hi, o+1)
			}
			upTo := from + (hi-from)/2
			if upTo > from {
				if err := st.Cluster.DeleteRecords(tp.Topic, tp.Partition, upTo); err != nil {
					t.Fatal(err)
				}
				for o := from; o < upTo; o++ {
					m.log[tp][o] = s68Deleted
				}
				t.Logf("deleted %s [%d, %d)", tp, from, upTo)
			}
		}
		sink()
		switch round % 3 {
		case 1:
			mustFloe(t, append([]string{"maintain", "--table", "lake.two", "--compact", "--target-file-size", fmt.Sprint(4096 + rng.IntN(40000))}, cat...)...)
		case 2:
			mustFloe(t, append([]string{"maintain", "--table", "lake.two", "--retain-last", "1", "--expire-older-than", "0s"}, cat...)...)
		}
	}
	s68Check(t, st, brokers, cat, "lake.two", m)
}

// openTableNoFail returns the table's next offsets per partition (empty
// when it does not exist yet).
func openTableNoFail(t *testing.T, st *localstack.Stack, name string) (map[mapping.TopicPartition]int64, error) {
	code, out, errs := floe(t, append([]string{"ledger", "--table", name, "--json"}, "--catalog", st.Catalog().Catalog)...)
	if code != 0 {
		if strings.Contains(errs+out, "does not exist") || strings.Contains(errs+out, "no such table") {
			return map[mapping.TopicPartition]int64{}, nil
		}
	}
	tbl := openTable(t, st.Catalog(), name)
	l, err := tbl.Ledger()
	if err != nil {
		return nil, err
	}
	return l.Next(), nil
}

func s68Check(t *testing.T, st *localstack.Stack, brokers string, cat []string, name string, m *s68Model) {
	t.Helper()
	tbl := openTable(t, st.Catalog(), name)
	rows := rowsByOffset(t, tbl)
	bad := 0
	for tp, offs := range m.log {
		for o, what := range offs {
			got := rows[tp][o]
			want := 0
			if what == s68Row {
				want = 1
			}
			if got != want {
				bad++
				if bad < 10 {
					t.Errorf("%s@%d: %d rows, want %d (model %d)", tp, o, got, want, what)
				}
			}
		}
	}
	for tp, offs := range rows {
		for o := range offs {
			if _, ok := m.log[tp][o]; !ok {
				t.Errorf("%s@%d: a row of no record", tp, o)
			}
		}
	}
	files, err := tbl.Files(t.Context(), tbl.Head().SnapshotID)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]int{}
	for i, f := range files {
		live[f.Path] = i
	}
	t.Logf("%d live files", len(files))
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	fileOf := map[mapping.TopicPartition]map[int64]string{}
	err = tbl.ReadFiles(t.Context(), paths, func(fb snapshot.FileBatch) error {
		if fb.Batch == nil {
			return nil
		}
		var topic *array.String
		var part *array.Int32
		var off *array.Int64
		for i, f := range fb.Batch.Schema().Fields() {
			switch f.Name {
			case mapping.ColTopic:
				topic, _ = fb.Batch.Column(i).(*array.String)
			case mapping.ColPartition:
				part = fb.Batch.Column(i).(*array.Int32)
			case mapping.ColOffset:
				off = fb.Batch.Column(i).(*array.Int64)
			}
		}
		for r := 0; r < int(fb.Batch.NumRows()); r++ {
			tp := mapping.TopicPartition{Topic: topic.Value(r), Partition: part.Value(r)}
			if fileOf[tp] == nil {
				fileOf[tp] = map[int64]string{}
			}
			fileOf[tp][off.Value(r)] = fb.Path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wrong := 0
	for tp, offs := range m.log {
		for _, o := range slices.Sorted(func(yield func(int64) bool) {
			for o := range offs {
				if !yield(o) {
					return
				}
			}
		}) {
			what := offs[o]
			w, err := lookup.Where(t.Context(), tbl, nil, tp, o)
			if err != nil {
				t.Fatalf("where %s@%d: %v", tp, o, err)
			}
			ok := true
			switch what {
			case s68Row:
				i, isLive := live[w.File]
				ok = w.Status == lookup.StatusRow && isLive && w.File == fileOf[tp][o]
				if ok {
					f := files[i]
					ok = f.PartitionMin <= tp.Partition && tp.Partition <= f.PartitionMax && f.Offsets.Contains(o) && f.MayHoldTopic(tp.Topic)
				}
			case s68NoRow:
				ok = w.Status == lookup.StatusNoRow
			case s68Deleted:
				ok = w.Status == lookup.StatusLost
			}
			if !ok {
				wrong++
				if wrong < 10 {
					b, _ := json.Marshal(w)
					t.Errorf("where %s@%d (model %d): %s", tp, o, what, b)
				}
			}
		}
	}
	s68CheckFiles(t, cat, name, fileOf)
	code, out, errs := floe(t, append([]string{"audit", "--table", name, "--deep", "--verify-content", "--brokers", brokers, "--json"}, cat...)...)
	var rep struct {
		Verdict  string `json:"verdict"`
		Findings []struct {
			Kind string `json:"kind"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("audit exit %d: %v\n%s\n%s", code, err, out, errs)
	}
	for _, f := range rep.Findings {
		if f.Kind != "lost" && f.Kind != "loss" && f.Kind != "recorded-loss" {
			t.Errorf("audit finding %s:\n%s", f.Kind, out)
			break
		}
	}
	t.Logf("audit exit %d verdict %s, %d findings", code, rep.Verdict, len(rep.Findings))
}

// s68JSONTable sinks values (one partition, in order) into a --value json
// table with flush size flush and returns its rows' columns and its dead
// letters' errors.
func s68JSONTable(t *testing.T, values []string, flush int) (map[int64]map[string]string, map[int64]string) {
	t.Helper()
	st, brokers, cat := partitionedStack(t, "js", 1)
	var recs []*kgo.Record
	for i, v := range values {
		recs = append(recs, &kgo.Record{Topic: "js", Partition: 0, Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v)})
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	code, out, errs := floe(t, append([]string{"sink", "--brokers", brokers, "--topic", "js", "--table", "lake.js", "--value", "json",
		"--stop-at-end", "--flush-records", fmt.Sprint(flush)}, cat...)...)
	t.Logf("sink flush %d: exit %d\n%s%s", flush, code, out, errs)
	rows := map[int64]map[string]string{}
	for _, r := range floetest.Rows(t, openTable(t, st.Catalog(), "lake.js")) {
		rows[r.Offset] = r.Columns
	}
	dead := map[int64]string{}
	for _, r := range floetest.Rows(t, openTable(t, st.Catalog(), "lake.js_dlq")) {
		dead[r.Offset] = r.Columns["error"]
	}
	return rows, dead
}

// TestReviewS68HoldsJSONInferenceFlushIndependent: docs/typed-tables.md says
// floe does not guess a column's type so that "the table's types would
// depend on where flushes happened to fall". The same log sunk with one
// record per flush and with all records in one flush must give the same
// rows and the same dead letters.
func TestReviewS68HoldsJSONInferenceFlushIndependent(t *testing.T) {
	values := []string{
		`{"a":1,"b":"x","c":null,"d":[],"e":{"f":1}}`,
		`{"a":1.5,"b":2,"c":1,"d":[1],"e":{"f":2.5}}`,
		`{"a":2,"b":"y","c":"s","d":["z"],"e":{"f":3,"g":true}}`,
		`{"a":3000000000,"b":null,"c":2,"d":[1.5],"e":null}`,
		`{"a":1e3,"b":"z","c":2.5,"d":null,"e":{"f":"no"}}`,
	}
	r1, d1 := s68JSONTable(t, values, 1)
	r2, d2 := s68JSONTable(t, values, 1000)
	for o := range int64(len(values)) {
		a, _ := json.Marshal(r1[o])
		b, _ := json.Marshal(r2[o])
		if string(a) != string(b) || d1[o] != d2[o] {
			t.Errorf("offset %d: flush 1: row %s dead %q; one flush: row %s dead %q", o, a, d1[o], b, d2[o])
		}
	}
}

// TestReviewS68HoldsGroupKillMaintainDeadLetters: three floe sink --group
// processes of different flush settings (one with the KIP-848 protocol
// where the broker has it) on an 8-partition topic of JSON values, one in
// nine not JSON (dead letters), under continuous production with
// transactions, each member expiring the table's history at every commit
// (max 3 snapshots) and compacting every 500 ms; random members SIGKILLed
// and restarted. Then every record must be once in the table or its
// dead-letter table, and floe audit --deep --verify-content COMPLETE.
func TestReviewS68HoldsGroupKillMaintainDeadLetters(t *testing.T) {
	crashScenario(t)
	s68KillMembers(t, false)
}

// TestReviewS68HoldsPartitionsKillMaintainDeadLetters: the same with three
// sinks of disjoint --partitions (no group), each of two partitions, and
// a third of the other two.
func TestReviewS68HoldsPartitionsKillMaintainDeadLetters(t *testing.T) {
	crashScenario(t)
	s68KillMembers(t, true)
}

func s68KillMembers(t *testing.T, partitions bool) {
	const topic, name, parts = "gk", "lake.gk", 8
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir(),
		Kfake: []kfake.Opt{kfake.BrokerConfigs(map[string]string{"group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "1000", "group.consumer.heartbeat.interval.ms": "1000"})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, topic, parts, nil); err != nil {
		t.Fatal(err)
	}
	brokers := strings.Join(st.Brokers, ",")
	cat := []string{"--catalog", st.Catalog().Catalog, "--warehouse", st.Catalog().Warehouse}
	rng := rand.New(rand.NewPCG(68, 2))
	m := &s68Model{}
	var mu sync.Mutex
	n := 0
	gen := func(prng *rand.Rand, k int) []*kgo.Record {
		var out []*kgo.Record
		for range k {
			n++
			v := fmt.Appendf(nil, `{"n":%d,"s":"%s"}`, n, strings.Repeat("y", prng.IntN(50)))
			if prng.IntN(9) == 0 {
				v = fmt.Appendf(nil, `not json %d`, n)
			}
			out = append(out, &kgo.Record{Topic: topic, Partition: prng.Int32N(parts), Key: fmt.Appendf(nil, "k%d", n), Value: v})
		}
		return out
	}
	txn := 0
	produce := func(prng *rand.Rand) {
		mu.Lock()
		defer mu.Unlock()
		switch prng.IntN(6) {
		case 0:
			txn++
			m.produce(t, st.Brokers, gen(prng, 5+prng.IntN(10)), fmt.Sprintf("gtx%d", txn%3), prng.IntN(2) == 0)
		default:
			m.produce(t, st.Brokers, gen(prng, 5+prng.IntN(30)), "", false)
		}
	}
	produce(rng)
	mustFloe(t, append([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", name, "--value", "json", "--stop-at-end"}, cat...)...)
	mustFloe(t, append([]string{"maintain", "--table", name, "--set-max-snapshots", "3", "--set-min-snapshots", "1", "--set-max-snapshot-age", "1ms"}, cat...)...)
	member := func(i int) *s65Proc {
		args := append([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", name, "--value", "json",
			"--compact-interval", "500ms", "--compact-target-file-size", "20KiB"}, cat...)
		if partitions {
			args = append(args, "--partitions", []string{"0,1,2", "3,4,5", "6,7"}[i%3])
		} else {
			args = append(args, "--group", "gkg", "--group-protocol", s68Protocol, "--session-timeout", "6s", "--rebalance-timeout", "5s")
		}
		switch i % 3 {
		case 0:
			args = append(args, "--flush-interval", "100ms", "--flush-records", "7")
		case 1:
			args = append(args, "--flush-interval", "700ms")
		case 2:
			args = append(args, "--flush-interval", "300ms", "--flush-records", "40")
		}
		return s65Start(t, args...)
	}
	stop := s65Meanwhile(68, 3, 120, produce)
	members := []*s65Proc{member(0), member(1), member(2)}
	started := 3
	for range 8 {
		time.Sleep(time.Duration(800+rng.IntN(2500)) * time.Millisecond)
		i := rng.IntN(len(members))
		members[i].kill()
		t.Logf("killed member %d", i)
		if partitions {
			members[i] = member(i)
		} else {
			members[i] = member(started)
		}
		started++
	}
	stop()
	// Let the members catch up with the log.
	hw := map[int32]int64{}
	mu.Lock()
	for tp, offs := range m.log {
		for o := range offs {
			hw[tp.Partition] = max(hw[tp.Partition], o+1)
		}
	}
	mu.Unlock()
	deadline := time.Now().Add(45 * time.Second)
	for {
		tbl := openTable(t, st.Catalog(), name)
		l, err := tbl.Ledger()
		if err != nil {
			t.Fatal(err)
		}
		caught := true
		for p, h := range hw {
			if l.Next()[mapping.TopicPartition{Topic: topic, Partition: p}] < h {
				caught = false
			}
		}
		if caught {
			break
		}
		if time.Now().After(deadline) {
			for i, p := range members {
				t.Logf("member %d (pid %d):\n%s", i, p.cmd.Process.Pid, p.stderr.String())
			}
			s68DescribeGroup(t, st.Brokers, "gkg")
			t.Fatalf("members did not catch up: ledger %v, log %v", l.Next(), hw)
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(time.Second)
	for _, p := range members {
		p.kill()
	}
	tbl := openTable(t, st.Catalog(), name)
	rows := rowsByOffset(t, tbl)
	dead := map[mapping.TopicPartition]map[int64]int{}
	for _, r := range floetest.Rows(t, openTable(t, st.Catalog(), name+"_dlq")) {
		if dead[r.TP] == nil {
			dead[r.TP] = map[int64]int{}
		}
		dead[r.TP][r.Offset]++
	}
	bad := 0
	for tp, offs := range m.log {
		for o, what := range offs {
			got := rows[tp][o] + dead[tp][o]
			want := 0
			if what == s68Row {
				want = 1
			}
			if got != want {
				bad++
				if bad < 10 {
					t.Errorf("%s@%d: %d rows and %d dead letters, want %d", tp, o, rows[tp][o], dead[tp][o], want)
				}
			}
		}
	}
	code, out, errs := floe(t, append([]string{"audit", "--table", name, "--deep", "--verify-content", "--brokers", brokers}, cat...)...)
	if code != 0 || !strings.Contains(out, "verdict: COMPLETE") {
		t.Errorf("audit exit %d:\n%s\n%s", code, out, errs)
	}
	if bad > 0 {
		for i, p := range members {
			t.Logf("member %d:\n%s", i, p.stderr.String())
		}
	}
}

func s68DescribeGroup(t *testing.T, brokers []string, group string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	gs, err := adm.DescribeGroups(t.Context(), group)
	if err != nil {
		t.Logf("describe groups: %v", err)
	}
	for _, g := range gs {
		t.Logf("group %s state %s protocol %s err %v", g.Group, g.State, g.Protocol, g.Err)
		for _, m := range g.Members {
			a, _ := m.Assigned.AsConsumer()
			var ps []string
			if a != nil {
				for _, tp := range a.Topics {
					ps = append(ps, fmt.Sprint(tp.Topic, tp.Partitions))
				}
			}
			t.Logf("  member %s client %s host %s: %v", m.MemberID, m.ClientID, m.ClientHost, ps)
		}
	}
	cgs, err := adm.DescribeConsumerGroups(t.Context(), group)
	if err == nil {
		for _, g := range cgs {
			t.Logf("consumer group %s state %s err %v", g.Group, g.State, g.Err)
			for _, m := range g.Members {
				t.Logf("  member %s: assigned %v", m.MemberID, m.Assignment)
			}
		}
	}
}

// s68Protocol is the group protocol of TestReviewS68HoldsGroupKillMaintainDeadLetters's
// members: kfake's classic groups kept SIGKILLed members (and their
// partitions) past their session timeout in some runs.
var s68Protocol = "consumer"

// s68Stack848 is a local stack whose KIP-848 groups time a member out
// after 6 s (kfake's default 45 s).
func s68Stack848(t *testing.T, topic string, parts int32) (*localstack.Stack, string, []string) {
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir(),
		Kfake: []kfake.Opt{kfake.BrokerConfigs(map[string]string{"group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "1000", "group.consumer.heartbeat.interval.ms": "1000"})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, topic, parts, nil); err != nil {
		t.Fatal(err)
	}
	return st, strings.Join(st.Brokers, ","), []string{"--catalog", st.Catalog().Catalog, "--warehouse", st.Catalog().Warehouse}
}

// TestReviewS68HoldsGroupUpsertKill: three floe sink --group --mode upsert
// members (KIP-848) of different flush settings, compacting every 400 ms
// (deletes applied) and expiring at every commit, on a 6-partition topic
// of keyed updates and tombstones (each key in one partition) under
// production; random members SIGKILLed and restarted. After the members
// caught up, the table (iceberg-go scan) is the fold of the log and floe
// audit --deep --verify-content is COMPLETE.
func TestReviewS68HoldsGroupUpsertKill(t *testing.T) {
	crashScenario(t)
	const topic, name, parts = "gu", "lake.gu", 6
	st, brokers, cat := s68Stack848(t, topic, parts)
	rng := rand.New(rand.NewPCG(68, 5))
	var log s65Log
	log.produce(t, st.Brokers, topic, parts, 60, 100, rng)
	mustFloe(t, append([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", name, "--mode", "upsert", "--key", "string", "--stop-at-end"}, cat...)...)
	mustFloe(t, append([]string{"maintain", "--table", name, "--set-max-snapshots", "3", "--set-min-snapshots", "1", "--set-max-snapshot-age", "1ms"}, cat...)...)
	member := func(i int) *s65Proc {
		args := append([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", name, "--mode", "upsert", "--key", "string",
			"--group", "gug", "--group-protocol", "consumer", "--rebalance-timeout", "5s", "--compact-interval", "400ms"}, cat...)
		switch i % 3 {
		case 0:
			args = append(args, "--flush-interval", "100ms", "--flush-records", "9")
		case 1:
			args = append(args, "--flush-interval", "600ms")
		case 2:
			args = append(args, "--flush-interval", "250ms", "--flush-records", "30")
		}
		return s65Start(t, args...)
	}
	stop := s65Meanwhile(68, 6, 100, func(prng *rand.Rand) { log.produce(t, st.Brokers, topic, parts, 60, 5+prng.IntN(25), prng) })
	members := []*s65Proc{member(0), member(1), member(2)}
	started := 3
	for range 8 {
		time.Sleep(time.Duration(800+rng.IntN(2500)) * time.Millisecond)
		i := rng.IntN(len(members))
		members[i].kill()
		members[i] = member(started)
		started++
	}
	stop()
	log.mu.Lock()
	hw := map[int32]int64{}
	for p, recs := range log.parts {
		hw[p] = int64(len(recs))
	}
	log.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, next := s65State(t, st, name)
		caught := true
		for p, h := range hw {
			if next[p] < h {
				caught = false
			}
		}
		if caught {
			break
		}
		if time.Now().After(deadline) {
			for i, p := range members {
				t.Logf("member %d:\n%s", i, p.stderr.String())
			}
			t.Fatalf("members did not catch up: ledger %v, log %v", next, hw)
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(time.Second)
	for _, p := range members {
		p.kill()
	}
	got, next := s65State(t, st, name)
	if want := log.fold(nil); !maps.Equal(got, want) {
		t.Errorf("table at %v differs from the fold of the log:\n%s", next, s65Diff(got, want))
	}
	code, out, errs := floe(t, append([]string{"audit", "--table", name, "--deep", "--verify-content", "--brokers", brokers}, cat...)...)
	if code != 0 || !strings.Contains(out, "verdict: COMPLETE") {
		t.Errorf("audit exit %d:\n%s\n%s", code, out, errs)
	}
}

// TestReviewS68HoldsRegistryEvolutionKill: a --value registry table fed Avro
// records of four writer schemas interleaved at random (v1 {a int}, v2
// adds an optional b, v3 widens a to long, v4 makes a a string: a schema
// conflict, dead letters), on 3 partitions, the sink SIGKILLed at random
// moments (flushes of a few records, so that schema changes land in many
// commits), then run to the end. Every record must be once in the table
// (with its a and b) or, for v4's, in the dead-letter table, and the
// audit COMPLETE.
func TestReviewS68HoldsRegistryEvolutionKill(t *testing.T) {
	crashScenario(t)
	const topic, name, parts = "ev", "lake.ev", 3
	st, brokers, cat := partitionedStack(t, topic, parts)
	rng := rand.New(rand.NewPCG(68, 7))
	schemas := []string{
		`{"type":"record","name":"r","fields":[{"name":"a","type":"int"}]}`,
		`{"type":"record","name":"r","fields":[{"name":"a","type":"int"},{"name":"b","type":["null","string"],"default":null}]}`,
		`{"type":"record","name":"r","fields":[{"name":"a","type":"long"},{"name":"b","type":["null","string"],"default":null}]}`,
		`{"type":"record","name":"r","fields":[{"name":"a","type":"string"},{"name":"b","type":["null","string"],"default":null}]}`,
	}
	ids := make([]int, len(schemas))
	for i, s := range schemas {
		id, err := localstack.RegisterSchema(t.Context(), st.Registry, fmt.Sprintf("ev-s%d", i), sr.Schema{Schema: s})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	type want struct {
		a, b string
		dead bool
	}
	model := map[mapping.TopicPartition]map[int64]want{}
	var mu sync.Mutex
	n := 0
	produce := func(prng *rand.Rand, k int, first bool) {
		mu.Lock()
		defer mu.Unlock()
		var recs []*kgo.Record
		var ws []want
		for range k {
			n++
			v := prng.IntN(4)
			if first {
				v = 0
			}
			var body []byte
			var err error
			w := want{a: fmt.Sprint(n)}
			switch v {
			case 0:
				body, err = avro.Marshal(avro.MustParse(schemas[0]), map[string]any{"a": n})
			case 1, 2:
				b := fmt.Sprintf("b%d", n)
				if prng.IntN(3) == 0 {
					body, err = avro.Marshal(avro.MustParse(schemas[v]), map[string]any{"a": n, "b": nil})
				} else {
					body, err = avro.Marshal(avro.MustParse(schemas[v]), map[string]any{"a": n, "b": &b})
					w.b = b
				}
			case 3:
				b := fmt.Sprintf("b%d", n)
				body, err = avro.Marshal(avro.MustParse(schemas[3]), map[string]any{"a": fmt.Sprint(n), "b": &b})
				w.dead = true
			}
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, &kgo.Record{Topic: topic, Partition: prng.Int32N(parts), Key: fmt.Appendf(nil, "k%d", n), Value: localstack.WireFormat(ids[v], nil, body)})
			ws = append(ws, w)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			tp := mapping.TopicPartition{Topic: topic, Partition: r.Partition}
			if model[tp] == nil {
				model[tp] = map[int64]want{}
			}
			model[tp][r.Offset] = ws[i]
		}
	}
	produce(rng, 12, true)
	sink := append([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", name, "--value", "registry", "--schema-registry", st.Registry,
		"--flush-records", "5", "--flush-interval", "100ms", "--compact-interval", "700ms"}, cat...)
	for range 6 {
		p := s65Start(t, sink...)
		stop := s65Meanwhile(68, uint64(rng.IntN(1000)), 80, func(prng *rand.Rand) { produce(prng, 1+prng.IntN(8), false) })
		time.Sleep(time.Duration(500+rng.IntN(2000)) * time.Millisecond)
		p.kill()
		stop()
	}
	mustFloe(t, append(sink, "--stop-at-end")...)
	rows := map[mapping.TopicPartition]map[int64][]floetest.Row{}
	for _, r := range floetest.Rows(t, openTable(t, st.Catalog(), name)) {
		if rows[r.TP] == nil {
			rows[r.TP] = map[int64][]floetest.Row{}
		}
		rows[r.TP][r.Offset] = append(rows[r.TP][r.Offset], r)
	}
	dead := map[mapping.TopicPartition]map[int64]int{}
	for _, r := range floetest.Rows(t, openTable(t, st.Catalog(), name+"_dlq")) {
		if dead[r.TP] == nil {
			dead[r.TP] = map[int64]int{}
		}
		dead[r.TP][r.Offset]++
	}
	bad := 0
	for tp, offs := range model {
		for o, w := range offs {
			rs, d := rows[tp][o], dead[tp][o]
			ok := false
			if w.dead {
				ok = len(rs) == 0 && d == 1
			} else if len(rs) == 1 && d == 0 {
				b := rs[0].Columns["b"]
				if b == "(null)" {
					b = ""
				}
				ok = rs[0].Columns["a"] == w.a && b == w.b
			}
			if !ok {
				bad++
				if bad < 10 {
					t.Errorf("%s@%d want %+v: rows %+v, dead letters %d", tp, o, w, rs, d)
				}
			}
		}
	}
	code, out, errs := floe(t, append([]string{"audit", "--table", name, "--deep", "--verify-content", "--brokers", brokers, "--schema-registry", st.Registry}, cat...)...)
	if code != 0 || !strings.Contains(out, "verdict: COMPLETE") {
		t.Errorf("audit exit %d:\n%s\n%s", code, out, errs)
	}
}

// TestReviewS68HoldsUpsertTwoTopics: an upsert table keyed by the Kafka key fed
// by two topics whose keys overlap, sunk in several runs; the audit's fold
// check and the table must agree.
func TestReviewS68HoldsUpsertTwoTopics(t *testing.T) {
	st, brokers, cat := partitionedStack(t, "ua", 1)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "ub", 1, nil); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(68, 9))
	for round := range 4 {
		var recs []*kgo.Record
		for i := range 20 {
			topic := []string{"ua", "ub"}[rng.IntN(2)]
			r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", rng.IntN(5)), Timestamp: time.Unix(int64(1_700_000_000+round*100+i), 0)}
			if rng.IntN(5) != 0 {
				r.Value = fmt.Appendf(nil, "%s-%d-%d", topic, round, i)
			}
			recs = append(recs, r)
		}
		if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
			t.Fatal(err)
		}
		mustFloe(t, append([]string{"sink", "--brokers", brokers, "--topic", "ua", "--topic", "ub", "--table", "lake.u2", "--mode", "upsert", "--key", "string", "--stop-at-end"}, cat...)...)
	}
	got := stateOf(t, st, "lake.u2", "", "")
	t.Logf("table: %v", got)
	code, out, errs := floe(t, append([]string{"audit", "--table", "lake.u2", "--deep", "--verify-content", "--brokers", brokers}, cat...)...)
	t.Logf("audit exit %d:\n%s\n%s", code, out, errs)
	if code != 0 {
		t.Errorf("audit exit %d", code)
	}
}

// TestReviewS68TimestampOutsideNanos: Kafka record timestamps are
// milliseconds since the epoch, any int64; a producer may well write
// 0001-01-01 (near .NET's DateTime.MinValue, a common default) or
// 9999-12-31 ("end of time").
// franz-go's consumer turns them into a time.Time with time.Unix(0,
// millis*1e6), which overflows int64 nanoseconds outside 1677..2262, so
// the row got a wrong kafka_timestamp (year 0001 became a time in 2026),
// and floe audit --verify-content, reading the log through the same
// client, agreed with it: COMPLETE. Every row must hold its record's
// timestamp, in a table partitioned by hour(kafka_timestamp) too.
func TestReviewS68TimestampOutsideNanos(t *testing.T) {
	st, brokers, cat := partitionedStack(t, "ts", 2)
	tss := []time.Time{time.UnixMilli(-1), time.UnixMilli(0), time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1969, 12, 31, 23, 30, 0, 0, time.UTC),
		time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC), time.UnixMilli(1_700_000_000_000),
		time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC), time.Date(1600, 6, 1, 12, 0, 0, 0, time.UTC), time.Date(2300, 6, 1, 12, 0, 0, 0, time.UTC)}
	// franz-go's producer sends Timestamp.UnixNano()/1e6, which overflows
	// the same way: the batches are made here with the milliseconds.
	for i, ts := range tss {
		s68ProduceRaw(t, st.Brokers, "ts", int32(i%2), ts.UnixMilli(), fmt.Appendf(nil, "k%d", i), fmt.Appendf(nil, `{"i":%d}`, i))
	}
	for _, part := range []string{"", "hour(kafka_timestamp)"} {
		name := "lake.ts_plain"
		args := []string{"sink", "--brokers", brokers, "--topic", "ts", "--stop-at-end"}
		if part != "" {
			name = "lake.ts_hour"
			args = append(args, "--partition-by", part)
		}
		mustFloe(t, append(append(args, "--table", name), cat...)...)
		got := map[string]int64{}
		for _, r := range floetest.Rows(t, openTable(t, st.Catalog(), name)) {
			got[r.Key] = r.TS
		}
		for i, ts := range tss {
			if k := fmt.Sprintf("k%d", i); got[k] != ts.UnixMicro() {
				t.Errorf("%s: %s: kafka_timestamp %s (%d µs), want the record's %s (%d µs)", name, k,
					time.UnixMicro(got[k]).UTC().Format(time.RFC3339Nano), got[k], ts.Format(time.RFC3339Nano), ts.UnixMicro())
			}
		}
		code, out, errs := floe(t, append([]string{"audit", "--table", name, "--deep", "--verify-content", "--brokers", brokers}, cat...)...)
		if code != 0 {
			t.Errorf("audit %s exit %d:\n%s\n%s", name, code, out, errs)
		}
	}
}

// s68ProduceRaw produces one record with timestamp ms (milliseconds since
// the epoch, as Kafka has them) in a record batch made here.
func s68ProduceRaw(t *testing.T, brokers []string, topic string, partition int32, ms int64, key, value []byte) {
	t.Helper()
	rec := kmsg.Record{Key: key, Value: value}
	body := rec.AppendTo(nil)
	rec.Length = int32(len(body) - 1) // the zero Length took one byte
	b := kmsg.RecordBatch{Magic: 2, FirstTimestamp: ms, MaxTimestamp: ms, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: 1, Records: rec.AppendTo(nil)}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:12], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:21], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	td, err := kadm.NewClient(cl).ListTopics(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	rt.TopicID = td[topic].ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("produce to %s/%d: %v", topic, partition, err)
			}
		}
	}
}

// TestReviewS68HoldsJSONNumbersExact: schemaless JSON numbers a long column
// cannot hold exactly are dead letters, never another number in the row.
func TestReviewS68HoldsJSONNumbersExact(t *testing.T) {
	values := []string{
		`{"a":1,"f":1.5}`,
		`{"a":9223372036854775807,"f":0.1}`,
		`{"a":9223372036854775808,"f":1}`,
		`{"a":-9223372036854775809,"f":2}`,
		`{"a":1e3,"f":1e3}`,
		`{"a":1.0,"f":1e400}`,
		`{"a":12345678901234567890123,"f":-0}`,
		`{"a":1E2,"f":123456789012345678901234567890}`,
		`{"a":-0,"f":4.9e-324}`,
		`{"a":9007199254740993,"f":9007199254740993}`,
	}
	rows, dead := s68JSONTable(t, values, 1000)
	wantA := map[int64]string{0: "1", 1: "9223372036854775807", 4: "1000", 7: "100", 8: "0", 9: "9007199254740993"}
	for o := range int64(len(values)) {
		t.Logf("%d %s: row %v dead %q", o, values[o], rows[o], dead[o])
		if w, ok := wantA[o]; ok && rows[o]["a"] != w {
			t.Errorf("%s: a = %q, want %s", values[o], rows[o]["a"], w)
		}
		if _, ok := wantA[o]; !ok && (rows[o] != nil || dead[o] == "") {
			t.Errorf("%s: row %v, want a dead letter", values[o], rows[o])
		}
	}
}

// TestReviewS68HoldsRangeEndsBeforeMarker: a flush that ends right after a
// committed transaction's records, before its commit marker (the sink
// was then killed): the ledger's next offset is the marker's. The audit
// with content must find the table complete (the records are committed:
// the marker after the coverage says so), lag 1.
func TestReviewS68HoldsRangeEndsBeforeMarker(t *testing.T) {
	st, brokers, cat := partitionedStack(t, "tm", 1)
	var plain []*kgo.Record
	for i := range 3 {
		plain = append(plain, &kgo.Record{Topic: "tm", Key: fmt.Appendf(nil, "p%d", i), Value: []byte("v")})
	}
	if err := localstack.Produce(t.Context(), st.Brokers, plain); err != nil {
		t.Fatal(err)
	}
	var tx []*kgo.Record
	for i := range 5 {
		tx = append(tx, &kgo.Record{Topic: "tm", Key: fmt.Appendf(nil, "t%d", i), Value: []byte("w")})
	}
	if err := localstack.ProduceTxn(t.Context(), st.Brokers, "tmx", tx, true); err != nil {
		t.Fatal(err)
	}
	// 3 plain records at 0-2, the transaction's at 3-7, its marker at 8.
	p := s65Start(t, append([]string{"sink", "--brokers", brokers, "--topic", "tm", "--table", "lake.tm", "--flush-records", "8", "--flush-interval", "1h"}, cat...)...)
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, _ := floe(t, append([]string{"ledger", "--table", "lake.tm"}, cat...)...)
		if code == 0 && strings.Contains(out, "[0, 8)") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no commit of [0, 8):\n%s\n%s", out, p.stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	p.kill()
	t.Logf("sink:\n%s", p.stderr.String())
	out := mustFloe(t, append([]string{"ledger", "--table", "lake.tm"}, cat...)...)
	t.Logf("ledger:\n%s", out)
	code, out, errs := floe(t, append([]string{"audit", "--table", "lake.tm", "--deep", "--verify-content", "--brokers", brokers}, cat...)...)
	t.Logf("audit exit %d:\n%s\n%s", code, out, errs)
	if code != 0 {
		t.Errorf("audit exit %d", code)
	}
}

// s68CheckFiles checks floe files --json against the rows each file holds
// (fileOf: the file of each row): a file's topic, partition, offsets and
// group spans must hold every row of it.
func s68CheckFiles(t *testing.T, cat []string, name string, fileOf map[mapping.TopicPartition]map[int64]string) {
	t.Helper()
	out := mustFloe(t, append([]string{"files", "--table", name, "--json"}, cat...)...)
	var rep lookup.FilesResult
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("floe files --json: %v\n%s", err, out)
	}
	files := map[string]lookup.File{}
	for _, f := range rep.Files {
		files[f.Path] = f
	}
	bad := 0
	for tp, offs := range fileOf {
		for o, path := range offs {
			f, ok := files[path]
			var why string
			switch {
			case !ok:
				why = "not listed"
			case f.Topic != "" && f.Topic != tp.Topic:
				why = "listed with topic " + f.Topic
			case f.Partition != nil && *f.Partition != tp.Partition:
				why = fmt.Sprintf("listed with partition %d", *f.Partition)
			case f.MinOffset != nil && (o < *f.MinOffset || o > *f.MaxOffset):
				why = fmt.Sprintf("listed with offsets %d-%d", *f.MinOffset, *f.MaxOffset)
			case f.Group != nil && !slices.ContainsFunc(f.Group.Spans, func(sp lookup.Span) bool {
				return sp.Topic == tp.Topic && sp.Partition == tp.Partition && sp.Low <= o && o < sp.High
			}):
				why = fmt.Sprintf("in no span of its group %+v", f.Group.Spans)
			}
			if why != "" {
				bad++
				if bad < 6 {
					b, _ := json.Marshal(f)
					t.Errorf("floe files: row %s@%d of %s: %s (%s)", tp, o, path, why, b)
				}
			}
		}
	}
}

// TestReviewS68HoldsRegexNewAndRecreatedTopic: a live floe sink
// --topic-regex into one table picks up a topic created while it runs
// (records produced before it looked included); that topic deleted and
// created again with more records than before: its pipeline stops, the
// other topic's goes on, no record of the new incarnation reaches the
// table, and the audit against the brokers says topic-recreated.
func TestReviewS68HoldsRegexNewAndRecreatedTopic(t *testing.T) {
	crashScenario(t)
	st, brokers, cat := partitionedStack(t, "rx1", 2)
	c1, c2 := map[int32]int64{}, map[int32]int64{}
	produceRound(t, st.Brokers, "rx1", 2, 20, c1)
	sink := s65Start(t, append([]string{"sink", "--brokers", brokers, "--topic-regex", "rx.*", "--table", "lake.rx", "--topic-check", "1s", "--flush-interval", "200ms"}, cat...)...)
	waitNext := func(topic string, want map[int32]int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if code, _, _ := floe(t, append([]string{"ledger", "--table", "lake.rx"}, cat...)...); code != 0 {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			tbl := openTable(t, st.Catalog(), "lake.rx")
			l, err := tbl.Ledger()
			if err != nil {
				t.Fatal(err)
			}
			ok := true
			for p, n := range want {
				if l.Next()[mapping.TopicPartition{Topic: topic, Partition: p}] < n {
					ok = false
				}
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: ledger %v, want %v", topic, l.Next(), want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitNext("rx1", c1)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "rx2", 2, nil); err != nil {
		t.Fatal(err)
	}
	produceRound(t, st.Brokers, "rx2", 2, 30, c2)
	waitNext("rx2", c2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).DeleteTopics(t.Context(), "rx2"); err != nil {
		t.Fatal(err)
	}
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "rx2", 2, nil); err != nil {
		t.Fatal(err)
	}
	c2b := map[int32]int64{}
	produceRound(t, st.Brokers, "rx2", 2, 80, c2b)
	produceRound(t, st.Brokers, "rx1", 2, 20, c1)
	waitNext("rx1", c1)
	recreated := time.Now()
	for !strings.Contains(sink.stderr.String(), "level=ERROR") && time.Since(recreated) < 150*time.Second {
		time.Sleep(time.Second)
	}
	t.Logf("ERROR after %s", time.Since(recreated))
	stopping := time.Now()
	_ = sink.cmd.Process.Signal(syscall.SIGTERM)
	err = <-sink.done
	var said []string
	for _, l := range strings.Split(sink.stderr.String(), "\n") {
		if strings.Contains(l, "rx2") && !strings.Contains(l, "msg=committed") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") {
			said = append(said, l)
		}
	}
	t.Logf("sink: %v (stopped in %s)\n%s", err, time.Since(stopping), strings.Join(said, "\n"))
	if !strings.Contains(sink.stderr.String(), "level=ERROR") {
		t.Errorf("the sink said nothing of the recreated topic at ERROR")
	}
	rows := rowsByOffset(t, openTable(t, st.Catalog(), "lake.rx"))
	for p := range int32(2) {
		tp := mapping.TopicPartition{Topic: "rx2", Partition: p}
		for o := range rows[tp] {
			if o >= c2[p] {
				t.Errorf("%s@%d: a row of the recreated topic", tp, o)
			}
		}
		if int64(len(rows[tp])) != c2[p] {
			t.Errorf("%s: %d rows, want the first incarnation's %d", tp, len(rows[tp]), c2[p])
		}
	}
	code, out, errs := floe(t, append([]string{"audit", "--table", "lake.rx", "--deep", "--brokers", brokers}, cat...)...)
	t.Logf("audit exit %d:\n%s\n%s", code, out, errs)
	if code != 1 || !strings.Contains(out, "topic-recreated") && !strings.Contains(out, "recreated") {
		t.Errorf("audit exit %d, want the recreated topic reported", code)
	}
}
