package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// lookupFlags are the flags where and as-of share.
type lookupFlags struct {
	tableFlags
	brokerFlags
	json bool
}

func (f *lookupFlags) register(cmd *cobra.Command, brokersUse string) {
	fs := cmd.Flags()
	f.tableFlags.register(fs)
	f.brokerFlags.register(fs, brokersUse)
	fs.BoolVar(&f.json, "json", false, "print JSON instead of text")
}

func newWhereCmd() *cobra.Command {
	var (
		f         lookupFlags
		topic     string
		partition int32
		offset    int64
		key       string
		branch    string
		reg       registryFlags
	)
	cmd := &cobra.Command{
		Use:   "where --table NAMESPACE.TABLE [--branch NAME] ([--topic NAME] --partition P --offset X | --key K) [--json]",
		Short: "Find the range, snapshot, commit time and data file holding an offset, or a key's row",
		Long: `Answer "which snapshot holds offset X": the ledger range [low, high) that consumed the offset,
the snapshot that committed it and when, and the data file that holds its row (found from the
manifests' bounds on the partition and offset columns; only that file's offset column is read
to confirm the row).

The answer is one of:
  row      a row holds the offset;
  no_row   a range consumed the offset, but it produced no row: a dead letter of a typed
           table (its dead-letter table, file and reason are given), a transaction marker, an
           aborted transactional record or an offset removed by compaction (with --brokers the
           log is read to tell which), or, in an upsert or state table, a value superseded since;
  lost     retention deleted the offset before it was sunk, and the ledger records the loss;
  unsunk   no range covers it: below the partition's first sunk offset, in a gap, or not sunk yet.

A snapshot that snapshot expiry removed is still named, from the ledger, and said to have expired
(expired in --json), as floe as-of says it.

--topic may be left out on a table that holds one topic. A question about something that does
not exist exits 2 naming it, as as-of does: a topic the table never held, or (with --brokers) a
partition neither the table nor the broker has.

--branch looks the position or key up in a branch's ledger instead of main's: a floe replay
--branch's, before it is published; or a tag's, read only, such as the one floe replay
--tag-main gave main's history before a publish, which main no longer holds.

On an upsert table, --key K answers where key K stands: the Kafka key's text for a table keyed
by the Kafka key (--key string), else a JSON object of the key columns ({"id":3}; dates,
times, timestamps, uuids and decimals as strings: {"day":"2024-01-31","at":"2024-01-31T08:00:00Z"}).
The answer is
  row         the key's row: the offset of the record that gave it, the snapshot whose range
              holds that record, the data file;
  deleted     the key's last record deleted it: the snapshot that committed the delete and
              the equality-delete file holding it (found in the table's delete files, newest
              first), with --brokers the offset of the deleting record; after compaction
              dropped the delete, found in the log with --brokers;
  never_seen  no row, and no delete holds it (with --brokers: no record of the ranges either);
  unknown     no row and no live delete holds it, but a compaction dropped the table's deletes
              and the log was not searched: deleted before it, or never seen.
A table keyed by decoded columns (JSON or a registry's format, a Debezium table's primary key) is
searched in the log by decoding its records as its sink does: with --schema-registry for a table
decoded with one.`,
		Example: `  floe where --table lake.orders --partition 0 --offset 1234
  floe where --table lake.orders --topic orders --partition 0 --offset 1234 --brokers localhost:9092 --json
  floe where --table lake.customers --key '{"id":3}'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			byKey := cmd.Flags().Changed("key")
			tp := mapping.TopicPartition{Topic: topic, Partition: partition}
			// Given or not is told by Changed, not by a sentinel default:
			// a negative value given is the lookup's to refuse, naming it.
			switch {
			case byKey:
				for _, other := range []string{"partition", "offset", "topic"} {
					if cmd.Flags().Changed(other) {
						return fmt.Errorf("--key looks a key up; --%s is for a position: give one or the other", other)
					}
				}
			case !cmd.Flags().Changed("partition"):
				return errors.New("missing --partition P (a partition number), or --key K on an upsert table")
			case !cmd.Flags().Changed("offset"):
				return errors.New("missing --offset X (an offset, 0 or more)")
			default:
				if err := lookup.ValidatePosition(tp, offset); err != nil {
					return err
				}
			}
			// A tag is read as a branch is: its ledger is its snapshot's
			// ancestry, the history a publish took off main (--tag-main).
			tbl, err := f.open(ctx, snapshot.OpenOptions{Branch: branch, ReadTag: true})
			if err != nil {
				return err
			}
			defer func() { err = changedWhileRead(ctx, tbl, err) }()
			broker, err := f.dialOptional(ctx, true)
			if err != nil {
				return err
			}
			if broker != nil {
				defer broker.Close()
			}
			w := cmd.OutOrStdout()
			var res any
			if byKey {
				registry, err := reg.registry()
				if err != nil {
					return err
				}
				r, err := lookup.WhereKey(ctx, tbl, broker, key, lookup.WithRegistry(registry))
				if err != nil {
					return err
				}
				res = r
				if !f.json {
					printWhereKey(w, r)
				}
			} else {
				r, err := lookup.Where(ctx, tbl, broker, tp, offset)
				if err != nil {
					return err
				}
				if r.Status == lookup.StatusNoRow && r.Kind == "" && broker == nil {
					r.Explanation += " (pass --brokers to tell which)"
				}
				res = r
				if !f.json {
					printWhere(w, r)
				}
			}
			if f.json {
				return printJSON(w, res)
			}
			return nil
		},
	}
	f.register(cmd, ": tell a marker from an aborted or compacted offset, and show the broker's offsets")
	fs := cmd.Flags()
	topicFlag(fs, &topic, "topic of the position (default: the table's one topic)")
	fs.Int32Var(&partition, "partition", 0, "partition `P` of the position (required without --key)")
	fs.Int64Var(&offset, "offset", 0, "`OFFSET` to look up (required without --key)")
	fs.StringVar(&key, "key", "", "on an upsert table, the `KEY` to look up: the Kafka key's text, or a JSON object of the key columns\n"+
		`(of a --fold latest table: {"kafka_topic":"T","kafka_partition":0,"kafka_key":"K"})`)
	fs.StringVar(&branch, "branch", "", "look up in this branch's or tag's ledger (default main), such as the tag floe replay --tag-main gave main's history before a publish")
	reg.register(fs)
	return cmd
}

// printWhereKey prints the answer of floe where --key as text.
func printWhereKey(w io.Writer, res lookup.KeyResult) {
	fmt.Fprintf(w, "key %s in %s: %s\n", res.Key, res.Table, strings.ReplaceAll(res.Status, "_", " "))
	if res.Offset != nil {
		fmt.Fprintf(w, "  record     %s/%d offset %d\n", res.Topic, *res.Partition, *res.Offset)
	}
	if res.SnapshotID != nil {
		fmt.Fprintf(w, "  snapshot   %d, committed %s", *res.SnapshotID, res.CommittedAt.Format(time.RFC3339))
		if res.Low != nil {
			fmt.Fprintf(w, ", range [%d, %d)", *res.Low, *res.High)
		}
		fmt.Fprintln(w)
	}
	switch {
	case res.File != "" && res.Status == lookup.KeyStatusDeleted:
		fmt.Fprintf(w, "  deletes    %s\n", res.File)
	case res.File != "":
		fmt.Fprintf(w, "  file       %s\n", res.File)
	}
	if res.FoundBy != "" {
		fmt.Fprintf(w, "  found in   %s\n", res.FoundBy)
	}
	fmt.Fprintf(w, "  %s\n", res.Explanation)
}

func printWhere(w io.Writer, r lookup.WhereResult) {
	fmt.Fprintf(w, "%s/%d offset %d in %s: %s\n", r.Topic, r.Partition, r.Offset, r.Table, strings.ReplaceAll(r.Status, "_", " "))
	if r.SnapshotID != nil {
		fmt.Fprintf(w, "  range      [%d, %d)", *r.Low, *r.High)
		switch {
		case r.Deletes != nil:
			// An upsert table's range: its records replace rows, so
			// its count is not of rows the table holds (a new user's
			// report).
			fmt.Fprintf(w, ", %s, %s", plural(int(*r.Records), "upsert"), plural(int(*r.Deletes), "delete"))
			if *r.Skipped > 0 {
				fmt.Fprintf(w, ", %d skipped (no key)", *r.Skipped)
			}
		case r.Records != nil:
			fmt.Fprintf(w, ", %s", plural(int(*r.Records), "row"))
		}
		if r.DeadLetters > 0 {
			fmt.Fprintf(w, ", %s", plural(int(r.DeadLetters), "dead letter"))
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "  snapshot   %d, committed %s%s\n", *r.SnapshotID, r.CommittedAt.Format(time.RFC3339), whereExpiredNote(r))
	}
	if r.File != "" {
		fmt.Fprintf(w, "  file       %s\n", r.File)
	}
	if r.TableFirst != nil {
		fmt.Fprintf(w, "  table      [%d, %d) of %s/%d\n", *r.TableFirst, *r.TableNext, r.Topic, r.Partition)
	}
	if r.LogStart != nil {
		fmt.Fprintf(w, "  broker     log start %d, end offset %d\n", *r.LogStart, *r.EndOffset)
	}
	if r.Status == lookup.StatusRow && r.SnapshotID != nil && r.File != "" && !r.Expired {
		// The explanation of a row says again what the lines above say
		// (a new user's report); JSON keeps it.
		return
	}
	fmt.Fprintf(w, "  %s\n", r.Explanation)
}

// whereExpiredNote says that the snapshot of r has expired, as floe as-of
// says it (expiredSnapshot), or nothing: the ledger still names the
// snapshot, which the table no longer has (a new user's report).
func whereExpiredNote(r lookup.WhereResult) string {
	switch {
	case !r.Expired:
		return ""
	case r.Status == lookup.StatusRow:
		return expiredSnapshot("the ledger keeps its range, and the current snapshot holds the row, in the file below")
	}
	return expiredSnapshot("the ledger keeps its range")
}
