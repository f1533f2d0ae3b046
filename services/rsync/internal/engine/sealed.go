package engine

import (
	"context"
	"encoding/json"
	"fmt"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Sensitive resources (Resource.sensitive, rp.g. a Secret holding a CA's
// key) never sit in clear in rsync's records: the rollout record keeps
// their hash in place of the manifest and the manifests themselves as one
// sealed secret of the record (store.Secret, under rsync's own keys); the
// engine opens it when it loads the rollout. Status only ever shows an
// object's kind and name and its manifest's hash, for every resource.

// sealedSecret names the rollout record's sealed secret that holds its
// sensitive manifests.
const sealedSecret = "sensitive"

// parseResource parses a resource's manifest. A sensitive one's parse
// errors say what is wrong but never quote the manifest.
func parseResource(field, text string, sensitive bool) (*object, error) {
	obj, err := parseManifest(field, text)
	if err != nil {
		if sensitive {
			return nil, errs.Invalid(field, "is not one Kubernetes object with apiVersion, kind and metadata.name (a sensitive manifest: the parser's message is not shown)")
		}
		return nil, err
	}
	if sensitive {
		obj.sensitive, obj.text = true, text
	}
	return obj, nil
}

// sealedManifests is the secret that holds rec's sensitive manifests, in
// the order of rec.Sealed (an empty list when there is none left).
func sealedManifests(rec *rsyncv1.StoredRollout, objs []*object) (store.Secret, error) {
	texts := make([]string, 0, len(rec.GetSealed()))
	for _, i := range rec.GetSealed() {
		texts = append(texts, objs[i].text)
	}
	b, err := json.Marshal(texts)
	if err != nil {
		return store.Secret{}, errs.Internal(err, "seal sensitive manifests")
	}
	return store.Secret{Name: sealedSecret, Value: b}, nil
}

// openManifests answers rec's manifests, the sealed ones opened, and which
// of them are sensitive.
func (rp *replicas) openManifests(ctx context.Context, rec *rsyncv1.StoredRollout) ([]string, []bool, error) {
	manifests := append([]string(nil), rec.GetManifests()...)
	sensitive := make([]bool, len(manifests))
	if len(rec.GetSealed()) == 0 {
		return manifests, sensitive, nil
	}
	b, err := rp.rollouts.Secret(ctx, rec.GetOwner(), sealedSecret)
	if err != nil {
		return nil, nil, fmt.Errorf("stored rollout %q: open its sensitive manifests: %w", rec.GetOwner(), err)
	}
	var texts []string
	if err := json.Unmarshal(b, &texts); err != nil || len(texts) != len(rec.GetSealed()) {
		return nil, nil, fmt.Errorf("stored rollout %q: its sealed manifests do not match the record (%d sealed, %d indexed)", rec.GetOwner(), len(texts), len(rec.GetSealed()))
	}
	for j, i := range rec.GetSealed() {
		if int(i) >= len(manifests) {
			return nil, nil, fmt.Errorf("stored rollout %q: sealed manifest index %d out of range", rec.GetOwner(), i)
		}
		manifests[i], sensitive[i] = texts[j], true
	}
	return manifests, sensitive, nil
}
