package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

func fromYAML(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(text))
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(js))
	return u
}

func withFields(u *unstructured.Unstructured, entries ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	u.SetManagedFields(entries)
	return u
}

func fieldsEntry(manager, fieldsV1 string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fieldsV1)}
}

const (
	mine       = "dcm/lc/p/a"
	quotaWant  = "{apiVersion: v1, kind: ResourceQuota, metadata: {name: q, namespace: ns, labels: {dcm.io/managed-by-rsync: 'true'}}, spec: {hard: {configmaps: '10', requests.storage: 1Gi}}}"
	quotaOwned = `{"f:metadata":{"f:labels":{"f:dcm.io/managed-by-rsync":{}}},"f:spec":{"f:hard":{"f:configmaps":{},"f:requests.storage":{}}}}`
)

func TestDriftOfComparesWhatTheManifestSets(t *testing.T) {
	want := fromYAML(t, quotaWant)
	// As the API server stores it: defaults and status added, the quantity
	// written another way.
	same := withFields(fromYAML(t, `{apiVersion: v1, kind: ResourceQuota,
  metadata: {name: q, namespace: ns, uid: u1, resourceVersion: '7', labels: {dcm.io/managed-by-rsync: 'true', extra: x}},
  spec: {hard: {configmaps: '10', requests.storage: '1073741824', pods: '4'}, scopes: []},
  status: {hard: {configmaps: '10'}, used: {configmaps: '1'}}}`), fieldsEntry(mine, quotaOwned),
		fieldsEntry("kube-controller-manager", `{"f:status":{"f:used":{}}}`))
	fields, managers := driftOf(want, same, mine)
	require.Empty(t, fields, "defaults, status, other keys and quantity forms are no drift")
	require.Empty(t, managers)

	// kubectl edit changed one of the quantities: it owns that field now.
	edited := withFields(fromYAML(t, `{apiVersion: v1, kind: ResourceQuota, metadata: {name: q, namespace: ns, labels: {dcm.io/managed-by-rsync: 'true'}},
  spec: {hard: {configmaps: '99', requests.storage: 1Gi}}}`),
		fieldsEntry(mine, `{"f:metadata":{"f:labels":{"f:dcm.io/managed-by-rsync":{}}},"f:spec":{"f:hard":{"f:requests.storage":{}}}}`),
		fieldsEntry("kubectl-edit", `{"f:spec":{"f:hard":{"f:configmaps":{}}}}`))
	fields, managers = driftOf(want, edited, mine)
	require.Equal(t, []string{".spec.hard.configmaps"}, fields)
	require.Equal(t, []string{"kubectl-edit"}, managers)

	// A label removed by an update: no one owns it any more.
	unlabeled := withFields(fromYAML(t, `{apiVersion: v1, kind: ResourceQuota, metadata: {name: q, namespace: ns},
  spec: {hard: {configmaps: '10', requests.storage: 1Gi}}}`), fieldsEntry(mine, `{"f:spec":{"f:hard":{"f:configmaps":{},"f:requests.storage":{}}}}`))
	fields, managers = driftOf(want, unlabeled, mine)
	require.Equal(t, []string{".metadata.labels"}, fields)
	require.Empty(t, managers)

	// A value only rsync's manager owns, written differently by the API
	// server, is its normalization of what rsync applied, not drift.
	normalized := withFields(fromYAML(t, `{apiVersion: v1, kind: ResourceQuota, metadata: {name: q, namespace: ns, labels: {dcm.io/managed-by-rsync: 'true'}},
  spec: {hard: {configmaps: 'ten', requests.storage: 1Gi}}}`), fieldsEntry(mine, quotaOwned))
	fields, _ = driftOf(want, normalized, mine)
	require.Empty(t, fields)
}

func TestDriftOfLists(t *testing.T) {
	want := fromYAML(t, `{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: dev, namespace: ns},
  rules: [{apiGroups: [''], resources: [configmaps], verbs: [get, list]}]}`)
	live := withFields(fromYAML(t, `{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: dev, namespace: ns},
  rules: [{apiGroups: [''], resources: [configmaps], verbs: [get, list, delete]}]}`),
		fieldsEntry("kubectl-edit", `{"f:rules":{}}`))
	fields, managers := driftOf(want, live, mine)
	require.Equal(t, []string{".rules[0].verbs"}, fields)
	require.Equal(t, []string{"kubectl-edit"}, managers, "an atomic list is owned as a whole")

	// Defaulted fields inside list elements are no drift.
	dwant := fromYAML(t, `{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: ns}, spec: {containers: [{name: c, image: busybox}]}}`)
	dlive := withFields(fromYAML(t, `{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: ns},
  spec: {containers: [{name: c, image: busybox, imagePullPolicy: Always}], restartPolicy: Always}}`))
	fields, _ = driftOf(dwant, dlive, mine)
	require.Empty(t, fields)
}

func TestDriftOfSecretStringData(t *testing.T) {
	want := fromYAML(t, `{apiVersion: v1, kind: Secret, metadata: {name: s, namespace: ns}, stringData: {k: v}}`)
	live := fromYAML(t, `{apiVersion: v1, kind: Secret, metadata: {name: s, namespace: ns}, data: {k: dg==}, type: Opaque}`)
	fields, _ := driftOf(want, live, mine)
	require.Empty(t, fields, "stringData is written into data, never stored")
}

func TestRenderPath(t *testing.T) {
	require.Equal(t, `.spec.hard["requests.storage"]`, renderPath([]pathSeg{"spec", "hard", "requests.storage"}))
	require.Equal(t, ".rules[2].verbs", renderPath([]pathSeg{"rules", 2, "verbs"}))
}

// TestNoteDrift: a drift is recorded once, marks the resource for a
// forced repair, and the repair's outcome is recorded; a report-only
// rollout records it and leaves the resource applied; a change with no
// other manager that comes back after its repair is not repaired again.
func TestNoteDrift(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	e := &driftWatcher{board: &board{workers: map[string]*worker{"edge/c1": {kick: make(chan struct{}, 1)}}, log: zap.New(core)}}
	newTask := func(reportOnly bool) (*task, *rsyncv1.ResourceStatus) {
		o := &owner{rec: &rsyncv1.StoredRollout{Owner: "lc/p/a", ReportDriftOnly: reportOnly}, changed: make(chan struct{})}
		r := &rsyncv1.ResourceStatus{ApiVersion: "v1", Kind: "ResourceQuota", Namespace: "ns", Name: "q",
			Operation: rsyncv1.Operation_OPERATION_APPLY, State: rsyncv1.State_STATE_APPLIED, Owned: true}
		tk := &task{owner: o, provider: "edge", cluster: "c1", state: &rsyncv1.StoredClusterState{Resources: []*rsyncv1.ResourceStatus{r}}}
		return tk, r
	}
	drift := func(fields []string, managers ...string) *rsyncv1.Drift {
		return &rsyncv1.Drift{ApiVersion: "v1", Kind: "ResourceQuota", Namespace: "ns", Name: "q", Fields: fields, Managers: managers}
	}

	tk, r := newTask(false)
	e.noteDrift(tk, r, drift([]string{".spec.hard.configmaps"}, "kubectl-edit"))
	require.Equal(t, rsyncv1.State_STATE_PENDING, r.GetState(), "marked for a repair")
	require.True(t, e.repairing(tk, r))
	e.noteDrift(tk, r, drift([]string{".spec.hard.configmaps"}, "kubectl-edit"))
	require.Len(t, tk.state.GetDrift(), 1, "the same drift is recorded once")
	require.Empty(t, logs.FilterMessage("drift: repaired").All())
	e.noteRepair(tk, r, nil)
	require.True(t, tk.state.GetDrift()[0].GetRepaired())
	require.False(t, e.repairing(tk, r))
	repaired := logs.FilterMessage("drift: repaired").All()
	require.Len(t, repaired, 1, "a repair is logged at info")
	require.Equal(t, map[string]any{"owner": "lc/p/a", "cluster": "edge/c1", "object": "ResourceQuota ns/q (v1)",
		"deleted": false, "fields": []any{".spec.hard.configmaps"}}, repaired[0].ContextMap())

	// The same fields, no other manager, right after the repair: the
	// cluster does not keep them; not repaired again.
	r.State = rsyncv1.State_STATE_APPLIED
	e.noteDrift(tk, r, drift([]string{".spec.hard.configmaps"}))
	require.Len(t, tk.state.GetDrift(), 2)
	require.Equal(t, errReappears, tk.state.GetDrift()[1].GetError())
	require.Equal(t, rsyncv1.State_STATE_APPLIED, r.GetState())
	require.False(t, e.repairing(tk, r))

	rt, rr := newTask(true)
	e.noteDrift(rt, rr, &rsyncv1.Drift{ApiVersion: "v1", Kind: "ResourceQuota", Namespace: "ns", Name: "q", Deleted: true})
	require.Equal(t, rsyncv1.State_STATE_APPLIED, rr.GetState(), "report only")
	require.False(t, rt.state.GetDrift()[0].GetRepaired())
	require.False(t, e.repairing(rt, rr))

	// At most maxDrift records, the newest kept.
	for i := range 30 {
		e.noteDrift(rt, rr, drift([]string{".spec.hard.f" + string(rune('a'+i%26)) + string(rune('a'+i/26))}))
	}
	require.Len(t, rt.state.GetDrift(), maxDrift)
	require.Equal(t, ".spec.hard.fdb", rt.state.GetDrift()[maxDrift-1].GetFields()[0])
}
