package istiotest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dcm-project/dcm/platform/kubetest"
)

// AcceptedWarning is a warning of Istio's validation that Validate lets
// pass: every object whose warning contains Match, for Reason.
type AcceptedWarning struct {
	Kind, Match, Reason string
}

// AcceptedWarnings are the warnings DCM's rendered objects may draw from
// Istio's validation, each with why it is right there. Any other warning
// fails Validate, as an error does.
var AcceptedWarnings = []AcceptedWarning{}

// Finding is istio-validate's verdict on one object.
type Finding struct {
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Errors    []string `json:"errors"`
	Warnings  []string `json:"warnings"`
}

// Validate checks manifests (JSON objects, each an Istio kind) with the
// config validation of the pinned istio.io/istio (istio-validate, built
// from test/istio into bin/istio) and fails t on any error, or on any
// warning not in AcceptedWarnings. It returns the findings, one per
// manifest in order, so that a test can also assert on them.
func Validate(t testing.TB, manifests []string) []Finding {
	t.Helper()
	findings, stderr, err := runValidate(manifests)
	if err != nil {
		t.Fatalf("istio-validate: %v\n%s", err, stderr)
	}
	if len(findings) != len(manifests) {
		t.Fatalf("istio-validate judged %d objects, want %d\n%s", len(findings), len(manifests), stderr)
	}
	for _, f := range findings {
		for _, e := range f.Errors {
			t.Errorf("Istio refuses %s %s/%s: %s", f.Kind, f.Namespace, f.Name, e)
		}
		for _, w := range f.Warnings {
			if !accepted(f.Kind, w) {
				t.Errorf("Istio warns about %s %s/%s: %s (accept it in istiotest.AcceptedWarnings with a reason, or fix it)", f.Kind, f.Namespace, f.Name, w)
			}
		}
	}
	return findings
}

// ValidateFindings runs istio-validate over manifests and returns its
// findings without judging them (a test that expects a refusal).
func ValidateFindings(t testing.TB, manifests []string) []Finding {
	t.Helper()
	findings, stderr, err := runValidate(manifests)
	if err != nil {
		t.Fatalf("istio-validate: %v\n%s", err, stderr)
	}
	return findings
}

func accepted(kind, warning string) bool {
	for _, a := range AcceptedWarnings {
		if (a.Kind == "" || a.Kind == kind) && strings.Contains(warning, a.Match) {
			return true
		}
	}
	return false
}

// runValidate builds istio-validate if needed and runs it over manifests.
// Its exit status 1 (an object has an error) is not an error here: the
// findings say which.
func runValidate(manifests []string) ([]Finding, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	root, err := kubetest.RepoRoot()
	if err != nil {
		return nil, "", err
	}
	bin, err := BuildValidate(ctx, root)
	if err != nil {
		return nil, "", err
	}
	cmd := exec.CommandContext(ctx, bin)
	cmd.Stdin = strings.NewReader(strings.Join(manifests, "\n") + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		err = nil
	}
	if err != nil {
		return nil, stderr.String(), err
	}
	var findings []Finding
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
	for sc.Scan() {
		var f Finding
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return nil, stderr.String(), err
		}
		findings = append(findings, f)
	}
	return findings, stderr.String(), sc.Err()
}
