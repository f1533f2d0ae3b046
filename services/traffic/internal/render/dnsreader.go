package render

// The DNS reader: the traffic controller's external-dns runs read a
// cluster's DNSEndpoint records as a ServiceAccount of the group's own
// rollout, in the logical cloud's namespace, allowed to get and list
// DNSEndpoints there and nothing else (the resource synchronizer issues
// the traffic program tokens of its own rollouts' ServiceAccounts only).

// DNSReader is the name of the group's reader ServiceAccount, Role and
// RoleBinding.
func DNSReader(group string) string { return groupName(group, "dns-reader") }

// dnsReaders adds the reader's objects to every cluster that publishes a
// DNS name, and tells each run whom to read as.
func (b *builder) dnsReaders() {
	if len(b.runs) == 0 {
		return
	}
	name, g := DNSReader(b.in.Group), owner{kind: KindGroup}
	sa := &object{apiVersion: "v1", kind: "ServiceAccount", name: name, rank: rankReader, owner: g, body: map[string]any{}}
	role := &object{apiVersion: rbacV1, kind: "Role", name: name, rank: rankReader, owner: g, body: map[string]any{
		"rules": []any{map[string]any{
			"apiGroups": []any{"externaldns.k8s.io"},
			"resources": []any{"dnsendpoints"},
			"verbs":     []any{"get", "list"},
		}},
	}}
	binding := &object{apiVersion: rbacV1, kind: "RoleBinding", name: name, rank: rankReader, owner: g, body: map[string]any{
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": name, "namespace": b.in.Namespace}},
	}}
	for i := range b.runs {
		b.runs[i].Namespace, b.runs[i].ServiceAccount = b.in.Namespace, name
	}
	for c := range b.objects {
		if b.publishing[c] {
			b.objects[c] = append(b.objects[c], sa, role, binding)
		}
	}
}
