// Package replay owns rebuilding tables from the log: where a replay starts
// and ends (Bound: earliest, offsets, a record time, a snapshot's positions;
// end, offsets, a time), the plan those bounds resolve to against the
// broker (Plan: a finite job with a known start and end per partition),
// the target it writes (a new table marked PropOf, or a branch of an
// existing table created empty, with its recorded end PropUntil), resuming
// an interrupted replay, publishing a branch as main, and folding the log
// into a state table (Options.Fold).
//
// It does not consume. A replay is the live sink with a start and an end:
// Run hands Plan.Config to connector.NewSink and runs that sink, so the
// consumer, offset checks, flush policy and commit path (retries and
// fencing included) are the connector's, written once. connector in turn
// knows nothing of replays: it takes start and end offsets.
package replay
