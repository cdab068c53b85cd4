package audit

// WithContentWindow returns o with content windows of n offsets, where the
// content level's default is maxDigestsAhead.
func WithContentWindow(o Options, n int64) Options {
	o.contentWindow = n
	return o
}
