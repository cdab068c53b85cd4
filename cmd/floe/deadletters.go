package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/apache/iceberg-go/table"
	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// defaultDeadLetterLimit is how many dead letters floe dead-letters lists
// unless --limit says otherwise: a screenful or two, while --summary and
// the footer count every one.
const defaultDeadLetterLimit = 100

// previewRunes is how much of a key or a value a line of floe
// dead-letters shows; --json has all of it.
const previewRunes = 32

func newDeadLettersCmd() *cobra.Command {
	var (
		f         tableFlags
		branch    string
		asJSON    bool
		topic     string
		partition int32
		from      int64
		until     int64
		since     string
		limit     int
		summary   bool
	)
	cmd := &cobra.Command{
		Use:   "dead-letters --table NAMESPACE.TABLE [--branch NAME] [--topic T] [--partition P] [--from-offset O] [--until-offset O] [--since TIME] [--limit N] [--summary] [--json]",
		Short: "List the records of a typed table that could not become rows, and why, counted by reason",
		Long: `List the dead letters of a table: the records of a typed table (--value json|registry, --key
json) that could not become rows (not JSON, an unknown schema id, a type the table's column
cannot take), which the sink sent to the table's dead-letter table with the reason. They are the
rows of every dead-letter table the table's ledger names that belong to a commit of the ledger:
rows of a commit rolled back, or replaced by a published branch, are not the table's and are left
out (a note counts them), and dead letters the ledger counts that no dead-letter table holds yet
(pending) are counted in a note (floe audit tells why), as are those floe maintain
--drop-missing-dead-letter-files recorded as lost. --branch reads a branch's ledger instead
of main's: the dead letters of a floe replay --branch, before it is published; or a tag's, read
only, such as the one floe replay --tag-main gave main's history before a publish.

One line each, by topic, partition and offset: the record's position, its timestamp, the schema
registry id it named (- when none), a preview of its key and value (escaped: \n, \t, \xNN for a
byte that is not UTF-8 text; - when null; cut at 32 characters) and the reason. --limit bounds
the lines (default 100, 0 for all); the output says when there are more. A footer counts them
by reason: errors that differ only in what is particular to a record (quoted values, numbers, a
remark holding one, such as a JSON syntax error's position) are one reason, which shows what its
dead letters have alike and the rest as "…", # or left out; with the first dead letter of each,
whose whole error names the fix when the sink knew one. --summary prints only that count.

--topic, --partition, --from-offset and --until-offset (offsets [from, until)) and --since (the
record timestamp, RFC3339, or a duration back from now such as 24h) select which. A topic or a
partition the table does not have exits 2, as floe where does.

--json prints one document: table, commits (of its ledger), dead_letter_tables, counted (what
the ledger counts in the selected topic and partition), matched (what the selection holds),
more (matched is more than listed), dead_letters (per record: topic, partition, offset,
timestamp, error, reason, schema_id when set, key_base64 and value_base64 (null when null),
headers (key, value_base64), dead_letter_table, file, commit_id), reasons (reason, count,
first_topic, first_partition, first_offset, first_error) and notes. See docs/dead-letters.md.`,
		Example: `  floe dead-letters --table lake.orders
  floe dead-letters --table lake.orders --partition 0 --since 24h --limit 20
  floe dead-letters --table lake.orders --summary
  floe dead-letters --table lake.orders --branch rebuild --summary
  floe dead-letters --table lake.orders --limit 0 --json | jq -r '.dead_letters[].value_base64 | @base64d'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			if limit < 0 {
				return fmt.Errorf("--limit %d: want a number of dead letters to list, 0 for all", limit)
			}
			q := lookup.DeadLetterQuery{Topic: topic, Limit: limit, CountOnly: summary}
			if cmd.Flags().Changed("partition") {
				q.Partition = &partition
			}
			if cmd.Flags().Changed("from-offset") {
				q.From = &from
			}
			if cmd.Flags().Changed("until-offset") {
				q.Until = &until
			}
			if since != "" {
				t, err := parseSince(since, time.Now())
				if err != nil {
					return err
				}
				q.Since = &t
			}
			tbl, err := f.open(ctx, snapshot.OpenOptions{Branch: branch, ReadTag: true})
			if err != nil {
				return err
			}
			defer func() { err = changedWhileRead(ctx, tbl, err) }()
			res, err := lookup.DeadLetters(ctx, tbl, q)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return printJSON(w, res)
			}
			if branch != "" && branch != table.MainBranch {
				// Whose dead letters they are, not main's (from a
				// new-user run: the header named the table alone).
				kind := "branch"
				if tbl.HasTag(branch) {
					kind = "tag"
				}
				res.Table += " (" + kind + " " + branch + ")"
			}
			printDeadLetters(w, res, q, selection(cmd))
			return nil
		},
	}
	fs := cmd.Flags()
	f.register(fs)
	fs.StringVar(&branch, "branch", "", "list the dead letters of this branch's or tag's ledger (default main), such as a floe replay --branch's before it is published")
	topicFlag(fs, &topic, "list the dead letters of this topic only")
	fs.Int32Var(&partition, "partition", 0, "list the dead letters of partition `P` only")
	fs.Int64Var(&from, "from-offset", 0, "list the dead letters at this `OFFSET` and after")
	fs.Int64Var(&until, "until-offset", 0, "list the dead letters below this `OFFSET`")
	fs.StringVar(&since, "since", "", "list the records stamped at or after `TIME`: RFC3339 (2024-05-01T09:00:00Z), or a duration back from now (24h)")
	fs.IntVar(&limit, "limit", defaultDeadLetterLimit, "list at most `N` dead letters, the first by position (0: all); the counts cover every one")
	fs.BoolVar(&summary, "summary", false, "print only the counts by reason")
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of text")
	return cmd
}

// parseSince reads --since: an RFC3339 time, or a duration back from now
// (mapping.ParseWhen, as every flag that takes a time).
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, _, ok := mapping.ParseWhen(s, now); ok {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want %s", s, mapping.TimeForms)
}

// selection names the flags that selected dead letters, as given, for
// the line saying that none matched ("" when none did).
func selection(cmd *cobra.Command) string {
	var given []string
	for _, name := range []string{"topic", "partition", "from-offset", "until-offset", "since"} {
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			given = append(given, "--"+name+" "+fl.Value.String())
		}
	}
	return strings.Join(given, " ")
}

func printDeadLetters(w io.Writer, r lookup.DeadLettersResult, q lookup.DeadLetterQuery, selected string) {
	switch {
	case r.Commits == 0:
		fmt.Fprintf(w, "%s has no floe commits yet: nothing was sunk into it, so it has no dead letters\n", r.Table)
	case r.Matched == 0 && selected != "":
		counted := "in all"
		if q.Topic != "" || q.Partition != nil {
			counted = "in the topic and partition selected"
		}
		fmt.Fprintf(w, "no dead letter of %s matches %s (the ledger counts %s %s)\n", r.Table, selected, plural(int(r.Counted), "dead letter"), counted)
	case r.Matched == 0 && r.Counted == 0:
		fmt.Fprintf(w, "%s has no dead letters: its ledger's %s sent no record to a dead-letter table\n", r.Table, plural(r.Commits, "commit"))
	case r.Matched == 0:
		fmt.Fprintf(w, "%s: its ledger counts %s, and no dead-letter table holds any of them (see the note)\n", r.Table, plural(int(r.Counted), "dead letter"))
	default:
		in := ""
		if len(r.DeadLetterTables) > 0 {
			in = " in " + strings.Join(r.DeadLetterTables, ", ")
		}
		matching := ""
		if selected != "" {
			matching = " matching " + selected
		}
		fmt.Fprintf(w, "%s: %s%s%s\n", r.Table, plural(int(r.Matched), "dead letter"), matching, in)
	}
	if len(r.DeadLetters) > 0 {
		fmt.Fprintln(w)
		printDeadLetterLines(w, r)
		if r.More {
			fmt.Fprintf(w, "the first %d of %d: --limit N lists more (0: all), --json gives whole records\n", len(r.DeadLetters), r.Matched)
		}
	}
	if len(r.Reasons) > 0 {
		if !q.CountOnly {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, "by reason:")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "COUNT\tFIRST\tREASON")
		for _, rc := range r.Reasons {
			fmt.Fprintf(tw, "%d\t%s/%d offset %d\t%s\n", rc.Count, rc.Topic, rc.Partition, rc.Offset, rc.Reason)
		}
		tw.Flush()
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// printDeadLetterLines prints one line per listed dead letter, naming
// its dead-letter table only when several hold them.
func printDeadLetterLines(w io.Writer, r lookup.DeadLettersResult) {
	tables := map[string]bool{}
	for _, d := range r.DeadLetters {
		tables[d.Table] = true
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "TOPIC\tPARTITION\tOFFSET\tTIMESTAMP\tSCHEMA\tKEY\tVALUE\tERROR"
	if len(tables) > 1 {
		head = "DEAD-LETTER TABLE\t" + head
	}
	fmt.Fprintln(tw, head)
	for _, d := range r.DeadLetters {
		if len(tables) > 1 {
			fmt.Fprintf(tw, "%s\t", d.Table)
		}
		schema := "-"
		if d.SchemaID != nil {
			schema = strconv.Itoa(int(*d.SchemaID))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", d.Topic, d.Partition, d.Offset, d.Timestamp.Format(time.RFC3339Nano),
			schema, preview(d.Key), preview(d.Value), oneLine(d.Error))
	}
	tw.Flush()
}

// preview shows the start of a key or a value on one line: its text with
// backslashes, control characters and bytes that are not UTF-8 escaped
// (\n, \t, \x00), "" when empty, - when null, cut at previewRunes
// characters with … after it.
func preview(b []byte) string {
	switch {
	case b == nil:
		return "-"
	case len(b) == 0:
		return `""`
	}
	var sb strings.Builder
	for n := 0; len(b) > 0; n++ {
		if n == previewRunes {
			sb.WriteString("…")
			break
		}
		r, size := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&sb, `\x%02x`, b[0])
		case r == '\\':
			sb.WriteString(`\\`)
		case unicode.IsPrint(r):
			sb.WriteRune(r)
		default:
			// \n, \t, \x00, \u200b: as Go quotes them.
			q := strconv.QuoteRune(r)
			sb.WriteString(q[1 : len(q)-1])
		}
		b = b[size:]
	}
	return sb.String()
}
