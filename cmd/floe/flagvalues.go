package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/floe-dev/floe/mapping"
)

// Flag values that refuse what cannot be meant. connector.Config takes a
// zero flush threshold as "the default" (the Go zero value), but on the
// command line, in a config file or in a FLOE_* variable, 0 or a negative
// number is a mistake, and turning it silently into a default would hide
// it. Each of these rejects it in Set, which all three sources go through
// (pflag for flags, applyConfig for the file and the variables), so the
// error names the flag, and the variable or the file's line it came from.

// positiveInt is an int flag that must be 1 or more (--flush-records),
// and at most max when it is set, for the reason why gives.
type positiveInt struct {
	v   *int
	max int
	why string
}

func newPositiveInt(v *int, def int) positiveInt {
	*v = def
	return positiveInt{v: v}
}

// newBoundedInt is newPositiveInt with a ceiling.
func newBoundedInt(v *int, def, max int, why string) positiveInt {
	*v = def
	return positiveInt{v: v, max: max, why: why}
}

func (p positiveInt) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	switch {
	case p.max > 0 && (err != nil || n < 1 || n > p.max):
		return fmt.Errorf("want a whole number from 1 to %s (%s)", humanize.Comma(int64(p.max)), p.why)
	case err != nil || n < 1:
		return errors.New("want a whole number of 1 or more")
	}
	*p.v = n
	return nil
}

func (p positiveInt) String() string { return strconv.Itoa(*p.v) }
func (positiveInt) Type() string     { return "count" }

// byteSize is a size flag that must be 1 byte or more (--flush-bytes). It
// takes a number of bytes with an optional unit, as the README writes
// sizes: IEC units are powers of 1024 (128MiB, 1GiB, 512KiB; Ki, Mi, Gi
// alone too), SI units powers of 1000 (500kB, 1GB; k, M, G alone too);
// case and a space before the unit do not matter, and decimals are allowed
// (1.5GiB). It parses with go-humanize's ParseBytes; sizeHelp says all of
// this in each size flag's help.
type byteSize struct{ v *int64 }

// sizeHelp says in a size flag's help what byteSize accepts, all of it:
// a user who wrote 128M for 128 MiB got 128,000,000 bytes without a word,
// since M alone is a power of 1000 to go-humanize.
const sizeHelp = "a number of bytes, or with a unit: 128MiB, 1GiB, 512KiB (or Mi, Gi, Ki: powers of 1024), 500kB, 1GB (or k, M, G: powers of 1000, so 128M is 128,000,000 bytes, not 128MiB); TiB and TB too, in any case, with decimals such as 1.5GiB"

func newByteSize(v *int64, def int64) byteSize {
	*v = def
	return byteSize{v}
}

func (b byteSize) Set(s string) error {
	const want = "want a size of 1 byte or more, such as 134217728, 128MiB or 1GB"
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-") {
		return errors.New(want)
	}
	n, err := humanize.ParseBytes(s)
	switch {
	case err != nil:
		return fmt.Errorf("%s (%w)", want, err)
	case n < 1:
		return errors.New(want)
	case n > math.MaxInt64:
		return fmt.Errorf("%s; %s is too large", want, s)
	}
	*b.v = int64(n)
	return nil
}

// String prints the size in the largest IEC unit that divides it, so that
// help shows the default as 128MiB, not 134217728.
func (b byteSize) String() string {
	n := *b.v
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

func (byteSize) Type() string { return "size" }

// positiveDuration is a duration flag that must be above zero
// (--flush-interval).
type positiveDuration struct{ v *time.Duration }

func newPositiveDuration(v *time.Duration, def time.Duration) positiveDuration {
	*v = def
	return positiveDuration{v}
}

func (p positiveDuration) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		return errors.New("want a duration above 0, such as 500ms, 30s or 5m")
	}
	*p.v = d
	return nil
}

func (p positiveDuration) String() string { return p.v.String() }
func (positiveDuration) Type() string     { return "duration" }

// partitionBy is --partition-by, parsed in Set like the flags above, so
// that a malformed spec names where it came from; nil when not given.
type partitionBy struct{ p **mapping.PartitionBy }

func (v partitionBy) Set(s string) error {
	p, err := mapping.ParsePartitionBy(s)
	var pe *mapping.PartitionByError
	switch {
	case errors.As(err, &pe) && pe.Part != "":
		// pflag and applyConfig name the whole value already.
		return fmt.Errorf("%s: %s", pe.Part, pe.Problem)
	case errors.As(err, &pe):
		return errors.New(pe.Problem)
	case err != nil:
		return err
	}
	*v.p = &p
	return nil
}

func (v partitionBy) String() string {
	if *v.p == nil {
		return ""
	}
	return (*v.p).String()
}

func (partitionBy) Type() string { return "spec" }

// partitionByUsage is --partition-by's usage on every command that has it.
const partitionByUsage = "partition the table by Iceberg transforms of its columns, comma-separated: identity(COL), bucket(N, COL), truncate(W, COL), year(COL), month(COL), day(COL), hour(COL), e.g. 'hour(kafka_timestamp), bucket(16, kafka_key)'; none for unpartitioned. " +
	"A new table gets it; an existing table whose spec differs is evolved to it (files written before keep theirs); omitted, a table keeps its spec"
