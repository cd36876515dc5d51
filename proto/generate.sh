#!/usr/bin/env bash
# Regenerates the Go code for proto/. Needs protoc (Debian: protobuf-compiler),
# protoc-gen-go and protoc-gen-connect-go:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.21.1
set -euo pipefail
cd "$(dirname "$0")"
PATH="$(go env GOPATH)/bin:$PATH"
protoc -I . \
  --go_out=. --go_opt=paths=source_relative \
  --connect-go_out=. --connect-go_opt=paths=source_relative \
  fenced/v1/*.proto fenced/state/v1/*.proto
