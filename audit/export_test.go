package audit

// WithContentWindow returns o with content windows of n offsets, where the
// content level's default is maxDigestsAhead.
func WithContentWindow(o Options, n int64) Options {
	o.contentWindow = n
	return o
}

// WithoutKept returns o auditing as a ledger longer than keepRangesMax is
// audited, whatever the ledger's length: no range kept for the report.
func WithoutKept(o Options) Options {
	o.keepNoRanges = true
	return o
}
