package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// partitionStack starts a stack with topic ev: 3 partitions, n records
// keyed customer-0000 to customer-0059 (partition p holds the customers
// congruent to p mod 3), 61 hours apart from June 2023, so that the
// records span two years, about a dozen months, and a day and an hour
// each.
func partitionStack(t *testing.T, n int) (*localstack.Stack, []string) {
	t.Helper()
	st, loc := replayStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "ev", 3, nil); err != nil {
		t.Fatal(err)
	}
	produceEvents(t, st, 0, n)
	return st, loc
}

// produceEvents produces events from..to of partitionStack's sequence.
func produceEvents(t *testing.T, st *localstack.Stack, from, to int) {
	t.Helper()
	start := time.Date(2023, 6, 1, 0, 0, 0, 0, time.UTC)
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		customer := (i * 37) % 60
		recs = append(recs, &kgo.Record{Topic: "ev", Partition: int32(i % 3),
			Key:       fmt.Appendf(nil, "customer-%04d", customer),
			Value:     fmt.Appendf(nil, `{"n":%d}`, i),
			Timestamp: start.Add(time.Duration(i) * 61 * time.Hour)})
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
}

// fileRows is what a live data file holds, read from its rows.
type fileRows struct {
	spec int32
	// partition is the file's partition tuple in its manifest entry.
	partition string
	// kafka are the Kafka partitions of its rows, offsets their offsets.
	kafka   map[int32]bool
	offsets []int64
	addedBy int64
}

// readFiles reads every live data file of tbl's head and checks that each
// holds one Kafka partition and one Iceberg partition: the spec's
// transforms of its rows' source values give one tuple per file, and the
// tuples and the manifests' partition values correspond one to one.
func readFiles(t *testing.T, tbl *snapshot.Table) map[string]*fileRows {
	t.Helper()
	meta := tbl.Iceberg().Metadata()
	sc := tbl.Iceberg().Schema()
	scan := tbl.Iceberg().Scan(table.WithSnapshotID(tbl.Head().SnapshotID))
	tasks, err := scan.PlanFiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*fileRows{}
	tupleOf := map[string]string{} // computed tuple -> manifest tuple
	manifestOf := map[string]string{}
	added := addedBy(t, tbl)
	for _, task := range tasks {
		spec := meta.PartitionSpecByID(int(task.File.SpecID()))
		f := &fileRows{spec: task.File.SpecID(), partition: fmt.Sprint(task.File.Partition()), kafka: map[int32]bool{}, addedBy: added[task.File.FilePath()]}
		files[task.File.FilePath()] = f
		tuples := map[string]bool{}
		_, it, err := scan.ReadTasks(t.Context(), []table.FileScanTask{task})
		if err != nil {
			t.Fatal(err)
		}
		for b, err := range it {
			if err != nil {
				t.Fatal(err)
			}
			col := func(name string) arrow.Array { return b.Column(b.Schema().FieldIndices(name)[0]) }
			for i := range int(b.NumRows()) {
				f.kafka[col("kafka_partition").(*array.Int32).Value(i)] = true
				f.offsets = append(f.offsets, col("kafka_offset").(*array.Int64).Value(i))
				var tuple []string
				for _, pf := range spec.Fields() {
					name, _ := sc.FindColumnName(pf.SourceID())
					v := pf.Transform.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: literalAt(t, col(name), i)})
					tuple = append(tuple, fmt.Sprint(v.Val))
				}
				tuples[fmt.Sprint(f.spec, tuple)] = true
			}
			b.Release()
		}
		// An upsert table's file may hold several Kafka partitions, and
		// no live row once later commits deleted all of its keys.
		if upsert := tbl.Mode() == mapping.ModeUpsert; (!upsert && (len(f.kafka) != 1 || len(tuples) != 1)) || len(tuples) > 1 {
			t.Fatalf("file %s holds Kafka partitions %v and Iceberg partitions %v; want one of each", task.File.FilePath(), f.kafka, tuples)
		}
		for tuple := range tuples {
			manifest := fmt.Sprint(f.spec, f.partition)
			if (tupleOf[tuple] != "" && tupleOf[tuple] != manifest) || (manifestOf[manifest] != "" && manifestOf[manifest] != tuple) {
				t.Fatalf("file %s: rows in partition %s, manifest says %s; another file pairs them otherwise", task.File.FilePath(), tuple, manifest)
			}
			tupleOf[tuple], manifestOf[manifest] = manifest, tuple
		}
	}
	return files
}

// addedBy maps the live data files of tbl's head to the snapshots that
// added them, from the manifests.
func addedBy(t *testing.T, tbl *snapshot.Table) map[string]int64 {
	t.Helper()
	files, err := tbl.Files(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, f := range files {
		out[f.Path] = f.AddedBy
	}
	return out
}

// literalAt is row i of a column of the types these tests partition by as
// an Iceberg literal.
func literalAt(t *testing.T, col arrow.Array, i int) iceberg.Literal {
	t.Helper()
	switch c := col.(type) {
	case *array.Int32:
		return iceberg.NewLiteral(c.Value(i))
	case *array.Int64:
		return iceberg.NewLiteral(c.Value(i))
	case *array.String:
		return iceberg.NewLiteral(c.Value(i))
	case *array.LargeString:
		return iceberg.NewLiteral(c.Value(i))
	case *array.Binary:
		return iceberg.NewLiteral(slices.Clone(c.Value(i)))
	case *array.Timestamp:
		return iceberg.NewLiteral(iceberg.Timestamp(c.Value(i)))
	}
	t.Fatalf("no literal for %s", col.DataType())
	return nil
}

// TestPartitionByEachTransform: a table partitioned by each Iceberg
// transform of floe's columns holds, in every data file, one Kafka
// partition and one Iceberg partition, although a range's rows spread over
// several files; the audit is complete at the files and rows levels,
// floe where names the file that holds an offset, floe files lists the
// files and floe as-of --rows gives the rows below a cut.
func TestPartitionByEachTransform(t *testing.T) {
	const n = 120
	st, loc := partitionStack(t, n)
	brokers := strings.Join(st.Brokers, ",")
	for _, c := range []struct{ name, spec, field string }{
		{"identity", "identity(kafka_key)", "kafka_key"},
		{"bucket", "bucket(4, kafka_key)", "kafka_key_bucket_4"},
		{"truncate", "truncate(12, kafka_key)", "kafka_key_trunc_12"},
		{"hour", "hour(kafka_timestamp)", "kafka_timestamp_hour"},
		{"day", "day(kafka_timestamp)", "kafka_timestamp_day"},
		{"month", "month(kafka_timestamp)", "kafka_timestamp_month"},
		{"year", "year(kafka_timestamp)", "kafka_timestamp_year"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "lake.p_" + c.name
			mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "ev", "--table", name, "--stop-at-end",
				"--flush-records", "40", "--partition-by", c.spec}, loc...)...)
			tbl := openFloeTable(t, st, name)
			spec := tbl.Iceberg().Spec()
			if tbl.PartitionSpec() != c.spec || spec.NumFields() != 1 || spec.Field(0).Name != c.field {
				t.Fatalf("spec %s (%v), want %s as field %s", tbl.PartitionSpec(), spec, c.spec, c.field)
			}
			files := readFiles(t, tbl)

			// A range's rows spread over several files.
			l, err := tbl.Ledger()
			if err != nil {
				t.Fatal(err)
			}
			ranges := 0
			for _, cm := range l.Commits {
				for _, r := range cm.Ranges {
					if r.Records > 0 {
						ranges++
					}
				}
			}
			if len(files) <= ranges {
				t.Fatalf("%d files for %d ranges: no range was cut by the partition spec", len(files), ranges)
			}

			var rep struct {
				Complete bool     `json:"complete"`
				Levels   []string `json:"levels"`
				Files    *int     `json:"files"`
				RowsRead int64    `json:"rows_read"`
			}
			js := mustFloe(t, append([]string{"audit", "--table", name, "--deep", "--json"}, loc[:2]...)...)
			if err := json.Unmarshal([]byte(js), &rep); err != nil || !rep.Complete || !slices.Contains(rep.Levels, "files") ||
				!slices.Contains(rep.Levels, "rows") || rep.Files == nil || *rep.Files != len(files) || rep.RowsRead != n {
				t.Fatalf("audit --deep: %v\n%s", err, js)
			}

			// where: the file it names holds the offset.
			for _, pos := range [][2]int64{{0, 0}, {1, 17}, {2, n/3 - 1}} {
				var w lookup.WhereResult
				js := mustFloe(t, append([]string{"where", "--table", name, "-t", "ev", "--partition", fmt.Sprint(pos[0]), "--offset", fmt.Sprint(pos[1]), "--json"}, loc[:2]...)...)
				if err := json.Unmarshal([]byte(js), &w); err != nil || w.Status != lookup.StatusRow {
					t.Fatalf("where %v: %v\n%s", pos, err, js)
				}
				f := files[w.File]
				if f == nil || !f.kafka[int32(pos[0])] || !slices.Contains(f.offsets, pos[1]) || w.SnapshotID == nil || *w.SnapshotID != f.addedBy {
					t.Fatalf("where %v names file %s (%+v), which does not hold it", pos, w.File, f)
				}
			}

			var fl lookup.FilesResult
			if err := json.Unmarshal([]byte(mustFloe(t, append([]string{"files", "--table", name, "--json"}, loc[:2]...)...)), &fl); err != nil {
				t.Fatal(err)
			}
			if len(fl.Files) != len(files) || fl.Records != n {
				t.Fatalf("floe files lists %d files of %d rows; the table has %d files of %d", len(fl.Files), fl.Records, len(files), n)
			}
			for _, lf := range fl.Files {
				f := files[lf.Path]
				if f == nil || lf.Partition == nil || !f.kafka[*lf.Partition] || *lf.MinOffset != slices.Min(f.offsets) || *lf.MaxOffset != slices.Max(f.offsets) {
					t.Fatalf("floe files lists %+v; the file holds %+v", lf, f)
				}
			}

			out := filepath.Join(t.TempDir(), "rows.jsonl")
			mustFloe(t, append([]string{"as-of", "--table", name, "--offsets", "ev/0=10,ev/1=10,ev/2=10", "--rows", "-o", out}, loc[:2]...)...)
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			for _, line := range lines {
				var r struct {
					Offset int64 `json:"offset"`
				}
				if err := json.Unmarshal([]byte(line), &r); err != nil || r.Offset >= 10 {
					t.Fatalf("as-of row %s: %v", line, err)
				}
			}
			if len(lines) != 30 {
				t.Fatalf("as-of --rows below offset 10 of 3 partitions: %d rows", len(lines))
			}
		})
	}
}

// TestPartitionByBadSpecs: a spec floe cannot apply exits 2 with one line
// naming the part at fault, before a table is created or changed.
func TestPartitionByBadSpecs(t *testing.T) {
	st, loc := partitionStack(t, 30)
	sink := func(table string, spec ...string) []string {
		args := append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "ev", "--table", table, "--stop-at-end"}, loc...)
		if len(spec) > 0 {
			args = append(args, "--partition-by", spec[0])
		}
		return args
	}
	mustFloe(t, sink("lake.existing", "hour(kafka_timestamp)")...)
	loc0 := openFloeTable(t, st, "lake.existing").Iceberg().MetadataLocation()
	for spec, want := range map[string]string{
		"day(placed_at)":          `--partition-by "day(placed_at)" on table lake.%s: day(placed_at): floe writes no column placed_at into a table of raw values; its columns are kafka_topic,`,
		"hourly(kafka_timestamp)": `invalid argument "hourly(kafka_timestamp)" for "--partition-by" flag: hourly(kafka_timestamp): unknown transform "hourly"`,
		"bucket(kafka_key)":       `bucket(kafka_key): bucket takes the number of buckets and a column: bucket(N, COLUMN), e.g. bucket(16, kafka_key)`,
		"hour(kafka_offset)":      `hour(kafka_offset): column kafka_offset is a long, which hour does not take (it takes timestamp or timestamptz)`,
		"identity(kafka_headers)": `Iceberg partitions only by primitive columns`,
	} {
		for _, table := range []string{"lake.fresh", "lake.existing"} {
			code, out, errs := floe(t, sink(table, spec)...)
			w := want
			if strings.Contains(w, "%s") {
				w = fmt.Sprintf(w, strings.TrimPrefix(table, "lake."))
				if table == "lake.fresh" {
					w = strings.Replace(w, " on table lake.fresh", "", 1)
				}
			}
			if code != exitError || !strings.Contains(errs, w) || strings.Count(strings.TrimSpace(errs), "\n") != 0 || out != "" {
				t.Errorf("%s on %s: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", spec, table, code, out, errs, w)
			}
		}
	}
	if replayTableExists(t, st, "lake.fresh") {
		t.Error("a refused spec created its table")
	}
	if got := openFloeTable(t, st, "lake.existing").Iceberg().MetadataLocation(); got != loc0 {
		t.Error("a refused spec changed the existing table")
	}
	t.Setenv("FLOE_PARTITION_BY", "day(")
	if code, _, errs := floe(t, sink("lake.fresh")...); code != exitError || !strings.Contains(errs, `FLOE_PARTITION_BY: invalid argument "day(" for "--partition-by" flag: a ( is not closed`) {
		t.Errorf("FLOE_PARTITION_BY: exit %d, %q", code, errs)
	}
}

// TestPartitionSpecEvolves: a sink asked for another spec evolves the
// table's: files written before keep theirs, the audit and where answer
// across both; a sink without --partition-by keeps the spec.
func TestPartitionSpecEvolves(t *testing.T) {
	st, loc := partitionStack(t, 60)
	sink := append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "ev", "--table", "lake.ev", "--stop-at-end", "--flush-records", "25"}, loc...)
	mustFloe(t, append(sink, "--partition-by", "hour(kafka_timestamp)")...)
	produceEvents(t, st, 60, 120)
	code, _, errs := floe(t, append(sink, "--partition-by", "day(kafka_timestamp), identity(kafka_partition)")...)
	// A warning: a --partition-by (or a config file's) meant for another
	// table changes this one's layout (from a new-user run).
	if code != exitOK || !strings.Contains(errs, `level=WARN msg="partition spec changed: files written before keep the spec they were written with"`) ||
		!strings.Contains(errs, "from=hour(kafka_timestamp)") {
		t.Fatalf("evolving sink: exit %d\n%s", code, errs)
	}
	tbl := openFloeTable(t, st, "lake.ev")
	if tbl.PartitionSpec() != "day(kafka_timestamp), identity(kafka_partition)" {
		t.Fatalf("spec %s", tbl.PartitionSpec())
	}
	specs := map[int32]map[int64]bool{}
	for _, f := range readFiles(t, tbl) {
		if specs[f.spec] == nil {
			specs[f.spec] = map[int64]bool{}
		}
		for _, o := range f.offsets {
			specs[f.spec][o] = true
		}
	}
	// Offsets 0-19 of each partition have the old spec, 20-39 the new.
	if len(specs) != 2 || !specs[0][19] || specs[0][20] || !specs[1][20] || specs[1][19] {
		t.Fatalf("offsets per spec: %v", specs)
	}
	js := mustFloe(t, append([]string{"audit", "--table", "lake.ev", "--deep", "--json"}, loc[:2]...)...)
	if !strings.Contains(js, `"complete": true`) {
		t.Fatalf("audit:\n%s", js)
	}
	for _, off := range []string{"3", "33"} {
		if out := mustFloe(t, append([]string{"where", "--table", "lake.ev", "-t", "ev", "--partition", "1", "--offset", off}, loc[:2]...)...); !strings.Contains(out, ": row\n") {
			t.Fatalf("where offset %s:\n%s", off, out)
		}
	}

	produceEvents(t, st, 120, 150)
	t.Setenv("FLOE_PARTITION_BY", "day(kafka_timestamp), identity(kafka_partition)")
	mustFloe(t, sink...)
	os.Unsetenv("FLOE_PARTITION_BY")
	produceEvents(t, st, 150, 180)
	mustFloe(t, sink...)
	after := openFloeTable(t, st, "lake.ev")
	if after.PartitionSpec() != tbl.PartitionSpec() || len(after.Iceberg().Metadata().PartitionSpecs()) != 2 {
		t.Fatalf("spec after sinks without a change: %s (%d specs)", after.PartitionSpec(), len(after.Iceberg().Metadata().PartitionSpecs()))
	}
	for path, f := range readFiles(t, after) {
		if slices.Max(f.offsets) >= 40 && f.spec != 1 {
			t.Fatalf("file %s of offsets %v has spec %d", path, f.offsets, f.spec)
		}
	}
	// Compaction keeps the older spec's small files as they are, and says
	// so, where it said the ledger did not place them (from a new-user run).
	out := mustFloe(t, append([]string{"maintain", "--table", "lake.ev", "--compact", "--dry-run"}, loc[:2]...)...)
	if !strings.Contains(out, "of an older partition spec kept as they are") || strings.Contains(out, "the ledger does not place them") {
		t.Fatalf("maintain --compact --dry-run after the spec changed:\n%s", out)
	}
}

// TestPartitionedReplayFoldAndMaintain: a replay into a new table gets its
// --partition-by; a replay onto a branch has its table's spec and refuses
// another; a partitioned state table folds and audits; floe maintain
// expires and removes orphans in partition folders without touching live
// files.
func TestPartitionedReplayFoldAndMaintain(t *testing.T) {
	st, loc := partitionStack(t, 90)
	brokers := strings.Join(st.Brokers, ",")
	replay := func(args ...string) (int, string, string) {
		return floe(t, append(append([]string{"replay", "-b", brokers, "-t", "ev", "--flush-records", "20"}, args...), loc...)...)
	}
	complete := func(table string) {
		t.Helper()
		js := mustFloe(t, append([]string{"audit", "--table", table, "--deep", "--json"}, loc[:2]...)...)
		if !strings.Contains(js, `"complete": true`) {
			t.Fatalf("audit of %s:\n%s", table, js)
		}
	}
	if code, out, errs := replay("--table", "lake.rebuilt", "--partition-by", "bucket(4, kafka_key)"); code != exitOK {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	rebuilt := openFloeTable(t, st, "lake.rebuilt")
	if rebuilt.PartitionSpec() != "bucket(4, kafka_key)" {
		t.Fatalf("replayed table's spec: %s", rebuilt.PartitionSpec())
	}
	readFiles(t, rebuilt)
	complete("lake.rebuilt")

	code, _, errs := replay("--table", "lake.rebuilt", "--branch", "again", "--partition-by", "day(kafka_timestamp)")
	if code != exitError || !strings.Contains(errs, "table lake.rebuilt is partitioned by bucket(4, kafka_key), and its branches share its partition spec") ||
		!strings.Contains(errs, "omit --partition-by") {
		t.Fatalf("branch with another spec: exit %d, %q", code, errs)
	}
	if openFloeTable(t, st, "lake.rebuilt").HasBranch("again") {
		t.Fatal("the refused replay created its branch")
	}
	if code, out, errs := replay("--table", "lake.rebuilt", "--branch", "again", "--partition-by", "bucket(4, kafka_key)"); code != exitOK {
		t.Fatalf("branch with the table's spec: exit %d\n%s\n%s", code, out, errs)
	}
	mustFloe(t, append([]string{"audit", "--table", "lake.rebuilt", "--branch", "again", "--deep"}, loc[:2]...)...)

	// A state table: the latest value per key, folded into bucket files.
	if code, out, errs := replay("--table", "lake.state", "--fold", "latest", "--partition-by", "bucket(4, kafka_key)"); code != exitOK {
		t.Fatalf("fold: exit %d\n%s\n%s", code, out, errs)
	}
	state := openFloeTable(t, st, "lake.state")
	keys := 0
	for _, f := range readFiles(t, state) {
		keys += len(f.offsets)
	}
	if keys != 60 {
		t.Fatalf("state table holds %d rows, want one per key (60)", keys)
	}
	complete("lake.state")

	// maintain: expire every snapshot but the head, and delete an old
	// orphan in a partition folder.
	live := readFiles(t, rebuilt)
	var dir string
	for path := range live {
		dir = filepath.Dir(strings.TrimPrefix(path, "file://"))
		break
	}
	orphan := filepath.Join(dir, "crashed-00000.parquet")
	if err := os.WriteFile(orphan, []byte("PAR1"), 0o644); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-3 * time.Hour)
	if err := os.Chtimes(orphan, past, past); err != nil {
		t.Fatal(err)
	}
	out := mustFloe(t, append([]string{"maintain", "--table", "lake.rebuilt", "--retain-last", "1", "--remove-orphans"}, loc[:2]...)...)
	if !strings.Contains(out, "orphan data files deleted: 1") {
		t.Fatalf("maintain:\n%s", out)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("orphan kept: %v", err)
	}
	after := readFiles(t, openFloeTable(t, st, "lake.rebuilt"))
	if len(after) != len(live) {
		t.Fatalf("%d live files after maintain, %d before", len(after), len(live))
	}
	complete("lake.rebuilt")
}

// TestPartitionByInConfigFile: partition-by in a config file applies to
// every pipeline but those with one of their own.
func TestPartitionByInConfigFile(t *testing.T) {
	st, _ := partitionStack(t, 30)
	cat := st.Catalog()
	conf := filepath.Join(t.TempDir(), "floe.yaml")
	write := func(own string) {
		writeFile(t, conf, fmt.Sprintf(`
brokers: [%s]
catalog: %q
warehouse: %q
stop-at-end: true
partition-by: month(kafka_timestamp)
pipelines:
  - topic: ev
    table: lake.a
  - topic: ev
    table: lake.b
    partition-by: %s
`, st.Brokers[0], cat.Catalog, cat.Warehouse, own))
	}
	write("bucket(2, kafka_key)")
	mustFloe(t, "sink", "--config", conf)
	for table, want := range map[string]string{"lake.a": "month(kafka_timestamp)", "lake.b": "bucket(2, kafka_key)"} {
		if got := openFloeTable(t, st, table).PartitionSpec(); got != want {
			t.Errorf("%s: spec %s, want %s", table, got, want)
		}
	}
	write("'bucket(2)'")
	code, _, errs := floe(t, "sink", "--config", conf)
	if code != exitError || !strings.Contains(errs, `: pipelines[1] (line 10, ev -> lake.b): partition-by: "bucket(2)": bucket(2): bucket takes the number of buckets and a column`) {
		t.Fatalf("bad pipeline partition-by: exit %d, %q", code, errs)
	}
}

// TestPartitionByValueColumns: a typed table (--value json) partitioned by
// value columns: each field is added to the spec by the commit that adds
// its column, files stay pure, the audit is complete; a column that
// appears with a type its transform does not take stops the sink, and a
// spec without that field lets it go on.
func TestPartitionByValueColumns(t *testing.T) {
	st, loc := replayStack(t)
	brokers := strings.Join(st.Brokers, ",")
	for _, topic := range []string{"ty", "bad"} {
		if err := localstack.CreateTopic(t.Context(), st.Brokers, topic, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	produce := func(topic string, from, to int, value func(i int) string) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: fmt.Appendf(nil, "k%d", i%7), Value: []byte(value(i))})
		}
		if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
			t.Fatal(err)
		}
	}
	produce("ty", 0, 40, func(i int) string { return fmt.Sprintf(`{"customer":"c%d","n":%d}`, i%9, i) })
	sink := append([]string{"sink", "-b", brokers, "-t", "ty", "--table", "lake.ty", "--stop-at-end", "--flush-records", "15", "--value", "json"}, loc...)
	spec := "identity(kafka_partition), bucket(4, customer), truncate(2, region)"
	code, _, errs := floe(t, append(sink, "--partition-by", spec)...)
	if code != exitOK || !strings.Contains(errs, "partition fields wait for their columns") {
		t.Fatalf("sink: exit %d\n%s", code, errs)
	}
	tbl := openFloeTable(t, st, "lake.ty")
	if got := tbl.PartitionSpec(); got != "identity(kafka_partition), bucket(4, customer)" {
		t.Fatalf("spec after the first records: %s", got)
	}
	readFiles(t, tbl)

	regions := []string{"eu-west", "us-east", "ap-south"}
	produce("ty", 40, 80, func(i int) string { return fmt.Sprintf(`{"customer":"c%d","n":%d,"region":%q}`, i%9, i, regions[i%3]) })
	mustFloe(t, sink...)
	tbl = openFloeTable(t, st, "lake.ty")
	if got := tbl.PartitionSpec(); got != spec {
		t.Fatalf("spec after region appeared: %s", got)
	}
	files := readFiles(t, tbl)
	// region's field arrived with its column: no file of a record with a
	// region was written under a spec without the field.
	for _, f := range files {
		if slices.Max(f.offsets) >= 20 && f.spec != int32(tbl.Iceberg().Metadata().DefaultPartitionSpec()) {
			t.Fatalf("file of offsets %v has spec %d, not the one with region", f.offsets, f.spec)
		}
	}
	js := mustFloe(t, append([]string{"audit", "--table", "lake.ty", "--deep", "--json"}, loc[:2]...)...)
	if !strings.Contains(js, `"complete": true`) {
		t.Fatalf("audit:\n%s", js)
	}
	if out := mustFloe(t, append([]string{"where", "--table", "lake.ty", "-t", "ty", "--partition", "1", "--offset", "30"}, loc[:2]...)...); !strings.Contains(out, ": row\n") {
		t.Fatalf("where:\n%s", out)
	}

	// placed_at arrives as a string: day() cannot take it.
	produce("bad", 0, 10, func(i int) string { return fmt.Sprintf(`{"placed_at":"2024-05-0%dT10:00:00Z"}`, 1+i%5) })
	bad := append([]string{"sink", "-b", brokers, "-t", "bad", "--table", "lake.bad", "--stop-at-end", "--value", "json"}, loc...)
	code, out, errs := floe(t, append(bad, "--partition-by", "day(placed_at)")...)
	if code != exitError || !strings.Contains(errs, `--partition-by "day(placed_at)" on table lake.bad: day(placed_at): the column appeared, but column placed_at is a string, which day does not take`) {
		t.Fatalf("wrong type: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if l, err := openFloeTable(t, st, "lake.bad").Ledger(); err != nil || l.Next()[mapping.TopicPartition{Topic: "bad", Partition: 0}] != 0 {
		t.Fatalf("the refused flush committed: %v %v", l, err)
	}
	mustFloe(t, append(bad, "--partition-by", "identity(kafka_partition)")...)
	fixed := openFloeTable(t, st, "lake.bad")
	if got := fixed.PartitionSpec(); got != "identity(kafka_partition)" {
		t.Fatalf("spec after the fix: %s", got)
	}
	if js := mustFloe(t, append([]string{"audit", "--table", "lake.bad", "--deep", "--json"}, loc[:2]...)...); !strings.Contains(js, `"complete": true`) {
		t.Fatalf("audit after the fix:\n%s", js)
	}
}

// TestPartitionByHighCardinalityWarns: a spec that makes a partition per
// distinct value of a column with many (identity(value) on 300 distinct
// values) writes a file per row; the sink warns once, naming the spec and
// what keeps files large (it wrote 298 files for 300 rows without a word).
// A spec of few values does not warn.
func TestPartitionByHighCardinalityWarns(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	code, out, errs := floe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.byvalue", "--stop-at-end",
		"--partition-by", "identity(value)"}, loc...)...)
	want := regexp.MustCompile(`a commit wrote \d{3} files for 300 rows: the partition spec identity\(value\) makes a partition per distinct value of a column that has many; ` +
		`a transform with fewer values, such as bucket\(16, COLUMN\) or day\(COLUMN\), keeps files large`)
	if code != exitOK || !strings.Contains(out, "300 rows") || len(want.FindAllString(errs, -1)) != 1 {
		t.Errorf("identity(value): exit %d\n%s\n%s", code, out, errs)
	}
	code, _, errs = floe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.byday", "--stop-at-end",
		"--partition-by", "day(kafka_timestamp)"}, loc...)...)
	if code != exitOK || strings.Contains(errs, "files for") {
		t.Errorf("day(kafka_timestamp): exit %d\n%s", code, errs)
	}
}

// TestPartitionByMisspeltColumnWarns (from a new user's run): a
// --partition-by naming eventtime, where the values' field is event_time,
// left the table unpartitioned for good, said at INFO on every later run
// without the flag. Once the table has a column of a close name, it is a
// warning naming it.
func TestPartitionByMisspeltColumnWarns(t *testing.T) {
	st, loc := replayStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "ev", 1, nil); err != nil {
		t.Fatal(err)
	}
	produce := func() {
		t.Helper()
		recs := []*kgo.Record{{Topic: "ev", Value: []byte(`{"event_time":"2026-12-01T10:00:00Z","n":1}`)}}
		if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
			t.Fatal(err)
		}
	}
	sink := append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "ev", "--table", "lake.ev", "--stop-at-end"}, loc...)
	produce()
	mustFloe(t, append(sink, "--value", "json", "--partition-by", "day(eventtime)")...)
	// A run with the flag is refused with the column meant; one without
	// it (the table keeps its spec) only logged at INFO.
	produce()
	code, _, errs := floe(t, sink...)
	if code != exitOK || !strings.Contains(errs, "level=WARN") || !strings.Contains(errs, "did_you_mean=\"event_time for eventtime\"") {
		t.Errorf("a second run of a misspelt --partition-by: exit %d\n%s\nwant a warning naming event_time", code, errs)
	}
}

// TestPartitionByWaitingFieldWarnsAtEnd: a typed table's field whose column
// no record of a run had (a misspelt --partition-by) still waits, but the
// run's summary and --json say so with a warning, and the log at WARN;
// a run whose records have the column adds the field and warns of
// nothing (a new user's report: exit 0 and an INFO line only).
func TestPartitionByWaitingFieldWarnsAtEnd(t *testing.T) {
	st, loc := replayStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "clicks", 1, nil); err != nil {
		t.Fatal(err)
	}
	produce := func(from, to int, value string) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: "clicks", Value: fmt.Appendf(nil, value, i)})
		}
		if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 10, `{"user":"u%d"}`)
	sink := append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "clicks", "--table", "lake.clicks", "--stop-at-end", "--value", "json"}, loc...)
	code, out, errs := floe(t, append(sink, "--partition-by", "identity(nope), identity(usr)")...)
	for _, want := range []string{
		"warning: partition field identity(nope) waits for column nope, which no record of this run had (a misspelt name?): the table is not partitioned by it; --partition-by none removes the table's spec, or --partition-by with the right spec replaces it\n",
		"warning: partition field identity(usr) waits for column usr, which no record of this run had (did you mean user?)",
	} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("sink: exit %d, want %q\nstdout:\n%s\nstderr:\n%s", code, want, out, errs)
		}
	}
	if !strings.Contains(errs, `level=WARN msg="partition field identity(nope) waits for column nope`) {
		t.Fatalf("no WARN in the log:\n%s", errs)
	}

	// A later run without --partition-by keeps the waiting fields, and
	// says so again, in --json too.
	produce(10, 20, `{"user":"u%d"}`)
	code, out, errs = floe(t, append(sink, "--json")...)
	var r runReport
	if code != exitOK || json.Unmarshal([]byte(out), &r) != nil || len(r.Warnings) != 2 || !strings.Contains(r.Warnings[0], "identity(nope) waits for column nope, which no record of this run had") {
		t.Fatalf("json sink: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}

	// A run that read nothing warns of nothing: its records said nothing.
	if out := mustFloe(t, sink...); strings.Contains(out, "warning:") {
		t.Fatalf("a run of no records warned:\n%s", out)
	}
	// Records that have the column add its field, and no warning is left.
	produce(20, 30, `{"user":"u%d","nope":"x","usr":"y"}`)
	if out := mustFloe(t, sink...); strings.Contains(out, "warning:") {
		t.Fatalf("a run whose records had the columns warned:\n%s", out)
	}
	if got := openFloeTable(t, st, "lake.clicks").PartitionSpec(); got != "identity(nope), identity(usr)" {
		t.Fatalf("spec %s", got)
	}
}
