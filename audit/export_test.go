package audit

// WithContentWindow returns o with content windows of n offsets, where the
// content level's default is maxDigestsAhead.
func WithContentWindow(o Options, n int64) Options {
	o.contentWindow = n
	return o
}

// SetKeepRangesMax sets, for the test, the ledger size (in ranges) up to
// which the audit keeps every range (keepRangesMax): 0 takes the path of
// a ledger too long to keep.
func SetKeepRangesMax(t interface{ Cleanup(func()) }, n int) {
	old := keepRangesMax
	keepRangesMax = n
	t.Cleanup(func() { keepRangesMax = old })
}
