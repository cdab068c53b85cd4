package main

import (
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// everyCommand lists every command under a fresh root, the root too.
func everyCommand() []*cobra.Command {
	var out []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		out = append(out, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(io.Discard, io.Discard))
	return out
}

// TestHelpShowsNoGoTypesOrSentinels renders every command's --help and
// fails on what pflag prints when a usage string names no value: Go type
// names (int32Slice, stringSlice as "strings", ...) and sentinel defaults
// that mean "not given" (-1, an empty list), and on a description line
// left unwrapped.
func TestHelpShowsNoGoTypesOrSentinels(t *testing.T) {
	leaks := []string{"int32Slice", "stringSlice", "stringArray", " strings ", " int32 ", " int64 ", " ints ",
		"(default -1)", "(default [])", `(default "")`, "(default )"}
	for _, c := range everyCommand() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		args := append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "floe")), "--help")
		code, out, errs := floe(t, args...)
		if code != exitOK || !strings.Contains(out, "Usage:") {
			t.Fatalf("floe %v: exit %d, stderr %q", args, code, errs)
		}
		description, _, _ := strings.Cut(out, "Usage:")
		for _, line := range strings.Split(description, "\n") {
			if n := utf8.RuneCountInString(line); n > maxHelpLine {
				t.Errorf("floe %s --help: a description line of %d characters, wrap it at %d:\n%s", c.CommandPath(), n, maxHelpLine, line)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "-") {
				continue // prose, not a flag
			}
			for _, leak := range leaks {
				if strings.Contains(line+" ", leak) {
					t.Errorf("floe %s --help shows %q:\n%s", c.CommandPath(), strings.TrimSpace(leak), line)
				}
			}
		}
	}
}

// maxHelpLine is the longest line of a command's description: they are
// wrapped at 100 columns (flags' usage lines are pflag's to lay out).
const maxHelpLine = 100

// TestOneConventionPerFlag: the same flag means the same thing with the
// same short name on every command that has it (-b and -t as kcat has
// them), and every command that prints a report can print it as JSON.
func TestOneConventionPerFlag(t *testing.T) {
	shorts := map[string]string{"brokers": "b", "topic": "t", "output": "o"}
	reports := map[string]bool{"audit": true, "status": true, "where": true, "as-of": true, "maintain": true, "version": true, "dead-letters": true}
	for _, c := range everyCommand() {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if want, ok := shorts[f.Name]; ok && f.Shorthand != want {
				t.Errorf("%s: --%s has short name %q, want -%s", c.CommandPath(), f.Name, f.Shorthand, want)
			}
		})
		if reports[c.Name()] {
			if f := c.Flags().Lookup("json"); f == nil || f.Value.Type() != "bool" {
				t.Errorf("%s prints a report but has no --json", c.CommandPath())
			}
			delete(reports, c.Name())
		}
	}
	if len(reports) > 0 {
		t.Errorf("commands not found: %v", reports)
	}
}

// TestUnknownSubcommand (from a new-user run): floe localstack down
// printed the help of floe localstack and exited 0, so a cleanup script
// took it for done. An unknown word after a command is exit 2 naming it,
// and floe localstack alone still prints its help.
func TestUnknownSubcommand(t *testing.T) {
	code, _, errs := floe(t, "localstack", "down")
	if code != exitError || !strings.Contains(errs, `unknown command "down" for "floe localstack"`) || !strings.Contains(errs, "Ctrl-C") {
		t.Errorf("floe localstack down: exit %d, stderr %q; want exit 2 naming the word and how a stack stops", code, errs)
	}
	if code, out, errs := floe(t, "localstack"); code != exitOK || !strings.Contains(out, "up ") {
		t.Errorf("floe localstack: exit %d, stdout %q, stderr %q; want its help", code, out, errs)
	}
	// cobra's suggestion ran on into the line (from a new-user run).
	if code, _, errs := floe(t, "sinkk"); code != exitError || errs != "floe: unknown command \"sinkk\" for \"floe\"; did you mean sink?\n" {
		t.Errorf("floe sinkk: exit %d, stderr %q", code, errs)
	}
}

// TestNoStoppingLineWithoutSignal: the end of a command cancels the
// signal context too, which the first-signal handler took, at random, for
// a signal: "stopping: ..." lines on commands no one stopped (found by
// the suite).
func TestNoStoppingLineWithoutSignal(t *testing.T) {
	for range 200 {
		if _, _, errs := floe(t, "version"); strings.Contains(errs, "stopping") {
			t.Fatalf("a command no signal stopped logged: %q", errs)
		}
	}
}

// TestCompactHelpSaysAcrossKafkaPartitions (from a new-user run): floe
// maintain --compact's flag help said it rewrote "small data files of each
// Kafka partition and Iceberg partition", where the compaction merges the
// small files of an Iceberg partition across Kafka partitions (18 files of
// 3 Kafka partitions became 1), as docs/maintenance.md and the command's
// description say.
func TestCompactHelpSaysAcrossKafkaPartitions(t *testing.T) {
	for _, c := range everyCommand() {
		if c.Name() != "maintain" {
			continue
		}
		usage := c.Flags().Lookup("compact").Usage
		if !strings.Contains(usage, "across Kafka partitions") || strings.Contains(usage, "of each Kafka partition and Iceberg partition") {
			t.Errorf("floe maintain --compact: %q, want it to say that it merges across Kafka partitions", usage)
		}
		return
	}
	t.Fatal("no floe maintain command")
}

// TestSinkHelpNamesEveryStopSignal (from a new-user run): floe sink's
// description named SIGINT and SIGTERM as the clean stop, where SIGHUP
// stops it the same way (docs/deployment.md, docs/exit-codes.md).
func TestSinkHelpNamesEveryStopSignal(t *testing.T) {
	for _, c := range everyCommand() {
		if c.Name() == "sink" {
			if !strings.Contains(c.Long, "SIGINT, SIGTERM or SIGHUP") {
				t.Errorf("floe sink --help does not name SIGHUP among the signals that stop it cleanly")
			}
			return
		}
	}
	t.Fatal("no floe sink command")
}
