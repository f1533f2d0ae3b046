package kubetest

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// The cluster DNS of a cluster with a node: CoreDNS built from its pinned
// module (test/coredns) into the image DNSImage by `make images`, run by
// StartDNS as the Deployment kube-dns in kube-system behind the Service
// kube-dns at DNSIP, the address every node's kubelet gives pods
// (clusterDNS in node.go's kubelet.yaml). Start starts it on every
// cluster with a node when its tarball is among Options.Images (as make
// clusters and ForTestsWithNodes load them); without it, pods of dnsPolicy
// ClusterFirst get no answer.

// DNSImage is CoreDNS's image (docs/images.md), in bin/images/dnsTarball.
const (
	DNSImage   = "dcm.local/coredns:latest"
	dnsTarball = "coredns.tar"
)

// DNSIP is the cluster DNS's Service address: the tenth of the Service
// range, as kubeadm's kube-dns.
func (c *Cluster) DNSIP() string {
	a := netip.MustParsePrefix(c.serviceCIDR).Addr()
	for range 10 {
		a = a.Next()
	}
	return a.String()
}

// StartDNS applies kube-dns (CoreDNS) to the cluster and waits until its
// Deployment is Available. It is idempotent.
func (c *Cluster) StartDNS(ctx context.Context) error {
	if c.node == nil {
		return fmt.Errorf("kubetest: %s has no node to run its DNS", c.Name)
	}
	f := filepath.Join(c.dir, "kube-dns.yaml")
	if err := os.WriteFile(f, []byte(strings.ReplaceAll(strings.ReplaceAll(dnsManifest, "DNS_IP", c.DNSIP()), "DNS_IMAGE", DNSImage)), 0o600); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, "apply", "-f", f); err != nil {
		return err
	}
	_, err := c.Kubectl(ctx, "-n", "kube-system", "rollout", "status", "deployment/kube-dns", "--timeout=3m")
	return err
}

// dnsManifest is kube-dns: CoreDNS with read access to Services,
// EndpointSlices and Namespaces, answering cluster.local from them and
// forwarding the rest to the node's resolvers. It listens on port 53 as
// kube-dns does, so that NetworkPolicies allowing DNS (port 53 of the
// kube-dns pods: DCM's dcm-egress) mean the same as on any cluster; its
// user is not root, and the pod's net.ipv4.ip_unprivileged_port_start
// (a namespaced, safe sysctl) lets it bind 53.
const dnsManifest = `apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
  - apiGroups: [""]
    resources: [endpoints, services, pods, namespaces]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects:
  - {kind: ServiceAccount, name: coredns, namespace: kube-system}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        forward . /etc/resolv.conf
        cache 30
        loop
        reload
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: 1
  selector:
    matchLabels: {k8s-app: kube-dns}
  template:
    metadata:
      labels: {k8s-app: kube-dns}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile: {type: RuntimeDefault}
        sysctls:
          - {name: net.ipv4.ip_unprivileged_port_start, value: "53"}
      containers:
        - name: coredns
          image: DNS_IMAGE
          imagePullPolicy: IfNotPresent
          args: [-conf, /etc/coredns/Corefile]
          ports:
            - {name: dns, containerPort: 53, protocol: UDP}
            - {name: dns-tcp, containerPort: 53, protocol: TCP}
          readinessProbe:
            httpGet: {path: /ready, port: 8181}
            periodSeconds: 2
          livenessProbe:
            httpGet: {path: /health, port: 8080}
          securityContext:
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities: {drop: [ALL]}
          volumeMounts:
            - {name: config, mountPath: /etc/coredns, readOnly: true}
      volumes:
        - name: config
          configMap: {name: coredns}
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  clusterIP: DNS_IP
  selector: {k8s-app: kube-dns}
  ports:
    - {name: dns, port: 53, targetPort: 53, protocol: UDP}
    - {name: dns-tcp, port: 53, targetPort: 53, protocol: TCP}
`
