//go:build floe_poison

package arrowmem

// poison is set by the floe_poison build tag: Free overwrites every buffer
// it keeps, so that a test run with the tag (go test -tags floe_poison)
// turns any read of freed memory into wrong rows that the tests see.
const poison = true
