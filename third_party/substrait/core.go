// Package substrait provides access to Substrait artifacts via embed.FS.
// Use substrait.GetSubstraitFS() to retrieve the embed.FS object.
package substrait

import "embed"

//go:embed extensions/*
var substraitExtensionsFS embed.FS

func GetSubstraitFS() embed.FS {
	return substraitExtensionsFS
}

func GetSubstraitExtensionsFS() embed.FS {
	return substraitExtensionsFS
}
