package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
		if len(f.kafka) != 1 || len(tuples) != 1 {
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

// literalAt is row i of a column of floe's metadata columns as an Iceberg
// literal.
func literalAt(t *testing.T, col arrow.Array, i int) iceberg.Literal {
	t.Helper()
	switch c := col.(type) {
	case *array.Int32:
		return iceberg.NewLiteral(c.Value(i))
	case *array.Int64:
		return iceberg.NewLiteral(c.Value(i))
	case *array.String:
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
