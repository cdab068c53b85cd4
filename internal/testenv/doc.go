// Package testenv owns starting throwaway real servers for tests: a versitygw
// S3 gateway (posix backend on a temporary directory) and a PostgreSQL server
// (initdb into a temporary directory). Each server listens on a free port of
// 127.0.0.1, lives only as long as the test that asked for it and is stopped
// in t.Cleanup.
//
// A server that is not installed makes the test skip, with a message that
// says how to install it (.ci/install-servers.sh), unless the environment
// variable FLOE_REQUIRE_SERVERS=1 is set, as CI does: then it is a failure.
//
// The package imports only the standard library, so it adds nothing to the
// module's go.mod. It does not own the servers' binaries: versitygw is pinned
// in tools/go.mod and built from it on demand; PostgreSQL comes from the
// Debian packages.
package testenv
