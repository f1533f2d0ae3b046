package core

import (
	"regexp"
	"strings"

	"go.uber.org/zap"
)

// Messages a tenant reads never name another project (issue 29): a name
// that is taken says so, and by whom only when the holder is of the same
// project. The holder stays in the log, for an admin.

// ownerFor says who rollout owner id owner is, for a message to a caller
// of project: the logical cloud or traffic group when it is project's,
// else only that another project holds it.
func ownerFor(project, owner string) string {
	if p, ok := ownerProject(owner); ok && p != project {
		return "another project"
	}
	return ownerName(owner)
}

// ownerProject is the project of a tenant's rollout owner id
// ("lc/<project>/<lc>", "traffic/<project>/...", a mesh's remote secrets
// "meshpeers/<project>/<lc>"); ok false for others (a cluster's Istio
// CRDs, "mesh/<provider>/<cluster>").
func ownerProject(owner string) (string, bool) {
	kind, rest, ok := strings.Cut(owner, "/")
	if !ok || (kind != "lc" && kind != "traffic" && kind != "meshpeers") {
		return "", false
	}
	p, _, ok := strings.Cut(rest, "/")
	return p, ok
}

// managedBy is how the resource synchronizer names an object's holder in
// its messages ("... is managed by lc/p2/lc1: refused").
var managedBy = regexp.MustCompile(`managed by ((?:lc|traffic|meshpeers)/[a-z0-9-]+(?:/[a-z0-9.-]+)*)`)

// hideOwners rewrites the resource synchronizer's message msg for a
// caller of project: another project's owner id becomes "another
// project". hidden reports whether anything was rewritten.
func hideOwners(project, msg string) (out string, hidden bool) {
	out = managedBy.ReplaceAllStringFunc(msg, func(m string) string {
		owner := strings.TrimPrefix(m, "managed by ")
		if p, ok := ownerProject(owner); ok && p != project {
			hidden = true
			return "managed by another project"
		}
		return m
	})
	return out, hidden
}

// logHolder logs, for an admin, the holder a tenant's 409 does not name.
func logHolder(log *zap.Logger, project, lc, what, owner string) {
	if p, ok := ownerProject(owner); ok && p != project {
		log.Info("refused: held by another project", zap.String("logical_cloud", project+"/"+lc),
			zap.String("object", what), zap.String("holder", owner))
	}
}

// hidden is msg with other projects' owners hidden (hideOwners).
func hidden(project, msg string) string {
	out, _ := hideOwners(project, msg)
	return out
}

// hiddenManagers are field managers as a caller of project may see them:
// another project's rollout ("dcm/<owner>") is "dcm/another project".
func hiddenManagers(project string, managers []string) []string {
	var out []string
	for _, m := range managers {
		if owner, ok := strings.CutPrefix(m, "dcm/"); ok {
			if p, ok := ownerProject(owner); ok && p != project {
				m = "dcm/another project"
			}
		}
		out = append(out, m)
	}
	return out
}
