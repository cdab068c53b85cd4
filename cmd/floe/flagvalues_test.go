package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlushFlagsRefuseNonPositive: floe sink and floe replay refuse flush
// thresholds of zero or below from the command line, a FLOE_* variable or
// the config file (there naming the line), with exit code 2 and one line
// naming the flag and what it wants, before anything else happens (no
// broker is needed to see it).
func TestFlushFlagsRefuseNonPositive(t *testing.T) {
	wants := map[string]string{
		"flush-records":  "want a whole number of 1 or more",
		"flush-bytes":    "want a size of 1 byte or more",
		"flush-interval": "want a duration above 0",
	}
	bad := []struct{ flag, value string }{
		{"flush-records", "0"}, {"flush-records", "-5"}, {"flush-records", "lots"},
		{"flush-bytes", "0"}, {"flush-bytes", "-1"}, {"flush-bytes", "-1MiB"}, {"flush-bytes", "12 parsecs"},
		{"flush-interval", "0"}, {"flush-interval", "-1s"}, {"flush-interval", "soon"},
	}
	conf := filepath.Join(t.TempDir(), "floe.yaml")
	for _, command := range []string{"sink", "replay"} {
		for _, b := range bad {
			check := func(how, where string, code int, errs string) {
				t.Helper()
				line := strings.TrimSuffix(errs, "\n")
				if code != exitError || strings.Contains(line, "\n") || !strings.Contains(line, "--"+b.flag) ||
					!strings.Contains(line, wants[b.flag]) || !strings.Contains(line, where) {
					t.Errorf("floe %s %s %s=%q: exit %d, stderr %q; want exit 2 and one line naming --%s, %q and %q",
						command, how, b.flag, b.value, code, errs, b.flag, wants[b.flag], where)
				}
			}
			code, _, errs := floe(t, command, "--"+b.flag, b.value)
			check("flag", "", code, errs)
			code, _, errs = floe(t, command, "--"+b.flag+"="+b.value)
			check("flag=", "", code, errs)

			env := "FLOE_" + strings.ToUpper(strings.ReplaceAll(b.flag, "-", "_"))
			t.Setenv(env, b.value)
			code, _, errs = floe(t, command)
			check("variable", env, code, errs)
			// An empty variable is a value too (and invalid): unset it.
			os.Unsetenv(env)

			writeFile(t, conf, "topic: orders\n\n"+b.flag+": "+b.value+"\n")
			code, _, errs = floe(t, command, "--config", conf)
			check("config", "floe.yaml line 3: "+b.flag, code, errs)
		}
	}
}

// TestFlushFlagsAcceptUnits: sizes take the units the README writes, from
// every source, and the help shows the default with its unit.
func TestFlushFlagsAcceptUnits(t *testing.T) {
	for in, want := range map[string]int64{
		"134217728": 134217728, "128MiB": 128 << 20, "128 MiB": 128 << 20, "128mib": 128 << 20, "128Mi": 128 << 20,
		"1GiB": 1 << 30, "1GB": 1_000_000_000, "1G": 1_000_000_000, "500k": 500_000, "500kB": 500_000, "512KiB": 512 << 10,
		"1.5GiB": 3 << 29, "1B": 1,
	} {
		var n int64
		if err := newByteSize(&n, 7).Set(in); err != nil || n != want {
			t.Errorf("size %q: %d, %v; want %d", in, n, err, want)
		}
	}
	for n, want := range map[int64]string{128 << 20: "128MiB", 1 << 30: "1GiB", 3 << 29: "1536MiB", 1000: "1000", 2048: "2KiB"} {
		if got := newByteSize(new(int64), n).String(); got != want {
			t.Errorf("size %d prints %q, want %q", n, got, want)
		}
	}

	// Past flag parsing, the sink only misses its brokers.
	t.Setenv("FLOE_FLUSH_INTERVAL", "2m")
	conf := filepath.Join(t.TempDir(), "floe.yaml")
	writeFile(t, conf, "flush-records: 1000\nflush-bytes: 64MiB\n")
	for _, command := range []string{"sink", "replay"} {
		if code, _, errs := floe(t, command, "--config", conf, "--flush-bytes", "1GB"); code != exitError || !strings.Contains(errs, "missing --brokers") {
			t.Errorf("floe %s with sizes in units: exit %d, stderr %q; want only missing --brokers", command, code, errs)
		}
	}
	_, out, _ := floe(t, "sink", "--help")
	if !strings.Contains(out, "--flush-bytes size") || !strings.Contains(out, "(default 128MiB)") {
		t.Errorf("sink --help should show --flush-bytes as a size with default 128MiB:\n%s", out)
	}
}

// TestFlagParseHints (from a new-user run): a flag value its parser
// refuses says what the flag wants, where pflag gave only the parser's
// words ("strconv.ParseInt: parsing ...", "time: unknown unit "d"").
func TestFlagParseHints(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"where", "--table", "lake.x", "--partition", "abc", "--offset", "1"}, "want a whole number"},
		{[]string{"maintain", "--table", "lake.x", "--expire-older-than", "7d"}, "want a duration such as 90s, 15m or 168h"},
	} {
		code, _, errs := floe(t, c.args...)
		if code != exitError || !strings.Contains(errs, c.want) {
			t.Errorf("floe %v: exit %d, %q; want exit 2 saying %q", c.args, code, errs, c.want)
		}
	}
}

// TestSizeFlagsHelpUnits (from a new user's run): --flush-bytes 128M and
// --compact-target-file-size 512M were accepted as 128,000,000 and
// 512,000,000 bytes while --help named only MiB/GiB and kB/GB: every size
// flag's help names every unit it takes, and that M alone is a power of
// 1000.
func TestSizeFlagsHelpUnits(t *testing.T) {
	for _, c := range []struct{ command, flag string }{
		{"sink", "flush-bytes"}, {"sink", "compact-target-file-size"}, {"replay", "flush-bytes"}, {"maintain", "target-file-size"},
	} {
		_, out, _ := floe(t, c.command, "--help")
		i := strings.Index(out, "--"+c.flag+" size")
		if i < 0 {
			t.Fatalf("floe %s --help has no --%s size:\n%s", c.command, c.flag, out)
		}
		line, _, _ := strings.Cut(out[i:], "\n")
		for _, want := range []string{"128MiB", "Mi, Gi, Ki", "500kB", "k, M, G", "128M is 128,000,000 bytes, not 128MiB", "1.5GiB"} {
			if !strings.Contains(line, want) {
				t.Errorf("floe %s --help, --%s lacks %q: %s", c.command, c.flag, want, line)
			}
		}
	}
	// What the help says of M alone.
	var n int64
	if err := newByteSize(&n, 1).Set("128M"); err != nil || n != 128_000_000 {
		t.Errorf("128M: %d, %v; want 128000000", n, err)
	}
}
