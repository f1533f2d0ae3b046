package engine

// ShardOf is shardOf, for tests that find which replica works a cluster.
func ShardOf(provider, cluster string, n int) int { return shardOf(clusterKey(provider, cluster), n) }
