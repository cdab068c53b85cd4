// Package replay owns rebuilding tables from the log: where a replay starts
// and ends (Bound: earliest, offsets, a record time, a snapshot's positions;
// end, offsets, a time), the plan those bounds resolve to against the
// broker (Plan: a finite job with a known start and end per partition),
// the target it writes (a new table marked PropOf, or a branch of an
// existing table created empty, with its recorded end PropUntil), resuming
// an interrupted replay, publishing a branch as main (an upsert table's
// branch only when it equals main key by key: CompareWithMain), and
// rebuilding upsert tables (Options.Mode and Key; Options.Fold, the latest
// value per key within each partition, is one of them). Legacy state
// tables (mapping.ModeFold) are never written.
//
// It does not consume. A replay is the live sink with a start and an end:
// Run hands Plan.Config to connector.NewSink and runs that sink, so the
// consumer, offset checks, flush policy and commit path (retries and
// fencing included) are the connector's, written once. connector in turn
// knows nothing of replays: it takes start and end offsets.
package replay
