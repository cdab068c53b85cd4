// Package testenv owns starting throwaway real servers for tests: S3 servers
// (a versitygw gateway with its posix backend on a temporary directory, a
// MinIO server on a temporary drive, and moto's server, which also serves
// AWS Glue), and a PostgreSQL server (initdb into a temporary directory).
// Each server runs in its own process, listens on a free port of 127.0.0.1,
// lives only as long as the test that asked for it and is stopped in
// t.Cleanup. S3Servers lists the S3 servers the S3 suite runs on, one
// subtest each. NetNS makes network namespaces that stand for separate
// hosts (veth pairs on a bridge, iproute2's ip, as root), to cut off and
// heal.
//
// A server that is not installed (or namespaces that cannot be made) makes
// the test skip, with a message that says how to install it
// (.ci/install-servers.sh), unless the environment variable
// FLOE_REQUIRE_SERVERS=1 is set, as CI does: then it is a failure.
//
// The package imports only the standard library, so it adds nothing to the
// module's go.mod. It does not own the servers' binaries: versitygw is pinned
// in tools/go.mod and built from it on demand; MinIO is pinned in
// tools/minio/go.mod and built by .ci/install-servers.sh (never on demand:
// it takes about five minutes); moto_server comes from the Python package
// moto (on PATH, or where .ci/install-servers.sh puts it in the user
// cache); PostgreSQL comes from the Debian packages.
package testenv
