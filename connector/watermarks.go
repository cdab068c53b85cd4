package connector

// Lag returns how many retained offsets, up to the last stable offset (where
// a read_committed reader ends), a reader whose next offset is next has not
// reached yet: LastStable - max(next, LogStart), never negative. Offsets
// below LogStart are not lag, since retention deleted them and no reader
// can reach them any more: Lost counts them.
//
// For a partition never read, pass next = LogStart (or 0): all of its
// retained committed log is lag.
func (w Watermarks) Lag(next int64) int64 {
	return max(0, w.LastStable-max(next, w.LogStart))
}

// Lost returns how many offsets below LogStart a reader whose next offset is
// next has not read: LogStart - next, never negative. They were deleted by
// retention before the reader got to them.
func (w Watermarks) Lost(next int64) int64 {
	return max(0, w.LogStart-next)
}
