// Package text holds the phrasing helpers that floe's messages, in more
// than one package, share.
package text

import (
	"fmt"
	"strings"
)

// AndList joins "a", "a and b", "a, b and c".
func AndList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

// Ranges writes sorted numbers (partitions) as runs: 0-3,7,9-12. A wide
// topic's 500 partitions are "0-499", not a 2 KB list.
func Ranges(ps []int32) string {
	var out []string
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if j == i {
			out = append(out, fmt.Sprint(ps[i]))
		} else {
			out = append(out, fmt.Sprintf("%d-%d", ps[i], ps[j]))
		}
		i = j + 1
	}
	return strings.Join(out, ",")
}
