#!/bin/sh
# takeover.sh: takeover time of a session after a SIGKILL of its owner
# (issue #14, goal: under lease TTL + 2 s). BenchmarkClusterTakeover in
# e2e/cluster_bench_test.go builds cmd/pibot, starts two real `pibot
# serve` replicas on one data directory and the real Redis at
# 127.0.0.1:6379 (random key prefix), kills the session's owner with
# SIGKILL and times the survivor's pibot.lease marker and reply, for
# cluster.lease_ttl 2s and 15s. Every op waits about a TTL.
# usage: bench/cluster/takeover.sh [ops per TTL, default 5]
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
N=${1:-5}
go test -run '^$' -bench 'BenchmarkClusterTakeover' -benchtime "${N}x" -timeout 60m ./e2e/
