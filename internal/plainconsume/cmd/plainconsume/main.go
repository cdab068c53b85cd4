// Command plainconsume reads a topic from its start to the given end
// offsets with a plain franz-go consumer (plainconsume.All) and prints the
// records read and the seconds the reading took, from creating the client
// to the last record:
//
//	plainconsume -brokers HOST:PORT -topic T -ends 0:250000,1:250000
//
// floe's whole-process benchmark (cmd/floe BenchmarkSinkProcess) runs it
// beside floe sink.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/floe-dev/floe/internal/plainconsume"
)

func main() {
	brokers := flag.String("brokers", "", "comma-separated broker addresses")
	topic := flag.String("topic", "", "topic to read")
	endsFlag := flag.String("ends", "", "PARTITION:END_OFFSET,... to read each partition to")
	flag.Parse()
	ends := map[int32]int64{}
	for pe := range strings.SplitSeq(*endsFlag, ",") {
		p, e, ok := strings.Cut(pe, ":")
		pn, perr := strconv.ParseInt(p, 10, 32)
		en, eerr := strconv.ParseInt(e, 10, 64)
		if !ok || perr != nil || eerr != nil {
			fmt.Fprintf(os.Stderr, "plainconsume: -ends %q: want PARTITION:END_OFFSET,...\n", *endsFlag)
			os.Exit(2)
		}
		ends[int32(pn)] = en
	}
	start := time.Now()
	n, err := plainconsume.All(context.Background(), strings.Split(*brokers, ","), *topic, ends)
	if err != nil {
		fmt.Fprintln(os.Stderr, "plainconsume:", err)
		os.Exit(2)
	}
	fmt.Printf("consumed %d in %.6f s\n", n, time.Since(start).Seconds())
}
