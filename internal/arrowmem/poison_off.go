//go:build !floe_poison

package arrowmem

const poison = false
