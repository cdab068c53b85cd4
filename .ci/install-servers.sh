#!/usr/bin/env bash
# Installs the real servers that internal/testenv starts for tests, on a
# Debian machine, as root. Idempotent: installs only what is missing.
#   - PostgreSQL server binaries (initdb, postgres) from Debian's postgresql.
#   - kcat from Debian's kcat (the local stack's documented Kafka client).
#   - the aws CLI from Debian's awscli, which the deployment guide's local-stack
#     block uses. Debian's package rather than pip: CI machines reach Debian's
#     archive but not PyPI. It is version 2.9, older than AWS_ENDPOINT_URL_S3
#     support, which is why the guide passes --endpoint-url.
#   - Chromium from Debian's chromium, which the browser tests drive headless
#     (internal/browser) to render the HTML audit report and the status page.
#   - versitygw, built from the pin in tools/go.mod into $(go env GOPATH)/bin.
# Run it before the tests with FLOE_REQUIRE_SERVERS=1, which turns a missing
# server into a test failure instead of a skip.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# apt_install installs Debian packages, quietly.
apt_install() {
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

have_pg() {
	local d
	for d in /usr/lib/postgresql/*/bin; do
		[[ -x "$d/initdb" && -x "$d/postgres" ]] && return 0
	done
	return 1
}

if have_pg; then
	echo "install-servers: postgresql server binaries present"
else
	echo "install-servers: installing postgresql"
	apt_install postgresql
	have_pg || { echo "install-servers: postgresql installed but no initdb/postgres in /usr/lib/postgresql/*/bin" >&2; exit 1; }
fi

if command -v kcat >/dev/null; then
	echo "install-servers: kcat present"
else
	echo "install-servers: installing kcat"
	apt_install kcat
fi

if command -v aws >/dev/null; then
	echo "install-servers: aws CLI present"
else
	echo "install-servers: installing awscli"
	apt_install awscli
fi

if command -v curl >/dev/null; then
	echo "install-servers: curl present"
else
	echo "install-servers: installing curl"
	apt_install curl ca-certificates
fi

if command -v chromium >/dev/null; then
	echo "install-servers: chromium present"
else
	echo "install-servers: installing chromium"
	apt_install chromium
	command -v chromium >/dev/null || { echo "install-servers: chromium installed but not on PATH" >&2; exit 1; }
fi

gobin="$(go env GOPATH | cut -d: -f1)/bin"
want="$(awk '$1 == "github.com/versity/versitygw" { print $2 }' "$repo/tools/go.mod")"
stamp="$gobin/.versitygw.version"
if [[ -x "$gobin/versitygw" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "install-servers: versitygw $want present in $gobin"
else
	echo "install-servers: building versitygw $want into $gobin (about a minute)"
	mkdir -p "$gobin"
	start=$SECONDS
	(cd "$repo/tools" && GOWORK=off go build -o "$gobin/versitygw.tmp" github.com/versity/versitygw/cmd/versitygw)
	mv "$gobin/versitygw.tmp" "$gobin/versitygw"
	echo "$want" >"$stamp"
	echo "install-servers: built versitygw in $((SECONDS - start))s"
fi
