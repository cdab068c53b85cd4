// Package text holds the phrasing helpers that floe's messages, in more
// than one package, share.
package text

import "strings"

// AndList joins "a", "a and b", "a, b and c".
func AndList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}
