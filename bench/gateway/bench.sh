#!/bin/sh
# bench.sh: the gateway benchmarks of issue #5 with their figures.
# usage: bench/gateway/bench.sh
# Goals: 1,000 concurrent conversations, inbound message -> provider
# request p50 < 1 ms, p99 < 5 ms (BenchmarkConcurrentConversations/
# convs=1000 at a stress pace, convs=1000,think=2-10s at a human pace:
# p50-ms, p99-ms); CPU per streamed token (cpu-ns/token);
# memory per idle evicted session < 10 KB (BenchmarkIdleSessionMemory/
# evicted: B/session). Issue #15 adds heap allocated per message (B/op,
# allocs/op of the conversation benchmarks, fakes included) and per
# streamed token in the agent (BenchmarkStreamedTokens), CPU per message
# and per streamed token apart (cpusplit.sh), idle RSS <= 20
# MiB and ready < 100 ms (rss.sh), and what each SDK costs (sdkrss.sh).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
go test -run '^$' -bench 'BenchmarkConcurrentConversations/convs=1$' -benchmem -benchtime 20x ./gateway/
go test -run '^$' -bench 'BenchmarkConcurrentConversations/convs=100$' -benchmem -benchtime 500x ./gateway/
go test -run '^$' -bench 'BenchmarkConcurrentConversations/convs=1000$' -benchmem -benchtime 3000x ./gateway/
go test -run '^$' -bench 'BenchmarkConcurrentConversations/convs=1000,think=2-10s$' -benchmem -benchtime 3000x ./gateway/
go test -run '^$' -bench 'BenchmarkStreamedTokens' -benchtime 200x ./agent/
go test -run '^$' -bench 'BenchmarkIdleSessionMemory' -benchtime 2000x ./gateway/
"$ROOT/bench/gateway/cpusplit.sh" 1
"$ROOT/bench/gateway/rss.sh"
"$ROOT/bench/gateway/sdkrss.sh"
