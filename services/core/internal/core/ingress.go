package core

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/server"
)

// A logical cloud's spec.allow-ingress-from names the logical clouds whose
// namespaces its NetworkPolicy dcm-ingress admits besides its own
// (docs/logical-clouds.md, "Network policies"): "<lc>" of its own project,
// or "<project>/<lc>" of another, which only an admin may name. Core
// checks the list when it is stored (create, PUT), resolves it to
// namespaces when it renders, and refuses to delete a logical cloud that
// another one names (deleteRefused): a name that comes back later must not
// be let in by a reference made for the one that went.

// ingressField is the spec field, as the body names it.
const ingressField = "spec.allow-ingress-from"

// ingressRef splits reference ref made in project into the named logical
// cloud's project and name.
func ingressRef(project, ref string) (string, string) {
	if p, lc, ok := strings.Cut(ref, "/"); ok {
		return p, lc
	}
	return project, ref
}

// checkIngressFrom checks spec.allow-ingress-from of logical cloud lc of
// project at level and answers it as stored: a reference into the own
// project as "<lc>", another project's as "<project>/<lc>". Each names a
// logical cloud that exists and has a namespace (400), not lc itself nor
// one named before (400); another project's only by an admin (403, before
// anything is looked up, so that a tenant learns nothing of other
// projects). kept are the references stored now: one an admin made may be
// sent back (a GET's body) by anyone.
func (s *cloudReader) checkIngressFrom(ctx context.Context, project, lc, level string, refs, kept []string) ([]string, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	if level == levelAdmin {
		return nil, errs.Invalid(ingressField, "an admin logical cloud has no namespace to admit traffic into")
	}
	out := make([]string, 0, len(refs))
	for i, ref := range refs {
		field := fmt.Sprintf("%s[%d]", ingressField, i)
		p, name := ingressRef(project, ref)
		if err := checkName(field, p); err != nil {
			return nil, errs.Invalid(field, "%q is not <logical cloud> or <project>/<logical cloud>", ref)
		}
		if err := checkName(field, name); err != nil {
			return nil, errs.Invalid(field, "%q is not <logical cloud> or <project>/<logical cloud>", ref)
		}
		stored := name
		if p != project {
			stored = p + "/" + name
		}
		switch {
		case p == project && name == lc:
			return nil, errs.Invalid(field, "names the logical cloud itself: its own namespace is always admitted")
		case slices.Contains(out, stored):
			return nil, errs.Invalid(field, "names %q twice", stored)
		case p != project && !server.MayGrant(ctx) && !slices.Contains(kept, stored):
			return nil, errs.Forbidden(field, "only an admin may open a logical cloud to another project's (%q)", ref)
		}
		c, err := s.cloud(ctx, p, name)
		switch {
		case errs.Code(err) == codes.NotFound:
			return nil, errs.Invalid(field, "no logical cloud %q in project %q", name, p)
		case err != nil:
			return nil, err
		case c.GetSpec().GetNamespace() == "":
			return nil, errs.Invalid(field, "logical cloud %q of project %q is at level admin: it has no namespace", name, p)
		}
		out = append(out, stored)
	}
	return out, nil
}

// ingressNamespaces resolves spec.allow-ingress-from of a logical cloud of
// project to the named logical clouds' namespaces, for its render. One
// that is gone (deleted since, which deleteRefused keeps from happening
// but for a race) fails the render rather than open less than asked.
func (s *cloudReader) ingressNamespaces(ctx context.Context, project string, spec *corev1.LogicalCloudSpec) ([]string, error) {
	var out []string
	for i, ref := range spec.GetAllowIngressFrom() {
		p, name := ingressRef(project, ref)
		c, err := s.cloud(ctx, p, name)
		if errs.Code(err) == codes.NotFound {
			return nil, errs.FailedPrecondition("%s[%d]: logical cloud %q of project %q is gone: update the list", ingressField, i, name, p)
		}
		if err != nil {
			return nil, err
		}
		if ns := c.GetSpec().GetNamespace(); ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out, nil
}

// ingressReferrers are the logical clouds (as "<project>/<lc>") whose
// spec.allow-ingress-from names logical cloud lc of project.
func (s *cloudReader) ingressReferrers(ctx context.Context, project, lc string) ([]string, error) {
	const field = "spec.allow_ingress_from" // the stored name
	own, err := s.clouds.Match(ctx, map[string]string{field: lc})
	if err != nil {
		return nil, err
	}
	other, err := s.clouds.Match(ctx, map[string]string{field: project + "/" + lc})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, it := range own {
		if it.Parent == project && !it.Deleting {
			out = append(out, it.ID)
		}
	}
	for _, it := range other {
		if it.Parent != project && !it.Deleting {
			out = append(out, it.ID)
		}
	}
	slices.Sort(out)
	return out, nil
}

// deleteRefused refuses (409 REFERENCED) to delete logical cloud lc of
// project while another logical cloud's spec.allow-ingress-from names it:
// its namespace would stay admitted there, and a logical cloud made later
// with the same namespace would get in. The caller sees the referrers of
// its own project by name, another project's as a count (only an admin
// can change those, and a tenant learns no other project's names).
func (s *cloudReader) deleteRefused(ctx context.Context, project, lc string) error {
	refs, err := s.ingressReferrers(ctx, project, lc)
	if err != nil || len(refs) == 0 {
		return err
	}
	var shown []string
	others := 0
	for _, r := range refs {
		p, name, _ := strings.Cut(r, "/")
		switch {
		case p == project:
			shown = append(shown, name)
		case server.MayGrant(ctx):
			shown = append(shown, r)
		default:
			others++
		}
	}
	if others > 0 {
		shown = append(shown, fmt.Sprintf("%d of other projects (an admin can change them)", others))
	}
	return errs.Because(errs.ReasonReferenced, "logical cloud %q is named in %s of %s: remove it there first",
		lc, ingressField, strings.Join(shown, ", "))
}
