// Command floe sinks Kafka topics into Apache Iceberg tables exactly once and
// keeps a ledger of which offset range each snapshot committed.
//
// This package holds only the CLI: flags, config, output formatting and exit
// codes, one file per command (flags.go holds the flags several share). The
// packages it calls name their own settings in their errors; hints.go turns
// those into the flags that set them.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/floe-dev/floe/catalog"
)

// Exit codes shared by every command.
const (
	exitOK       = 0
	exitFindings = 1 // floe audit: the table is not complete
	exitError    = 2 // usage or runtime error
	// exitOnlyDeadLetters: floe sink --stop-at-end or floe replay read
	// records and committed every one to the dead-letter table, none as a
	// row (a --value, --key or registry that does not match the topic).
	exitOnlyDeadLetters = 3
)

// codeError carries a specific exit code through cobra.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string { return e.err.Error() }
func (e *codeError) Unwrap() error { return e.err }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	return runInput(args, os.Stdin, stdout, stderr)
}

// runInput is run with stdin as the commands' standard input (floe
// produce reads its records there).
func runInput(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// SIGHUP is the terminal closing: a local stack or a sink in it stops
	// as on Ctrl-C, keeping its data (it died at once, and a local stack
	// lost its topics: found by a new user). Unless it was ignored (nohup):
	// asking for it would undo that (found by review).
	signals := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		signals = append(signals, syscall.SIGHUP)
	}
	ctx, stop := signal.NotifyContext(context.Background(), signals...)
	defer stop()
	// Closed before the deferred stop cancels ctx (defers run last in,
	// first out), so that the end of the command is not taken for a
	// signal.
	finished, watched := make(chan struct{}), make(chan struct{})
	defer func() {
		close(finished)
		<-watched
	}()
	root := newRoot(stdout, stderr)
	root.SetIn(stdin)
	root.SetArgs(args)
	// Only a sink or a replay has consumed records to commit when asked to
	// stop; the line said so for every command (a status --serve, a local
	// stack), found by a new user.
	committing := false
	if c, _, err := root.Find(args); err == nil {
		committing = c.Name() == "sink" || c.Name() == "replay"
	}
	go func() {
		defer close(watched)
		select {
		case <-finished:
		case <-ctx.Done():
			select {
			case <-finished:
				return
			default:
			}
			// The first signal asks the command to stop cleanly (a sink
			// commits what it consumed); with the default handling back,
			// a second one ends the process at once, which loses nothing
			// committed. A commit waiting on a storage that hangs held
			// the process, every later signal swallowed (found by an
			// operator).
			stop()
			what := "stopping: a second signal exits at once"
			if committing {
				what = "stopping: committing what was consumed; a second signal exits at once (nothing committed is lost), and a run again resumes from the ledger"
			}
			slog.Info(what, "signal", context.Cause(ctx))
		}
	}()
	src := flagSources{}
	err := root.ExecuteContext(context.WithValue(ctx, sourcesKey{}, src))
	if ctx.Err() != nil {
		// A signal ended the command: its "stopping" line comes before
		// the line saying why the command failed, which is the last
		// (found by an operator: it came after).
		<-watched
	}
	if err == nil {
		return exitOK
	}
	var ce *codeError
	if errors.As(err, &ce) && ce.err == nil {
		return ce.code
	}
	// The one place where every command's error is explained: the catalog
	// and Open have classified what passed through them, and this names
	// what to fix for storage errors that reached a command directly
	// (data files, manifests), whichever command it is; then the settings
	// the libraries' errors name become the flags that set them.
	err = catalog.Explain(err)
	msg := withFlags(err)
	code := exitError
	if errors.As(err, &ce) {
		code = ce.code
	}
	msg = oneLine(msg + src.note(msg))
	if jsonErrors(root, args) {
		// A log shipper reading JSON lines would drop or choke on the one
		// line that says why the process stopped (asked by operators).
		slog.New(slog.NewJSONHandler(stderr, nil)).Error(msg, "exit_code", code)
		return code
	}
	fmt.Fprintf(stderr, "floe: %s\n", msg)
	return code
}

// jsonErrors reports whether the error ending a run is written as a JSON
// record: --log-format json, from the command line, FLOE_LOG_FORMAT or a
// config file. A run whose flags did not parse (a misspelt flag or
// command) has the arguments and the variable to go by (found by review:
// those errors were text among JSON lines).
func jsonErrors(root *cobra.Command, args []string) bool {
	if f := root.PersistentFlags().Lookup("log-format"); f != nil && (f.Changed || f.Value.String() == "json") {
		return f.Value.String() == "json"
	}
	for i, a := range args {
		if a == "--log-format=json" || a == "--log-format" && i+1 < len(args) && args[i+1] == "json" {
			return true
		}
	}
	return os.Getenv(envName("log-format")) == "json"
}

func oneLine(s string) string {
	// cobra's suggestion for a mistyped command is a paragraph of its
	// own, which ran on: `for "floe" Did you mean this? sink` (found by a
	// new user).
	if t := strings.Replace(s, "\n\nDid you mean this?\n", "; did you mean ", 1); t != s {
		s = strings.TrimRight(t, "\n") + "?"
	}
	return strings.Join(strings.Fields(s), " ")
}

type globalFlags struct {
	logLevel  string
	logFormat string
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	var g globalFlags
	root := &cobra.Command{
		Use:   "floe",
		Short: "Sink Kafka topics into Iceberg tables exactly once, with an auditable offset ledger",
		Long: `floe streams Kafka topic partitions into Apache Iceberg tables, exactly once, and records in
every snapshot which offset range [low, high) of which partition it committed. With that ledger
a table can be proven complete, and rebuilt from the log.

Start with 'floe demo': it runs the whole story on an embedded broker with nothing to install.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			// Before applyConfig, which marks the flags that variables and
			// the config file set as changed too.
			exposed := secretsOnCommandLine(cmd.Flags())
			overrides, err := applyConfig(cmd)
			if err != nil {
				return err
			}
			if err := setupLogging(stderr, g); err != nil {
				return err
			}
			overrides = append(overrides, restFlagsIgnored(cmd.Flags(), sourcesOf(cmd.Context()))...)
			for _, w := range append(exposed, overrides...) {
				slog.Warn(w)
			}
			for _, w := range misspeltEnv(os.Environ(), allFlagNames(cmd.Root())) {
				slog.Warn(w)
			}
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "text", "log format on stderr: text or json")
	root.AddCommand(newSinkCmd(), newDemoCmd(), newAuditCmd(), newWhereCmd(), newAsOfCmd(), newReplayCmd(), newLocalstackCmd(), newStatusCmd(), newMaintainCmd(), newVersionCmd())
	addConfigFlag(root)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w%s%s (see --help)", err, parseHint(err), flagSuggestion(cmd, err))
	})
	root.AddCommand(newFilesCmd(), newLedgerCmd(), newDeadLettersCmd(), newDropCmd(), newRegisterCmd(), newProduceCmd())
	return root
}

// parseHint says what a flag wants when pflag's error is only its parser's
// ("strconv.ParseInt: parsing ...", "time: unknown unit ...").
func parseHint(err error) string {
	switch msg := err.Error(); {
	case strings.Contains(msg, "strconv.ParseInt"), strings.Contains(msg, "strconv.ParseUint"):
		return "; want a whole number"
	case strings.Contains(msg, "strconv.ParseBool"):
		return "; want true or false"
	case strings.Contains(msg, "time: "):
		return "; want a duration such as 90s, 15m or 168h (hours, minutes, seconds: no days)"
	}
	return ""
}

// flagSuggestion names the command's flags close to an unknown one
// ("--tabel": did you mean --table?), as cobra does for commands.
func flagSuggestion(cmd *cobra.Command, err error) string {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return ""
	}
	name, _, _ = strings.Cut(name, "=")
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	close := closeTo(name, names)
	if len(close) == 0 {
		return ""
	}
	for i := range close {
		close[i] = "--" + close[i]
	}
	return "; did you mean " + strings.Join(close, " or ") + "?"
}

func setupLogging(w io.Writer, g globalFlags) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch g.logFormat {
	case "text":
		slog.SetDefault(slog.New(goneMetadataHandler{onceHandler{Handler: slog.NewTextHandler(w, opts)}}))
	case "json":
		opts.ReplaceAttr = durationText
		slog.SetDefault(slog.New(goneMetadataHandler{onceHandler{Handler: slog.NewJSONHandler(w, opts)}}))
	default:
		return fmt.Errorf("--log-format %q: want text or json", g.logFormat)
	}
	// What libraries print with the log package (iceberg-go's "Warning:
	// Failed to delete old metadata file") are warnings: at INFO, where
	// slog puts them, an operator's filter missed them (found by review).
	slog.SetLogLoggerLevel(slog.LevelWarn)
	return nil
}

// goneMetadataHandler says at debug level, not as a warning, iceberg-go's
// "Failed to delete old metadata file" for a file that is already gone:
// after a commit each writer of a table (a sink beside floe maintain, two
// sinks) deletes the metadata files past its retention, so the slower one
// finds some deleted; nothing is wrong (a new user took it for one).
type goneMetadataHandler struct{ slog.Handler }

func (h goneMetadataHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && strings.Contains(r.Message, "Failed to delete old metadata file") &&
		(strings.Contains(r.Message, "no such file or directory") || strings.Contains(r.Message, "does not exist") || strings.Contains(r.Message, "NoSuchKey")) {
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

func (h goneMetadataHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return goneMetadataHandler{h.Handler.WithAttrs(attrs)}
}

func (h goneMetadataHandler) WithGroup(name string) slog.Handler {
	return goneMetadataHandler{h.Handler.WithGroup(name)}
}

// onceHandler writes an attribute once: it drops a record's attribute
// that the logger's With already set to the same value. A sink's logger
// names its topic and table, and the packages it hands that logger to
// name the table again; a JSON line with a key twice is read differently
// by different tools. An attribute naming another value (another table)
// is kept.
type onceHandler struct {
	slog.Handler
	set map[string]slog.Value
}

func (h onceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	set := maps.Clone(h.set)
	if set == nil {
		set = map[string]slog.Value{}
	}
	for _, a := range attrs {
		set[a.Key] = a.Value
	}
	return onceHandler{Handler: h.Handler.WithAttrs(attrs), set: set}
}

// WithGroup starts a group, whose keys are apart from those set before.
func (h onceHandler) WithGroup(name string) slog.Handler {
	return onceHandler{Handler: h.Handler.WithGroup(name)}
}

func (h onceHandler) Handle(ctx context.Context, r slog.Record) error {
	if len(h.set) == 0 {
		return h.Handler.Handle(ctx, r)
	}
	kept := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if v, ok := h.set[a.Key]; !ok || !sameScalar(v, a.Value) {
			kept.AddAttrs(a)
		}
		return true
	})
	return h.Handler.Handle(ctx, kept)
}

// sameScalar reports whether a and b are the same string, number, bool,
// duration or time. Other kinds never are: a slice or a map would panic
// slog's Equal, and a LogValuer's value is known only when the line is
// written.
func sameScalar(a, b slog.Value) bool {
	switch a.Kind() {
	case slog.KindString, slog.KindInt64, slog.KindUint64, slog.KindFloat64, slog.KindBool, slog.KindDuration, slog.KindTime:
		return a.Kind() == b.Kind() && a.Equal(b)
	}
	return false
}

// durationText writes durations as text with their unit ("1.5s", "12ms"):
// slog's JSON handler writes a time.Duration as an integer of nanoseconds,
// which a person reading the log cannot tell from a count, and a log
// pipeline cannot tell the unit of. The text handler already writes text.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// noArgs refuses positional arguments as cobra.NoArgs does, naming the
// fix: floe takes every value with its flag ("floe sink orders lake.orders"
// was "unknown command \"orders\"").
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	hint := "give each value with its flag"
	switch {
	case cmd.Name() == "sink" || cmd.Name() == "replay":
		hint = "give the topic with --topic and the table with --table"
	case cmd.Flags().Lookup("table") != nil:
		hint = "give the table with --table"
	}
	return fmt.Errorf("%s takes flags only, and was given the arguments %q: %s (see --help)", cmd.CommandPath(), strings.Join(args, " "), hint)
}
