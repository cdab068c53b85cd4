#!/usr/bin/env bash
# Installs the real servers that internal/testenv starts for tests, on a
# Debian machine, as root. Idempotent: installs only what is missing.
#   - PostgreSQL server binaries (initdb, postgres) from Debian's postgresql.
#   - kcat from Debian's kcat (the local stack's documented Kafka client).
#   - jq from Debian's jq, which the deployment guide's scheduled audit script
#     uses (cmd/floe TestScheduledAuditScriptAsDocumented runs it).
#   - the aws CLI from Debian's awscli, which the deployment guide's local-stack
#     block uses. Debian's package rather than pip: CI machines reach Debian's
#     archive but not PyPI. It is version 2.9, older than AWS_ENDPOINT_URL_S3
#     support, which is why the guide passes --endpoint-url.
#   - Chromium from Debian's chromium, which the browser tests drive headless
#     (internal/browser) to render the HTML audit report and the status page.
#   - iproute2 (the ip command) from Debian's iproute2: the fault campaign
#     (cmd/floe TestFaultCampaign) runs sink processes as separate hosts in
#     network namespaces joined by veth pairs and a bridge, and cuts one off.
#     That needs root and CAP_NET_ADMIN (a container must be started with
#     --cap-add NET_ADMIN or --privileged); this script checks that a
#     namespace can be made and says so when it cannot.
#   - versitygw, built from the pin in tools/go.mod into $(go env GOPATH)/bin
#     (about a minute cold).
#   - MinIO's server, built from the pin in tools/minio/go.mod (a module of its
#     own: MinIO is AGPL-3.0 and only ever runs as a separate test server) into
#     $(go env GOPATH)/bin (about five minutes cold on two cores; a version
#     stamp beside it, like versitygw's, skips the build when it is current).
#   - icebird (npm), a second Iceberg reader outside Go that applies row-level
#     deletes: npm ci in internal/icebird installs the versions its
#     package-lock.json pins and patches icebird for iceberg-go's raw-deflate
#     Avro manifests (its postinstall, patch.mjs). Needs Node 20 or later and
#     npm, which the machines have; Debian's nodejs and npm otherwise.
#   - moto_server, from the Python package moto, which emulates Glue and S3.
#     The machines' images ship moto 5.2.1 (in pyenv's Python); where it is
#     missing, pip installs moto[server] into a virtual environment in the
#     user cache (only where PyPI is reachable: these machines reach Debian's
#     archive, the Go module proxy and npm, not PyPI, and Debian packages no
#     moto).
# Each step prints how long it took.
# Run it before the tests with FLOE_REQUIRE_SERVERS=1, which turns a missing
# server into a test failure instead of a skip.
set -euo pipefail

# took prints how long the step that started at $1 (a $SECONDS) took.
took() { echo "install-servers: ($2 took $((SECONDS - $1))s)"; }

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
	start=$SECONDS
	apt_install postgresql
	have_pg || { echo "install-servers: postgresql installed but no initdb/postgres in /usr/lib/postgresql/*/bin" >&2; exit 1; }
	took "$start" postgresql
fi

if command -v kcat >/dev/null; then
	echo "install-servers: kcat present"
else
	echo "install-servers: installing kcat"
	start=$SECONDS
	apt_install kcat
	took "$start" kcat
fi

if command -v aws >/dev/null; then
	echo "install-servers: aws CLI present"
else
	echo "install-servers: installing awscli"
	start=$SECONDS
	apt_install awscli
	took "$start" awscli
fi

if command -v curl >/dev/null; then
	echo "install-servers: curl present"
else
	echo "install-servers: installing curl"
	start=$SECONDS
	apt_install curl ca-certificates
	took "$start" curl
fi

if command -v jq >/dev/null; then
	echo "install-servers: jq present"
else
	echo "install-servers: installing jq"
	start=$SECONDS
	apt_install jq
	took "$start" jq
fi

if command -v ip >/dev/null; then
	echo "install-servers: ip (iproute2) present"
else
	echo "install-servers: installing iproute2"
	start=$SECONDS
	apt_install iproute2
	took "$start" iproute2
fi
probe="floe-probe-$$"
if ip netns add "$probe" 2>/dev/null && ip netns del "$probe"; then
	echo "install-servers: network namespaces can be made"
else
	echo "install-servers: cannot make network namespaces (not root, or no CAP_NET_ADMIN): the fault campaign's network scenario will fail under FLOE_REQUIRE_SERVERS=1" >&2
fi

if command -v chromium >/dev/null; then
	echo "install-servers: chromium present"
else
	echo "install-servers: installing chromium"
	start=$SECONDS
	apt_install chromium
	command -v chromium >/dev/null || { echo "install-servers: chromium installed but not on PATH" >&2; exit 1; }
	took "$start" chromium
fi

if command -v node >/dev/null && command -v npm >/dev/null; then
	echo "install-servers: node $(node --version) and npm present"
else
	echo "install-servers: installing nodejs and npm"
	start=$SECONDS
	apt_install nodejs npm
	took "$start" nodejs
fi
# npm ci every time: it takes seconds, and it is what makes node_modules
# match package-lock.json exactly.
echo "install-servers: npm ci in internal/icebird"
start=$SECONDS
(cd "$repo/internal/icebird" && npm ci --no-audit --no-fund --loglevel=error)
took "$start" icebird

gobin="$(go env GOPATH | cut -d: -f1)/bin"

# build_tool NAME DIR PACKAGE MODULE HOW_LONG builds command NAME from
# PACKAGE of the tools module in $repo/DIR into $gobin, unless the binary
# there carries a stamp of the version of MODULE that DIR/go.mod pins.
build_tool() {
	local name=$1 dir=$2 pkg=$3 module=$4 how_long=$5 want stamp start
	want="$(awk -v m="$module" '$1 == m { print $2 }' "$repo/$dir/go.mod")"
	stamp="$gobin/.$name.version"
	if [[ -x "$gobin/$name" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
		echo "install-servers: $name $want present in $gobin"
		return
	fi
	echo "install-servers: building $name $want into $gobin ($how_long)"
	mkdir -p "$gobin"
	start=$SECONDS
	(cd "$repo/$dir" && GOWORK=off go build -o "$gobin/$name.tmp" "$pkg")
	mv "$gobin/$name.tmp" "$gobin/$name"
	echo "$want" >"$stamp"
	took "$start" "$name build"
}

build_tool versitygw tools github.com/versity/versitygw/cmd/versitygw github.com/versity/versitygw "about a minute"
# MinIO has a tools module of its own, so that the several hundred modules
# it needs (pinned in tools/minio/go.sum) stay out of versitygw's and
# floe's module graphs.
build_tool minio tools/minio github.com/minio/minio github.com/minio/minio "about five minutes on two cores"

# moto: the Glue (and S3) emulator the Glue suite starts. moto_server on
# PATH will do when it starts (the machines' images ship moto 5.2.1 with
# its server's dependencies, in pyenv's Python). Else internal/testenv
# looks in $moto_venv/bin: for a pyenv moto_server whose shims are not on
# this PATH a link goes there; failing that, a virtual environment there
# gets moto[server] from pip (Debian's Python refuses pip installs outside
# one, PEP 668, and bookworm packages no moto).
moto_version=5.2.1
moto_venv="${XDG_CACHE_HOME:-$HOME/.cache}/floe/moto"
pyenv_moto="$(ls "${PYENV_ROOT:-$HOME/.pyenv}"/versions/*/bin/moto_server 2>/dev/null | head -n 1 || true)"
if command -v moto_server >/dev/null && moto_server --help >/dev/null 2>&1; then
	echo "install-servers: moto_server present ($(command -v moto_server))"
elif [[ -x "$moto_venv/bin/moto_server" ]] && "$moto_venv/bin/moto_server" --help >/dev/null 2>&1; then
	echo "install-servers: moto_server present in $moto_venv"
elif [[ -n "$pyenv_moto" ]] && "$pyenv_moto" --help >/dev/null 2>&1; then
	mkdir -p "$moto_venv/bin"
	ln -sf "$pyenv_moto" "$moto_venv/bin/moto_server"
	echo "install-servers: moto_server present ($pyenv_moto, not on PATH: linked into $moto_venv/bin)"
else
	echo "install-servers: installing moto[server] $moto_version with pip into $moto_venv"
	start=$SECONDS
	if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
		apt_install python3 python3-venv python3-pip
	fi
	rm -rf "$moto_venv"
	python3 -m venv "$moto_venv"
	"$moto_venv/bin/pip" install --quiet --disable-pip-version-check "moto[server]==$moto_version" || {
		echo "install-servers: pip could not install moto[server] $moto_version (is PyPI reachable?); the Glue suite needs moto_server" >&2
		exit 1
	}
	"$moto_venv/bin/moto_server" --help >/dev/null || { echo "install-servers: moto installed but $moto_venv/bin/moto_server does not start" >&2; exit 1; }
	took "$start" moto
fi
