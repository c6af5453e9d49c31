#!/usr/bin/env bash
# Regenerates every generated file of the repository: formats the protobuf
# sources, generates gen/ with buf (local plugins pinned in tools/protogen/go.mod) and
# the templ components of web/.
# Deterministic: a second run changes nothing. CI runs it and fails when
# `git status --porcelain` shows a difference.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

buf() { go tool -modfile=tools/go.mod buf "$@"; }

buf format -w
buf generate
go tool -modfile=tools/go.mod templ generate -path web
