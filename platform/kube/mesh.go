package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MeshClusterID is a cluster's Istio cluster name and network, as every
// service names it (the service mesh's istiod values, the traffic
// controller's endpoints, core's remote secrets): provider and cluster
// joined, hashed down to a label value when longer than 63 characters.
func MeshClusterID(provider, cluster string) string {
	id := provider + "-" + cluster
	if len(id) <= 63 {
		return id
	}
	sum := sha256.Sum256([]byte(provider + "/" + cluster))
	return strings.TrimRight(id[:54], "-") + "-" + hex.EncodeToString(sum[:4])
}
