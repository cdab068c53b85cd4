package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/statuspage"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

func newStatusCmd() *cobra.Command {
	var (
		f      tableFlags
		b      brokerFlags
		topics []string
		asJSON bool
		format string
		serve  string
	)
	cmd := &cobra.Command{
		Use:   "status [--table NAMESPACE.TABLE] [--brokers HOST:PORT] [--json | --serve ADDR]",
		Short: "Show per partition the broker's end offset, the table's next offset, the lag and the last commit",
		Long: `For every partition of the topics in the table's ledger (and of --topic), show the broker's log
start and end offset (the last stable offset, which is where a read_committed consumer ends),
the table's next offset from its ledger, the lag (retained offsets up to the end offset that the
table does not have yet), the offsets lost to retention before they were sunk (from the table's
next offset up to the log start, unless the broker shows they held only aborted records, as the
sink judges them; "-" when none) and when a commit last advanced the partition. Without
--brokers only the table's side is shown: the brokers' columns say "?" (as where the brokers
failed, or do not have the topic). The table's current metadata location is printed too: other
engines (DuckDB's iceberg_scan, Spark) can read it directly.

--serve ADDR serves the same numbers as a live page on http://ADDR/ (and as JSON on
/status.json) until interrupted, for a table without a running sink: the page reloads the table's
metadata and asks the brokers at most once a second, and refreshes itself every two seconds. A
running floe sink serves this page itself with --metrics-addr.

Without --table it lists the catalog's tables: what each is (an append, upsert or state table
floe writes, the dead-letter table of one, or another writer's table), its rows and when it was
last committed to.`,
		Example: `  floe status                                  # the catalog's tables
  floe status --table lake.orders -b localhost:9092
  floe status --config floe.yaml --table lake.orders --json
  floe status --table lake.orders -b localhost:9092 --serve 127.0.0.1:8080`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			switch format {
			case "text":
			case "json":
				asJSON = true
			default:
				return fmt.Errorf("--format %q: want text or json (or use --json)", format)
			}
			// Said at run time too: a script's flag is read in no --help.
			if cmd.Flags().Changed("format") {
				slog.Warn(fmt.Sprintf("--format is deprecated and will be removed: use --json (text is the default), not --format %s", format))
			}
			if serve != "" && asJSON {
				return fmt.Errorf("--serve serves a page and --json prints a document: choose one (the page's JSON is on /status.json)")
			}
			if f.table == "" && serve != "" {
				// It said only "missing --table", beside a --help that
				// lists tables without one (a user's run).
				return errors.New("missing --table NAMESPACE.TABLE: --serve serves the page of one table (floe status without --serve and --table lists the catalog's tables)")
			}
			if f.table == "" && serve == "" {
				cat, err := f.openExisting(ctx)
				if err != nil {
					return err
				}
				return listTables(ctx, cmd.OutOrStdout(), cat, asJSON)
			}
			tbl, err := f.open(ctx, snapshot.OpenOptions{})
			if err != nil {
				return err
			}
			broker, brokerErr := b.dial(ctx)
			// A broker address or security setting that cannot work is a
			// usage error, not brokers that failed: no table side first.
			_, badSetting := errors.AsType[*connector.ConfigError](brokerErr)
			_, badFile := errors.AsType[settingsError](brokerErr)
			if brokerErr != nil && (serve != "" || badSetting || badFile) {
				return brokerErr
			}
			if broker != nil {
				defer broker.Close()
			}
			if serve != "" {
				return serveStatus(ctx, cmd.OutOrStdout(), serve, tbl, broker, topics)
			}
			var st lookup.TableStatus
			if brokerErr == nil {
				st, err = lookup.Status(ctx, tbl, broker, topics)
				if err != nil && broker != nil {
					brokerErr = err
				}
			}
			if brokerErr != nil {
				// The table's side is worth showing when the brokers fail.
				if st, err = lookup.Status(ctx, tbl, nil, topics); err != nil {
					return brokerErr
				}
			}
			if err != nil {
				return err
			}
			if asJSON {
				err = printJSON(cmd.OutOrStdout(), st)
			} else {
				printStatus(cmd.OutOrStdout(), st)
				if broker == nil && brokerErr == nil && slices.ContainsFunc(st.Partitions, func(p lookup.PartitionStatus) bool { return p.BrokersUnknown }) {
					// The "?" columns said nothing of why (a new-user run
					// without env.sh): no brokers were given.
					fmt.Fprintf(cmd.OutOrStdout(), "\n(?: the brokers' side, not known without --brokers or %s)\n", envName("brokers"))
				}
			}
			if brokerErr != nil {
				return fmt.Errorf("the table's side only (above): the brokers' side failed: %w", brokerErr)
			}
			return err
		},
	}
	fs := cmd.Flags()
	f.register(fs)
	fs.Lookup("table").Usage = "Iceberg table as `NAMESPACE.TABLE` whose partitions to show (required with --serve); without it, the catalog's tables are listed"
	b.register(fs, "; without them only the table's side is shown")
	fs.StringSliceVarP(&topics, "topic", "t", nil, "also show the partitions of these topics, `NAME[,NAME]`, that the ledger does not have yet")
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of text")
	fs.StringVar(&serve, "serve", "", "serve a live status page on http://`ADDR`/ (e.g. 127.0.0.1:8080) until interrupted, instead of printing")
	// --format came first; it stays for scripts that use it, and says so.
	fs.StringVar(&format, "format", "text", "deprecated, use --json: output `FORMAT`, text or json")
	return cmd
}

func printStatus(w io.Writer, st lookup.TableStatus) {
	fmt.Fprintf(w, "table %s\nmetadata %s\n", st.Table, st.MetadataLocation)
	if st.SnapshotID != nil {
		fmt.Fprintf(w, "snapshot %d\n", *st.SnapshotID)
	}
	if len(st.Refs) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "REF\tTYPE\tSNAPSHOT\tCOMMITTED")
		for _, r := range st.Refs {
			at := "-"
			if r.CommittedAt != nil {
				at = r.CommittedAt.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", r.Name, r.Kind, r.SnapshotID, at)
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tLOG START\tEND OFFSET\tTABLE NEXT\tLAG\tLOST\tDEAD LETTERS\tLAST COMMIT\t")
	opt := func(v *int64) string {
		if v == nil {
			return "-"
		}
		return strconv.FormatInt(*v, 10)
	}
	// The brokers' columns are "?" where their side is not known (no
	// brokers, brokers that failed, a topic they do not have): "-" in LOST
	// means none, and a refused password showed as no loss (a user's run).
	brokers := func(unknown bool, v *int64) string {
		if unknown {
			return "?"
		}
		return opt(v)
	}
	for _, p := range st.Partitions {
		last := "-"
		if p.LastCommit != nil {
			last = p.LastCommit.UTC().Format(time.RFC3339)
		}
		unknown := p.BrokersUnknown
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", p.Topic, p.Partition, brokers(unknown, p.LogStart), brokers(unknown, p.EndOffset),
			opt(p.TableNext), brokers(unknown, p.Lag), brokers(unknown, p.Lost), opt(p.DeadLetters), last)
	}
	for _, t := range statusTotals(st.Partitions) {
		last := "-"
		if t.last != nil {
			last = t.last.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t\t\t\t%s\t%s\t%s\t%s\t\n", t.topic, fmt.Sprintf("all %d", t.partitions),
			brokers(t.unknown, t.lag), brokers(t.unknown, t.lost), opt(t.dead), last)
	}
	tw.Flush()
	for _, topic := range st.MissingTopics {
		fmt.Fprintf(w, "\ntopic %s, which the ledger names, does not exist on the brokers (deleted since it was sunk, or these are another cluster's brokers): its partitions show the table's side only\n", topic)
	}
	for _, topic := range st.RecreatedTopics {
		fmt.Fprintf(w, "\ntopic %s has another topic ID on the brokers than the ledger recorded (deleted and created again since it was sunk, or another cluster's): its partitions show the table's side only; a sink of it into this table is refused\n", topic)
	}
	if warning := statuspage.FromTable(st, nil).Warning; warning != "" {
		fmt.Fprintf(w, "\nwarning: %s\n", warning)
	}
}

// statusTotal is a topic's partitions of floe status summed: its lag,
// lost offsets and dead letters (nil when no partition has the figure),
// and its latest commit. unknown is set when the brokers' side of one of
// them is not known, so that its lag and lost offsets are not.
type statusTotal struct {
	topic           string
	partitions      int
	lag, lost, dead *int64
	last            *time.Time
	unknown         bool
}

// statusTotals sums each topic of more than maxListedPositions partitions
// for floe status's last lines: a 500-partition topic's 500 lines said
// nowhere how far the table lagged in all (a user's run).
func statusTotals(ps []lookup.PartitionStatus) []statusTotal {
	var out []statusTotal
	add := func(sum **int64, v *int64) {
		if v == nil {
			return
		}
		if *sum == nil {
			*sum = new(int64)
		}
		**sum += *v
	}
	for _, p := range ps {
		if n := len(out); n == 0 || out[n-1].topic != p.Topic {
			out = append(out, statusTotal{topic: p.Topic})
		}
		t := &out[len(out)-1]
		t.partitions++
		t.unknown = t.unknown || p.BrokersUnknown
		add(&t.lag, p.Lag)
		add(&t.lost, p.Lost)
		add(&t.dead, p.DeadLetters)
		if p.LastCommit != nil && (t.last == nil || p.LastCommit.After(*t.last)) {
			t.last = p.LastCommit
		}
	}
	return slices.DeleteFunc(out, func(t statusTotal) bool { return t.partitions <= maxListedPositions })
}

// serveStatus serves the status page of tbl on addr until ctx ends: each
// refresh reloads the table's metadata and asks the brokers.
func serveStatus(ctx context.Context, w io.Writer, addr string, tbl *snapshot.Table, broker *connector.Broker, topics []string) error {
	source := func(ctx context.Context) (statuspage.Page, error) {
		if err := tbl.Refresh(ctx); err != nil {
			return statuspage.Page{}, fmt.Errorf("reload %s: %w", tbl.Name(), err)
		}
		st, err := lookup.Status(ctx, tbl, broker, topics)
		if err != nil {
			return statuspage.Page{}, err
		}
		now := time.Now().UTC()
		var at *time.Time
		if broker != nil {
			at = &now
		}
		return statuspage.Page{Source: statuspage.SourceTable, GeneratedAt: now,
			Pipelines: []statuspage.Pipeline{statuspage.FromTable(st, at)}}, nil
	}
	bound, err := statuspage.Serve(ctx, addr, statuspage.Handler(source), slog.Default())
	if err != nil {
		return fmt.Errorf("status page: %w", listenError("--serve", addr, err))
	}
	fmt.Fprintf(w, "serving the status of %s on http://%s/ (JSON on /status.json); interrupt to stop\n", tbl.Name(), bound)
	<-ctx.Done()
	return nil
}

// catalogTable is one table of floe status without --table. Its JSON field
// names are stable (--json): kind is append, upsert or fold for a table
// floe writes, dead-letters (of names the data table) or other.
type catalogTable struct {
	Table        string     `json:"table"`
	Kind         string     `json:"kind"`
	Of           string     `json:"of,omitempty"`
	Rows         *int64     `json:"rows"`
	LastCommitAt *time.Time `json:"last_commit_at"`
	// Error says why a table of kind unreadable could not be loaded.
	Error string `json:"error,omitempty"`
}

// lastLedgerCommit is when floe table tbl's ledger last committed: the
// newest floe commit among its head's live ancestors, else, when expiry
// left none of them, the ledger archive's newest; nil when it has none or
// it cannot be read.
func lastLedgerCommit(ctx context.Context, cat icecat.Catalog, ident table.Identifier, tbl *table.Table) *time.Time {
	meta := tbl.Metadata()
	for s := tbl.CurrentSnapshot(); s != nil; {
		if s.Summary != nil && mapping.IsFloeCommit(s.Summary.Properties) {
			at := time.UnixMilli(s.TimestampMs).UTC()
			return &at
		}
		if s.ParentSnapshotID == nil {
			return nil
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	ft, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{})
	if err != nil {
		return nil
	}
	sum, err := ft.Summary(ctx, 0)
	if err != nil {
		return nil
	}
	var last *time.Time
	for _, tp := range sum.Partitions() {
		p, _ := sum.Partition(tp)
		if at := p.LastCommitAt(); !at.IsZero() && (last == nil || at.After(*last)) {
			last = &at
		}
	}
	return last
}

// listTables prints the tables of cat, sorted by name: what each is, its
// rows and its last commit, read from the catalog's metadata alone (a
// newcomer asked what the local stack held, and found no floe command
// that said). A floe table's last commit is its ledger's, a sink's or a
// replay's: a compaction after it is no sign that the sink is alive.
func listTables(ctx context.Context, w io.Writer, cat icecat.Catalog, asJSON bool) error {
	tables := []catalogTable{}
	for ident, err := range snapshot.Tables(ctx, cat) {
		if err != nil {
			return err
		}
		t := catalogTable{Table: strings.Join(ident, "."), Kind: "other"}
		tbl, err := cat.LoadTable(ctx, ident)
		if err != nil {
			// One table's metadata gone, or on storage these credentials
			// do not reach, is said of it; the others are listed (found
			// by review).
			t.Kind, t.Error = "unreadable", err.Error()
			tables = append(tables, t)
			continue
		}
		props := tbl.Properties()
		if of := props[snapshot.PropDeadLettersOf]; of != "" {
			t.Kind, t.Of = "dead-letters", of
		} else if floeTable(tbl) {
			if mode, err := mapping.ModeOf(props); err == nil {
				t.Kind = string(mode)
			}
		}
		if s := tbl.CurrentSnapshot(); s != nil {
			at := time.UnixMilli(s.TimestampMs).UTC()
			t.LastCommitAt = &at
			if t.Kind != "other" && t.Of == "" {
				// A compaction after the last sink commit showed as the
				// last commit, and a stalled sink looked alive to the
				// docs' cron audit, which selects by it (a new user's
				// run).
				t.LastCommitAt = lastLedgerCommit(ctx, cat, ident, tbl)
			}
			// The data files' rows, where no delete file hides some: an
			// upsert table's deletes would make the count a lie (found by
			// review).
			if s.Summary != nil {
				count := func(key string) (int64, bool) {
					n, err := strconv.ParseInt(s.Summary.Properties[key], 10, 64)
					return n, err == nil
				}
				eq, _ := count("total-equality-deletes")
				pos, _ := count("total-position-deletes")
				if n, ok := count("total-records"); ok && eq == 0 && pos == 0 {
					t.Rows = &n
				}
			}
		}
		tables = append(tables, t)
	}
	// In the catalog's own order (PostgreSQL's rows') the list was
	// hard to scan and changed between runs.
	slices.SortFunc(tables, func(a, b catalogTable) int { return strings.Compare(a.Table, b.Table) })
	// Every table unreadable is the catalog's storage, not a table: the
	// command fails, as a status of one table does (a new user got a
	// listing of errors and exit 0).
	var unreadable error
	if len(tables) > 0 && !slices.ContainsFunc(tables, func(t catalogTable) bool { return t.Error == "" }) {
		unreadable = fmt.Errorf("no table of the catalog can be read (%s: %s)", tables[0].Table, tables[0].Error)
	}
	if asJSON {
		if err := printJSON(w, map[string]any{"tables": tables}); err != nil {
			return err
		}
		return unreadable
	}
	if len(tables) == 0 {
		_, err := fmt.Fprintln(w, "the catalog has no tables yet: floe sink creates them")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tKIND\tROWS\tLAST COMMIT")
	for _, t := range tables {
		kind, rows, last := t.Kind, "-", "-"
		switch {
		case t.Of != "":
			kind = "dead letters of " + t.Of
		case t.Error != "":
			kind = "unreadable (below)"
		}
		if t.Rows != nil {
			rows = strconv.FormatInt(*t.Rows, 10)
		}
		if t.LastCommitAt != nil {
			last = t.LastCommitAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Table, kind, rows, last)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if unreadable != nil {
		return unreadable
	}
	for _, t := range tables {
		if t.Error != "" {
			fmt.Fprintf(w, "%s cannot be read: %s\n", t.Table, t.Error)
		}
	}
	// A committed table's ROWS "-" is its delete files (an upsert
	// table's), which the list does not apply: said, with what counts the
	// rows (a new user took it for a table without rows).
	for _, t := range tables {
		if t.Rows == nil && t.Error == "" && t.LastCommitAt != nil {
			fmt.Fprintf(w, "ROWS of %s: - (its delete files hide rows its data files hold; floe as-of --table %s --time now --rows counts them)\n", t.Table, t.Table)
		}
	}
	return nil
}

// floeTable reports whether floe writes tbl: a property floe sets, or a
// floe commit among its snapshots (tables of the first floes set none).
func floeTable(tbl *table.Table) bool {
	for key := range tbl.Properties() {
		if strings.HasPrefix(key, "floe.") {
			return true
		}
	}
	return slices.ContainsFunc(tbl.Metadata().Snapshots(), func(s table.Snapshot) bool {
		return s.Summary != nil && mapping.IsFloeCommit(s.Summary.Properties)
	})
}
