package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// flagOf maps each setting that library errors name (a field of a
// package's Config or Options, or an argument) to the flag that sets it.
// The libraries speak of their own settings, so that they serve callers
// other than this command; the command's users know flags.
var flagOf = map[any]string{
	connector.SettingBrokers:        "--brokers",
	connector.SettingTopic:          "--topic",
	connector.SettingStart:          "--start",
	connector.SettingOnDataLoss:     "--on-data-loss",
	connector.SettingPartitions:     "--partitions",
	connector.SettingRegistry:       "--schema-registry",
	connector.SettingConflict:       "--on-schema-conflict",
	connector.SettingTruncate:       "--on-truncate",
	connector.SettingPlaceholder:    "--unavailable-placeholder",
	connector.SettingGroup:          "--group",
	connector.SettingTopicRegex:     "--topic-regex",
	connector.SettingGroupProtocol:  "--group-protocol",
	connector.SettingSessionTimeout: "--session-timeout",
	connector.SettingTLS:            "--" + flagTLS,
	connector.SettingTLSCA:          "--" + flagTLSCA,
	connector.SettingTLSCert:        "--" + flagTLSCert,
	connector.SettingTLSKey:         "--" + flagTLSKey,
	connector.SettingTLSServerName:  "--" + flagTLSServerName,
	connector.SettingMechanism:      "--" + flagMechanism,
	connector.SettingUser:           "--" + flagUser,
	connector.SettingPassword:       "--" + flagPassword,
	connector.SettingToken:          "--" + flagToken,
	connector.SettingTokenURL:       "--" + flagTokenURL,

	catalog.SettingCatalog:           "--catalog",
	catalog.SettingName:              "--catalog-name",
	catalog.SettingWarehouse:         "--warehouse",
	catalog.SettingToken:             "--catalog-token",
	catalog.SettingCredential:        "--catalog-credential",
	catalog.SettingS3Endpoint:        "--s3-endpoint",
	catalog.SettingS3Region:          "--s3-region",
	catalog.SettingS3AccessKeyID:     "--s3-access-key-id",
	catalog.SettingS3SecretAccessKey: "--s3-secret-access-key",

	replay.SettingTopic:            "--topic",
	replay.SettingFrom:             "--from",
	replay.SettingUntil:            "--until",
	replay.SettingBranch:           "--branch",
	replay.SettingPublish:          "--publish",
	replay.SettingFold:             "--fold",
	replay.SettingMode:             "--mode",
	replay.SettingKey:              "--id-columns",
	replay.SettingPublishDifferent: "--publish-different",
	replay.SettingTagMain:          "--tag-main",
	replay.SettingTable:            "--table",
	replay.SettingPartitionBy:      "--partition-by",
	replay.SettingRawValue:         "--keep-raw-value",
	replay.SettingDeadLetters:      "--dlq-table",

	lookup.SettingOffsets:     "--offsets",
	lookup.SettingTime:        "--time",
	lookup.SettingTopic:       "--topic",
	lookup.SettingPartition:   "--partition",
	lookup.SettingOffset:      "--offset",
	lookup.SettingBroker:      "--brokers",
	lookup.SettingKey:         "--key",
	lookup.SettingFromOffset:  "--from-offset",
	lookup.SettingUntilOffset: "--until-offset",

	localstack.SettingKafkaPort:     "--kafka-port",
	localstack.SettingS3Port:        "--s3-port",
	localstack.SettingRegistryPort:  "--schema-registry-port",
	localstack.SettingPlaintextPort: "--plaintext-port",
}

// flag is the flag of a setting; a setting without one (a library added it
// and this table was not updated) is shown as the library names it, which
// a test catches.
func flag[S ~string](s S) string {
	if f, ok := flagOf[s]; ok {
		return f
	}
	return string(s)
}

// flags lists the flags of settings, joined with and.
func flags[S ~string](settings []S) string {
	out := make([]string, 0, len(settings))
	for _, s := range settings {
		out = append(out, flag(s))
	}
	return strings.Join(out, " and ")
}

// valueMessage is how every command reports a flag's bad or missing value.
func valueMessage(flag, value, want string) string {
	if name, ok := strings.CutPrefix(flag, "--"); ok && value == "" {
		return fmt.Sprintf("missing %s (or %s): want %s", flag, envName(name), want)
	}
	if value == "" {
		return fmt.Sprintf("missing %s: want %s", flag, want)
	}
	return fmt.Sprintf("%s %q: want %s", flag, value, want)
}

// listenError explains why a server could not listen on addr, the value of
// flag: an address without a port (--metrics-addr 9464, which said to
// stop what listens on it: found by a new user), or one in use.
func listenError(flag, addr string, err error) error {
	_, port, serr := net.SplitHostPort(addr)
	if serr != nil {
		return errors.New(valueMessage(flag, addr, fmt.Sprintf("HOST:PORT or :PORT (:%s listens on every interface, 127.0.0.1:%[1]s on this host only)", strings.TrimLeft(addr, ":"))))
	}
	msg := "pick a free address, or stop what listens on it"
	if n, perr := strconv.Atoi(port); perr == nil {
		if held, ok := heldByOutgoing(n, err); ok {
			msg = held + ": pick a port outside the range this host gives those" + ephemeralRange()
		}
	}
	return fmt.Errorf("%w: %s; check %s", err, msg, flag)
}

// heldByOutgoing says, of a listen on port that failed with err, that an
// outgoing connection's local port holds it, when err is EADDRINUSE and
// nothing listens on port (an operator's run, twice, on a port in Linux's
// range for those); ok is false otherwise.
func heldByOutgoing(port int, err error) (string, bool) {
	if !errors.Is(err, syscall.EADDRINUSE) || listensOn(port) {
		return "", false
	}
	return "nothing listens on that port, so the local port of an outgoing connection holds it", true
}

// ephemeralRange names the range of local ports of outgoing connections,
// " (32768-60999, /proc/sys/net/ipv4/ip_local_port_range), such as one
// below 32768", or "" where it cannot be read.
func ephemeralRange() string {
	lo, hi, ok := ephemeralPorts()
	if !ok {
		return ""
	}
	return fmt.Sprintf(" (%d-%d, /proc/sys/net/ipv4/ip_local_port_range), such as one below %d", lo, hi, lo)
}

// localstackPortHint is the advice for a local stack that could not listen
// on one of its ports: another port, and, when nothing listens on it, why
// it is held anyway (the error asks whether another local stack runs,
// which then misleads: found by a user whose fixed ports in Linux's range
// for outgoing connections were held by them).
func localstackPortHint(e *localstack.CheckError) string {
	advice := "pick another port with " + flags(e.Settings)
	var op *net.OpError
	if !errors.As(e, &op) || op.Op != "listen" {
		return advice
	}
	addr, ok := op.Addr.(*net.TCPAddr)
	if !ok {
		return advice
	}
	held, ok := heldByOutgoing(addr.Port, e)
	if !ok {
		return advice
	}
	return held + " (not another local stack): " + advice + " outside the range this host gives those" + ephemeralRange()
}

// listensOn reports whether a TCP socket of this host listens on port, on
// any address, as Linux's /proc/net/tcp and tcp6 list them; where they
// cannot be read, it says yes, which keeps the plain advice.
func listensOn(port int) bool {
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			return true
		}
		for line := range strings.Lines(string(b)) {
			// sl local_address rem_address st ...: the local address is
			// hex IP:PORT, state 0A is LISTEN.
			fields := strings.Fields(line)
			if len(fields) < 4 || fields[3] != "0A" {
				continue
			}
			_, hex, _ := strings.Cut(fields[1], ":")
			if n, err := strconv.ParseInt(hex, 16, 32); err == nil && int(n) == port {
				return true
			}
		}
	}
	return false
}

// ephemeralPorts returns the range from which Linux picks the local ports
// of outgoing connections; ok is false where it cannot be read.
func ephemeralPorts() (lo, hi int, ok bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, false
	}
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		return 0, 0, false
	}
	return lo, hi, true
}

// changedWhileRead explains err, a read of tbl that found a file gone,
// when the table changed since tbl was loaded: an expiry or a compaction
// (floe maintain, or a sink's own) removed files of the snapshot being
// read, which is no fault, and running the command again reads the table
// as it is. It said the file was deleted outside floe and to rebuild the
// table by replay (found by review). A file gone from a table that did not
// change is reported as it was.
func changedWhileRead(ctx context.Context, tbl *snapshot.Table, err error) error {
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	now, lerr := tbl.Catalog().LoadTable(ctx, tbl.Identifier())
	if lerr != nil || now.MetadataLocation() == tbl.Iceberg().MetadataLocation() {
		return err
	}
	return fmt.Errorf("%s changed while floe read it (an expiry or a compaction, by floe maintain or a sink, removed files of the snapshot being read): run the command again, which reads the table as it is now (the read failed with: %v)", tbl.Name(), err)
}

// withFlags renders err for the command line. Errors about a setting's
// value are rewritten to name its flag (--start "middle": want earliest or
// latest); errors that a flag may fix end with which ("...; check
// --warehouse"). Every other part of the message is the library's.
func withFlags(err error) string {
	msg := err.Error()
	var hints []string
	hint := func(h string) {
		if !slices.Contains(hints, h) {
			hints = append(hints, h)
		}
	}
	// Replace a value error's text in place: wrapping errors repeat it
	// verbatim, and outer errors are visited first, so an inner one is
	// still found after its parent was rewritten.
	rewrite := func(lib, cli string) { msg = strings.Replace(msg, lib, cli, 1) }
	// dialing is set inside a connector.CheckError, which only a dial
	// returns for the brokers' first answer; a broker error outside one
	// came after the dial had worked (walkErrors visits outer errors
	// first).
	dialing := false
	var pipe *filePipelineError // the first config file's pipeline err is about
	walkErrors(err, func(e error) {
		switch e := e.(type) {
		case *filePipelineError:
			if pipe == nil {
				pipe = e
			}
		case *kgo.ErrFirstReadEOF:
			// franz-go guesses TLS against a plaintext port; a broker
			// restarting closes connections so too (found by a new user).
			switch {
			case !strings.Contains(e.Error(), "after a dial"):
			case dialing:
				hint("or a broker restarting closed it: when these TLS settings worked before, run the command again once the broker is up")
			default:
				hint("the brokers answered this process with the same TLS settings before, so a broker was most likely restarting (not a TLS misconfiguration): run the command again once it is up")
			}
		case *connector.ConfigError:
			rewrite(e.Error(), valueMessage(flag(e.Setting), e.Value, e.Want))
		case *catalog.ConfigError:
			rewrite(e.Error(), valueMessage(flag(e.Setting), e.Value, e.Want))
		case *mapping.LayoutError:
			if e.Table == "" {
				rewrite(e.Error(), valueMessage("--"+e.Setting, e.Value, e.Want))
			}
		case *connector.BadRecordError:
			// A conflict stops the sink only with --on-schema-conflict fail
			// or --dlq off: say what dead-letters it, not what was asked.
			if _, conflict := errors.AsType[*mapping.SchemaConflictError](e.Reason); conflict {
				hint("records whose type the table cannot take go to the dead-letter table with --on-schema-conflict dead-letter (the default) and --dlq on")
			} else {
				hint("with --dlq on (the default, not --dlq off) records that cannot become rows go to the dead-letter table instead of stopping the sink")
			}
		case *snapshot.DataFileGoneError:
			if e.Delete {
				hint("floe audit --deep names every such file, and floe replay rebuilds the table (a delete file cannot be dropped: the rows it deletes would come back)")
			} else {
				hint("floe audit --deep names every such file; floe maintain --drop-missing-dead-letter-files drops those of a dead-letter table, and floe replay rebuilds a data table")
			}
		case *lookup.QueryError:
			rewrite(e.Error(), valueMessage(flag(e.Setting), e.Value, e.Want))
		case *replay.OptionError:
			cli := valueMessage(flag(e.Setting), e.Value, e.Want)
			if e.Needs != "" {
				cli = fmt.Sprintf("%s needs %s: %s", flag(e.Setting), flag(e.Needs), e.Want)
			}
			rewrite(e.Error(), cli)
		case *replay.BoundError:
			cli := fmt.Sprintf("%s %s: %s", flag(e.Setting), e.Value, e.Reason)
			if e.From != "" {
				cli = fmt.Sprintf("%s %s: is before %s %s%s", flag(e.Setting), e.Value, flag(replay.SettingFrom), e.From, e.Reason)
			}
			rewrite(e.Error(), cli)

		case *mapping.PartitionByError:
			// A spec the table has (another engine set it) is no flag's
			// (from a review).
			if !e.TableSpec {
				rewrite(e.Error(), "--partition-by "+strings.TrimPrefix(e.Error(), "partition spec "))
			}

		case *connector.CheckError:
			dialing = true
			if len(e.Settings) > 0 { // none: no flag of floe's fixes it
				hint("check " + flags(e.Settings))
			}
		case *catalog.CheckError:
			hint("check " + flags(e.Settings))
		case *localstack.CheckError:
			hint(localstackPortHint(e))
		case *lookup.CheckError:
			hint("pass " + flags(e.Settings) + " of a cluster that still retains the log")
		case *replay.CheckError:
			switch {
			case slices.Contains(e.Settings, replay.SettingMode), slices.Contains(e.Settings, replay.SettingKey):
				hint("replay into another --table")
			case len(e.Settings) == 1 && e.Settings[0] == replay.SettingTable:
				// The error names the fix itself.
			case slices.Contains(e.Settings, replay.SettingDeadLetters):
				hint("replay onto another --branch, or give its dead letters a table with --dlq-table NAMESPACE.TABLE")
			case slices.Contains(e.Settings, replay.SettingPartitionBy):
				hint("omit --partition-by (a branch is written with its table's spec), or replay into a new --table")
			case e.Again != "":
				another := "replay into a new --table"
				if e.OnBranch {
					another = "replay onto another --branch (or into another --table)"
				}
				hint(fmt.Sprintf("run it again with --from %s to continue that replay, or %s to start another", e.Again, another))
			case e.OnBranch:
				hint("replay into another --table, or onto another --branch")
			default:
				// No --branch was given: "another" named none (from a
				// new-user run).
				hint("replay into a new --table, or rebuild this one on a branch and publish it in its place: add --branch rebuild --publish")
			}
		case *replay.OtherTopicsError:
			hint("a replay rebuilds one topic: to rebuild a table of several, sink them again (floe sink with a --topic for each) into a new table; replay without --publish to look at this topic's rebuild on its branch; or pass --publish-different to publish it alone, dropping the others' rows from main")
		case *replay.DifferError:
			if e.MainGone != nil && e.Coverage == "" {
				hint("the branch, rebuilt from the log, is the repair: pass --publish-different to publish it in place of main (floe audit --deep of the branch first, to check it)")
				break
			}
			if e.Keys == 0 {
				// Coverage only: the branch lacks offsets main holds.
				hint("replay from earlier offsets (--from) onto a new --branch, or pass --publish-different to publish the branch anyway, dropping those rows from main")
				break
			}
			hint("find out why they differ (floe audit --verify-content on each; a key in several partitions can win differently where commits cut elsewhere, docs/upsert.md), or pass --publish-different to publish the branch anyway")
		case *connector.DataLossError:
			hint("rerun with --on-data-loss record to record the lost range in the ledger and continue")
		case *snapshot.TruncatedLedgerError:
			table := e.Table
			if table == "" {
				table = "NAMESPACE.TABLE"
			}
			hint(fmt.Sprintf("run floe maintain --table %s: when an interrupted floe maintain left the entries in the table's other archive files "+
				"it repairs the ledger, and otherwise it names the snapshots whose entries are gone "+
				"(expire floe tables' snapshots only with floe maintain; if the entries are gone, replay into a new table)", table))
		case *snapshot.NoBranchError:
			if e.IsTag() {
				// A branch of a tag's name cannot be created: suggesting
				// it would send the user into a second refusal.
				hint("a tag is read only: write onto a branch of another name (floe replay --branch NEW)")
			} else {
				hint("check --branch, or let floe replay --branch create it")
			}
		}
		if e == snapshot.ErrTableNotFound {
			hint("check --table and --catalog")
		}
	})
	if len(hints) > 0 {
		msg += "; " + strings.Join(hints, "; ")
	}
	if pipe != nil {
		// What is about the pipeline, its hints too, names the file's
		// keys.
		if i := strings.Index(msg, pipe.prefix()); i >= 0 {
			i += len(pipe.prefix())
			msg = msg[:i] + fileTerms(msg[i:], pipe.keys)
		}
	}
	return msg
}

// walkErrors calls fn with err and every error it wraps, outermost first.
func walkErrors(err error, fn func(error)) {
	if err == nil {
		return
	}
	fn(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		walkErrors(u.Unwrap(), fn)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walkErrors(e, fn)
		}
	}
}
