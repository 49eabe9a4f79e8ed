#!/bin/sh
# bench.sh: the cluster mode benchmarks of issue #14 with their figures
# (see README.md here). Needs the redis-server at 127.0.0.1:6379; every
# benchmark uses a random key prefix and deletes its keys.
# Goals: lease acquire/renew/release on real Redis (ns/op); gateway
# overhead per message in cluster mode vs one process under 2 ms at p99
# (BenchmarkClusterConversations local vs redis: p50-ms, p99-ms); three
# replicas vs one on the 1,000-conversation benchmark (msgs/s); takeover
# after kill -9 under lease TTL + 2 s (takeover.sh).
# usage: bench/cluster/bench.sh [count, default 3]
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
COUNT=${1:-3}
uptime
go test -run '^$' -bench 'BenchmarkLease|BenchmarkDedupeSeen|BenchmarkRatesTake' -benchtime 5000x -count "$COUNT" ./cluster/rediscluster/
go test -run '^$' -bench 'BenchmarkClusterConversations' -benchtime 3000x -count "$COUNT" -timeout 60m ./gateway/
"$ROOT/bench/cluster/takeover.sh" "$COUNT"
uptime
