package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo is floe version's answer. Its JSON field names are stable
// and always present (floe version --json), so that a script reads the
// same document from every build; Commit and CommitTime are empty when the
// binary was built without VCS information (go build -buildvcs=false, or
// outside a checkout).
type versionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// Modified is set when the commit had uncommitted changes.
	Modified   bool   `json:"modified"`
	CommitTime string `json:"commit_time"`
	Go         string `json:"go"`
	// IcebergGo and FranzGo are the versions of the two libraries floe's
	// behaviour depends on most: the Iceberg and Kafka clients.
	IcebergGo string `json:"iceberg_go"`
	FranzGo   string `json:"franz_go"`
}

// buildCommit is the commit given at link time (-ldflags "-X
// main.buildCommit=SHA"; the Dockerfile's FLOE_COMMIT build argument): an
// image is built without .git, so the toolchain records no commit.
var buildCommit string

// readVersion reads what the Go toolchain recorded in the binary, and
// buildCommit when it recorded no commit.
func readVersion() versionInfo {
	v := readBuildInfo()
	if v.Commit == "" {
		v.Commit = buildCommit
	}
	return v
}

func readBuildInfo() versionInfo {
	v := versionInfo{Version: "(unknown)", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Version = bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		case "vcs.time":
			v.CommitTime = s.Value
		}
	}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		switch d.Path {
		case "github.com/apache/iceberg-go":
			v.IcebergGo = d.Version
		case "github.com/twmb/franz-go":
			v.FranzGo = d.Version
		}
	}
	return v
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print floe's version and commit, and the Go, iceberg-go and franz-go versions it was built with",
		Long: `Print the version of floe (the module version; "(devel)" for a build from a checkout), the
commit it was built from, and the versions of Go, iceberg-go and franz-go in the binary: what a
bug report needs. A binary built without VCS information (go build -buildvcs=false, or outside a
git checkout, as in a Docker build) has no commit unless one was given at link time (-ldflags
"-X main.buildCommit=SHA"; the Dockerfile's --build-arg FLOE_COMMIT); it says so.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := readVersion()
			if asJSON {
				return printJSON(cmd.OutOrStdout(), v)
			}
			printVersion(cmd.OutOrStdout(), v)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of text")
	return cmd
}

func printVersion(w io.Writer, v versionInfo) {
	fmt.Fprintf(w, "floe        %s\n", v.Version)
	switch {
	case v.Commit == "":
		fmt.Fprintf(w, "commit      unknown (built without VCS information)\n")
	case v.CommitTime == "": // given at link time, without the toolchain's details
		fmt.Fprintf(w, "commit      %s\n", v.Commit)
	case v.Modified:
		fmt.Fprintf(w, "commit      %s %s, with uncommitted changes\n", v.Commit, v.CommitTime)
	default:
		fmt.Fprintf(w, "commit      %s %s\n", v.Commit, v.CommitTime)
	}
	fmt.Fprintf(w, "go          %s\n", v.Go)
	fmt.Fprintf(w, "iceberg-go  %s\n", orUnknown(v.IcebergGo))
	fmt.Fprintf(w, "franz-go    %s\n", orUnknown(v.FranzGo))
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}
